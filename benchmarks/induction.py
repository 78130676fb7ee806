"""Induction probe: does a model copy from its context? The skill a cued recall needs, measured without text.

The probe is 128 rows of the copy task (``training/copytask.py``) of 64 tokens: a segment of 8 to 32 random
token ids repeated to fill the row; its score is the share of the repeat's tokens after its first that are
predicted top-1. The segment's length changes from row to row, so only a model that finds the current
token's earlier occurrence and copies what followed it (an induction head) scores high.

    python benchmarks/induction.py --run runs/rope runs/alibi     # probe trained runs' checkpoints
    python benchmarks/induction.py --run runs/rope --data lts     # and the recalls' value-token loss
    python benchmarks/induction.py --copy --encoding rope         # the control: train on the copy task alone

``--copy`` trains ltsgen's own model (the same class, initialisation and optimizer as ``ltsgen train``) on
the copy task only (loss on the repeat), printing the probe every 100 steps with the CPU time: whether the
model and its encoding can learn to copy at all, apart from what the training text teaches.

With ``--data``, each run is also read on the cued recalls within their own training-length window (the
first 64 validation documents of at least 512 tokens, as ``ltsgen evaluate`` reads them): the mean loss of
the value tokens beside its control, paired by recall (Wilcoxon signed-rank), and the share of value tokens
predicted top-1 -- what the context changes before any whole value is recalled -- and the same recalls with a
verbatim cue: the ``--splice`` tokens before each recall's value replaced by those before its earlier
occurrence, so that plain copying answers it (a model that copies random tokens but not a verbatim cue does
not use its copying on text).
"""

from __future__ import annotations

import argparse
import json
import resource
from pathlib import Path
from typing import Any

import torch
from scipy.stats import binomtest, wilcoxon

from ltsgen.training.checkpoint import load_checkpoint
from ltsgen.training.copytask import LONGEST, copy_rows
from ltsgen.training.data import load_eval_sets
from ltsgen.training.evaluate import build_model, load_run, token_scores
from ltsgen.training.model import ModelConfig, TransformerLM
from ltsgen.training.recall import answered, window_set


@torch.no_grad()
def probe(model: TransformerLM) -> float:
    """Share of the copy rows' scored tokens that are the model's top-1 prediction (a fixed set of 128 rows of
    ``2 * LONGEST`` tokens)."""
    training = model.training
    model.eval()
    inputs, targets = copy_rows(128, 2 * LONGEST, model.config.vocab_size, seed=123, step=0)
    predicted = model(inputs).argmax(dim=-1)
    model.train(training)
    scored = targets != -100
    return (predicted[scored] == targets[scored]).float().mean().item()


def probe_run(run: Path) -> None:
    config = ModelConfig.from_dict(json.loads((run / "config.json").read_text())["model"])
    state = load_checkpoint(run / "checkpoint.pt")
    model = TransformerLM(config)
    model.load_state_dict(state["model"])
    print(f"{run}: {config.encoding}, step {state['step']}, induction {probe(model):.3f}")


def recall_windows(run: Path, data: Path):
    """RUN's model config, weights, training length and tokenizer, and DATA's cued recalls within their own
    training-length window (the first 64 validation documents of at least 512 tokens)."""
    model_config, weights, config, tokenizer = load_run(run)
    length = config["train"]["train_length"]
    eval_set = load_eval_sets(data, [512], tokenizer, 64).sets[512]
    if eval_set.recalls is None:
        raise SystemExit(f"{data}: its validation documents carry no cued recalls")
    windows = window_set(eval_set.recalls, eval_set.input_ids, length)
    if not windows.recalls.recalls:
        raise SystemExit(f"{data}: no cued recall lies within its own {length}-token window")
    return model_config, weights, length, tokenizer, windows


