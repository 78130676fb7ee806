"""The interface every position encoding implements, and the helper for biases that depend only on i - j."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from ltsgen.errors import LtsgenError

#: cos and sin tables [T, D] (or [H, T, D] with per-head frequencies) that rotate q and k at T positions.
RotaryTables = tuple[torch.Tensor, torch.Tensor]


class EncodingError(LtsgenError, ValueError):
    """An unknown encoding, option or option value; the message names it and what is accepted."""


class PositionEncoding(nn.Module):
    """A position encoding acting in one place of attention.

    The logit of head h for a query at position i and a key at position j <= i is
    ``logit_scale * (rotate(q)_i . rotate(k)_j) / sqrt(d) + bias[h, i, j]``; the caller masks j > i.
    Positions are absolute indices, so any block of queries can be evaluated against any keys.
    """

    #: How it encodes position ("rotary", "decaying bias", ...): encodings of one family share a panel in
    #: the comparison plots.
    family: str = ""
    #: True when one instance serves every layer (the model then builds it once).
    shared_across_layers: bool = True
    #: Multiplies q.k / sqrt(d) (YaRN's mscale**2); 1.0 otherwise.
    logit_scale: float = 1.0
    #: The encoding, by name, whose trained weights this one reads: RoPE, RoPE-PI and YaRN train the same
    #: model (RoPE at factor 1) and differ only in how they rescale to read longer. None: its own weights.
    shares_weights_of: str | None = None
    #: Evaluated rescaled to each evaluation length (``set_eval_length``), zero-shot or fine-tuned there
    #: with ``rescaled_options``.
    rescaled: bool = False

    def __init__(self, num_heads: int, head_dim: int):
        super().__init__()
        if num_heads < 1 or head_dim < 1:
            raise EncodingError(f"num_heads and head_dim must be positive, got {num_heads} and {head_dim}")
        self.num_heads = num_heads
        self.head_dim = head_dim

    @classmethod
    def training_options(cls, train_length: int) -> dict[str, Any]:
        """Options that depend on the training length (FIRE's threshold, T5's max distance, ...).

        Args:
            train_length: the context a model is trained at, in tokens.

        Returns:
            Option values that override the constructor's defaults when a model trains at ``train_length``.
        """
        return {}

    @classmethod
    def rescaled_options(cls, length: int, train_length: int) -> dict[str, Any]:
        """Options that stretch a model trained at ``train_length`` tokens to read ``length`` (to fine-tune
        there); empty unless ``rescaled``."""
        return {}

    def rotary_tables(self, positions: torch.Tensor) -> RotaryTables | None:
        """cos and sin for ``positions`` [T], or None when the encoding does not rotate.

        Computed once per forward and reused for q and k (and by every layer an encoding serves).
        """
        return None

    def rotate(
        self, x: torch.Tensor, positions: torch.Tensor, tables: RotaryTables | None = None
    ) -> torch.Tensor:
        """Rotate queries or keys ``x`` [B, H, T, D] at ``positions`` [T]; the identity unless rotary.

        ``tables`` from ``rotary_tables(positions)`` spare recomputing them.
        """
        tables = self.rotary_tables(positions) if tables is None else tables
        if tables is None:
            return x
        cos, sin = tables
        first, second = x.chunk(2, dim=-1)
        return (x * cos + torch.cat((-second, first), dim=-1) * sin).to(x.dtype)

    def set_eval_length(self, length: int) -> None:
        """Prepare to read ``length`` tokens (zero-shot rescaling for RoPE-PI and YaRN); a no-op otherwise."""

    def learned(self) -> dict[str, Any]:
        """The learned values worth reporting after training (plain floats and lists); empty when none."""
        return {}

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor | None:
        """Additive bias [H, Tq, Tk] for queries at ``q_positions`` against keys at ``k_positions``, or None.

        Entries with key position > query position are finite and meaningless; the caller masks them.
        """
        return None

    def extra_repr(self) -> str:
        return f"num_heads={self.num_heads}, head_dim={self.head_dim}"


class NoPE(PositionEncoding):
    """No position encoding: the causal mask is the only source of position information."""

    family = "no position encoding"


def distance_bias(
    table: Callable[[torch.Tensor], torch.Tensor], q_positions: torch.Tensor, k_positions: torch.Tensor
) -> torch.Tensor:
    """Bias [H, Tq, Tk] with ``bias[h, a, b] = table(n)[h]`` at ``n = max(q[a] - k[b], 0)``.

    ``table`` maps distances (a float vector [M]) to values [H, M]. It is evaluated once per distinct
    distance, then laid out as a Toeplitz matrix by taking overlapping windows of the reversed table, so a
    learnable table costs O(H * Tq * Tk) copies rather than O(Tq * Tk) evaluations. ``k_positions`` must
    be consecutive ascending positions (as the model supplies them); ``q_positions`` may be anything.
    """
    num_keys = k_positions.numel()
    first_key = int(k_positions[0])
    if int(k_positions[-1]) - first_key != num_keys - 1:
        raise ValueError("distance_bias needs consecutive ascending key positions")
    q_max, q_min = int(q_positions.max()), int(q_positions.min())
    longest = max(q_max - first_key, 0)
    values = table(torch.arange(longest + 1, device=q_positions.device, dtype=torch.float32))
    # reversed[m] holds distance q_max - first_key - m (negative distances take the value at 0).
    span = q_max - q_min + num_keys
    distances = torch.arange(longest, longest - span, -1, device=q_positions.device).clamp_(min=0)
    reversed_table = values.index_select(1, distances)
    windows = reversed_table.unfold(1, num_keys, 1)  # [H, q_max - q_min + 1, Tk], a view
    return windows.index_select(1, q_max - q_positions.to(torch.long))
