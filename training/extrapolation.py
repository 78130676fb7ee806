"""The same-token extrapolation penalty, and the unigram baseline that says whether a model learned anything.

At an evaluation length L beyond the training length T, the last T tokens of each sequence are scored twice:
once with the full L-token context (the ordinary pass), and once with only the T tokens before each one (a
T-token window, the context the model was trained with, read at the training scale). ``penalty = full -
window`` in nats per token: negative when the longer context helps, positive when it hurts. Both scores are
of the same tokens, so the difficulty of the text at each position cancels out, which a ratio of perplexities
at two lengths (different tokens) does not. A scored token with fewer than T tokens before it (T < L < 2T)
has its whole context for a window, read at the training scale too. At L <= T the window is the full
context and the penalty is 0.

With ``stride`` s > 1, every s-th of the last T tokens is scored (counting back from the last), both ways:
the cost of the windowed pass is one T-token forward per scored token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ltsgen.training.precision import eval_precision


def scored_positions(length: int, train_length: int, stride: int = 1) -> list[int]:
    """Token indices scored for the penalty: every ``stride``-th of the last min(T, L - 1), ascending."""
    first = max(1, length - train_length)
    return list(range(length - 1, first - 1, -stride))[::-1]


@torch.no_grad()
def window_losses(
    model: torch.nn.Module, tokens: torch.Tensor, positions: list[int], train_length: int,
    device: torch.device, batch_tokens: int, dtype: str,
) -> torch.Tensor:  # fmt: skip
    """Loss [N, len(positions)] of token j of each sequence given only the T tokens before it (every j >= T).

    Leaves the model set for the training length.
    """
    if any(j < train_length for j in positions):
        raise ValueError(f"a T-token window needs T = {train_length} tokens before each scored one")
    model.set_eval_length(train_length)
    per_batch = max(1, batch_tokens // train_length)
    windows = [(row, j) for row in range(tokens.shape[0]) for j in positions]
    losses = []
    for start in range(0, len(windows), per_batch):
        chunk = windows[start : start + per_batch]
        batch = torch.stack([tokens[row, j - train_length : j + 1] for row, j in chunk]).to(device)
        with eval_precision(device, dtype):
            logits = model.next_token_logits(batch[:, :-1])
        losses.append(F.cross_entropy(logits.float(), batch[:, -1], reduction="none").cpu())
    return torch.cat(losses).view(tokens.shape[0], len(positions))


@torch.no_grad()
def near_losses(
    model: torch.nn.Module, tokens: torch.Tensor, positions: list[int], train_length: int,
    device: torch.device, batch_tokens: int, dtype: str,
) -> torch.Tensor:  # fmt: skip
    """Loss [N, len(positions)] of token j of each sequence given its whole context, read at the training
    scale (every j < T: fewer than T tokens before it). Leaves the model set for the training length."""
    if any(j >= train_length for j in positions):
        raise ValueError(f"a token with T = {train_length} tokens before it has a T-token window")
    model.set_eval_length(train_length)
    last = max(positions)
    per_batch = max(1, batch_tokens // last)
    losses = []
    for start in range(0, tokens.shape[0], per_batch):
        batch = tokens[start : start + per_batch, : last + 1].to(device)
        with eval_precision(device, dtype):
            logits = model(batch[:, :-1])
        all_losses = F.cross_entropy(logits.float().transpose(1, 2), batch[:, 1:], reduction="none")
        losses.append(all_losses[:, [j - 1 for j in positions]].cpu())
    return torch.cat(losses)


def same_token_losses(
    model: torch.nn.Module, tokens: torch.Tensor, full: torch.Tensor, train_length: int, stride: int,
    device: torch.device, batch_tokens: int, dtype: str,
) -> tuple[torch.Tensor, torch.Tensor, list[int]]:  # fmt: skip
    """Per-sequence mean loss of the scored tokens with the full context and with a T-token window: two [N]
    tensors, and the scored positions.

    ``full`` is the full-context loss [N, L-1] (entry p is the loss of token p + 1). At L <= T the windowed
    loss is the full one (the same tensor); beyond, a token with fewer than T tokens before it is read on its
    whole context at the training scale. The model is left set for the training length.
    """
    length = tokens.shape[1]
    positions = scored_positions(length, train_length, stride)
    with_full = full[:, [j - 1 for j in positions]]
    windowed = with_full.clone()
    if length > train_length:
        far = [i for i, j in enumerate(positions) if j >= train_length]
        near = [i for i, j in enumerate(positions) if j < train_length]
        if far:
            windowed[:, far] = window_losses(
                model, tokens, [positions[i] for i in far], train_length, device, batch_tokens, dtype
            )
        if near:
            windowed[:, near] = near_losses(
                model, tokens, [positions[i] for i in near], train_length, device, batch_tokens, dtype
            )
    return with_full.double().mean(dim=1), windowed.double().mean(dim=1), positions


def unigram_log_probs(tokens: torch.Tensor) -> torch.Tensor:
    """Log-probabilities [max id + 1] of the unigram model fitted on ``tokens`` (their own frequencies)."""
    counts = torch.bincount(tokens.flatten()).double()
    return (counts / counts.sum()).log()


def unigram_loss(log_probs: torch.Tensor, targets: torch.Tensor) -> float:
    """The loss (nats per token) of ``targets`` under a unigram model (``unigram_log_probs``); a model fitted
    on tokens that include the targets is a strict baseline: no unigram model fitted elsewhere beats it."""
    return float(-log_probs[targets.flatten()].mean())