def verbatim(windows, tokens: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The windows and their controls with the ``tokens`` tokens before each recall's value replaced by the
    ``tokens`` before its earlier occurrence: a cue that repeats the plant's words verbatim."""
    rows, controls = windows.input_ids.clone(), windows.recalls.control_ids.clone()
    for r in windows.recalls.recalls:
        earlier = r.start - r.distance
        if earlier >= tokens:
            rows[r.row, r.start - tokens : r.start] = rows[r.row, earlier - tokens : earlier]
            controls[r.control_row, r.control_start - tokens : r.control_start] = controls[
                r.control_row, earlier - tokens : earlier
            ]
    return rows, controls


def recall_scores(model, windows, rows=None, controls=None) -> dict[str, Any]:
    """Whole values, first and later value tokens predicted top-1, and the value tokens' mean loss, in the
    recalls and in their controls (``c_`` keys)."""
    rows = windows.input_ids if rows is None else rows
    controls = windows.recalls.control_ids if controls is None else controls
    batch = max(1, 16384 // rows.shape[1])
    scores: dict[str, Any] = {}
    for prefix, ids, row_of, start_of in (
        ("", rows, lambda r: r.row, lambda r: r.start),
        ("c_", controls, lambda r: r.control_row, lambda r: r.control_start),
    ):
        loss, correct = token_scores(model, ids, torch.device("cpu"), batch, "float32")
        spans = [(row_of(r), start_of(r), start_of(r) + r.end - r.start) for r in windows.recalls.recalls]
        scores[prefix + "answered"] = answered(correct, spans)
        scores[prefix + "whole"] = sum(scores[prefix + "answered"])
        scores[prefix + "first"] = sum(bool(correct[i, s - 1]) for i, s, _ in spans)
        scores[prefix + "later"] = sum(int(correct[i, s : e - 1].sum()) for i, s, e in spans)
        scores[prefix + "loss"] = sum(loss[i, s - 1 : e - 1].mean().item() for i, s, e in spans) / len(spans)
        scores[prefix + "values"] = [loss[i, s - 1 : e - 1].mean().item() for i, s, e in spans]
    scores["later_tokens"] = sum(r.end - r.start - 1 for r in windows.recalls.recalls)
    return scores


def recall_line(s: dict[str, Any]) -> str:
    count = len(s["values"])
    pairs = list(zip(s["answered"], s["c_answered"], strict=True))
    only_recall, only_control = pairs.count((True, False)), pairs.count((False, True))
    mcnemar = binomtest(only_recall, only_recall + only_control).pvalue if only_recall + only_control else 1.0
    return (
        f"whole values {s['whole']} / {s['c_whole']} of {count} (only with the fact {only_recall}, only "
        f"without {only_control}: exact McNemar p = {mcnemar:.2g}), first value token {s['first']} / "
        f"{s['c_first']}, later value tokens {s['later']} / {s['c_later']} of {s['later_tokens']}, "
        f"value-token loss {s['loss']:.3f} / {s['c_loss']:.3f} nats (recall / control)"
    )


def value_losses(run: Path, data: Path, splice: int) -> None:
    """Value-token loss and top-1 share of the within-window cued recalls beside their controls, and the
    same recalls with a verbatim cue of ``splice`` tokens."""
    model_config, weights, length, _, windows = recall_windows(run, data)
    model = build_model(model_config, weights, torch.device("cpu"))
    model.set_eval_length(length)
    s = recall_scores(model, windows)
    own, other = s["values"], s["c_values"]
    count = len(own)
    print(
        f"{run}: {count} recalls within {length} tokens; {recall_line(s)}; the value tokens' loss "
        f"is lower in {sum(a < b for a, b in zip(own, other, strict=True))} of {count} "
        f"(Wilcoxon p = {wilcoxon(own, other).pvalue:.2g})"
    )
    s = recall_scores(model, windows, *verbatim(windows, splice))
    print(
        f"  with a verbatim cue ({splice} tokens): whole values {s['whole']} / {s['c_whole']}, first value token "
        f"{s['first']} / {s['c_first']} (recall / control)"
    )


def train_copy(args: argparse.Namespace) -> None:
    torch.manual_seed(args.seed)
    config = ModelConfig(args.vocab_size, args.d_model, args.n_layers, args.n_heads, args.encoding)
    model = TransformerLM(config)
    optimizer = model.configure_optimizer(args.lr, 0.1, (0.9, 0.95), fused=False)
    for step in range(args.steps + 1):
        if step % 100 == 0:
            cpu = resource.getrusage(resource.RUSAGE_SELF).ru_utime
            print(f"{args.encoding} step {step}: induction {probe(model):.3f} ({cpu:.0f} s CPU)", flush=True)
        if step == args.steps:
            break
        inputs, targets = copy_rows(args.batch_size, 2 * LONGEST, args.vocab_size, args.seed, step)
        _, loss = model(inputs, targets)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, nargs="+", help="run folders written by `ltsgen train`")
    parser.add_argument("--data", type=Path, help="with --run: the dataset whose cued recalls to read")
    parser.add_argument("--copy", action="store_true", help="train on the copy task alone (the control)")
    parser.add_argument("--splice", type=int, default=4, help="with --data: tokens of the verbatim cue")
    parser.add_argument("--encoding", default="rope")
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--vocab-size", type=int, default=512)
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--n-layers", type=int, default=2)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args(argv)
    if not args.copy and not args.run:
        parser.error("give --run RUN... or --copy")
    for run in args.run or []:  # each a finished run: its config and checkpoint
        missing = next(
            (run / name for name in ("config.json", "checkpoint.pt") if not (run / name).is_file()), None
        )
        if missing is not None:
            parser.error(f"{missing}: not found (--run takes folders that `ltsgen train` wrote)")
    torch.set_num_threads(args.threads)
    for run in args.run or []:
        probe_run(run)
        if args.data:
            value_losses(run, args.data, args.splice)
    if args.copy:
        train_copy(args)


if __name__ == "__main__":
    main()
