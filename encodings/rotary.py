"""Rotary encodings: RoPE (Su et al.), RoPE with position interpolation (Chen et al.) and YaRN (Peng et al.).

Pairs follow the "rotate_half" convention of Hugging Face Llama / GPT-NeoX: dimension t is paired with
t + d/2. Keys are rotated at their own positions, so a key cache holds rotated keys.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import EncodingError, PositionEncoding, RotaryTables


def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE frequencies ``base ** (-2t / head_dim)`` for t = 0 .. head_dim/2 - 1, in float64."""
    if head_dim % 2:
        raise EncodingError(f"rotary encodings need an even head_dim, got {head_dim}")
    if not base > 1:
        raise EncodingError(f"rotary encodings need base > 1, got {base}")
    return 1.0 / base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)


def yarn_inv_freq(
    head_dim: int,
    base: float,
    factor: float,
    original_length: int,
    beta_fast: float = 32.0,
    beta_slow: float = 1.0,
) -> tuple[torch.Tensor, float]:
    """YaRN frequencies and attention scale, as Hugging Face ``_compute_yarn_parameters`` (truncate=True).

    Pairs that turn more than ``beta_fast`` times over ``original_length`` keep their frequency, pairs that
    turn less than ``beta_slow`` times are divided by ``factor``, with a linear ramp in the pair index between.
    The attention scale ``0.1 * ln(factor) + 1`` multiplies cos and sin, so logits grow by its square.
    """
    extrapolated = rope_inv_freq(head_dim, base)

    def pair_index(rotations: float) -> float:
        return head_dim * math.log(original_length / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(pair_index(beta_fast)), 0)
    high = min(math.ceil(pair_index(beta_slow)), head_dim - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    keep = 1 - ramp
    inv_freq = extrapolated / factor * (1 - keep) + extrapolated * keep
    attention_scale = 0.1 * math.log(factor) + 1.0 if factor > 1 else 1.0
    return inv_freq, attention_scale


def rotary_tables(positions: torch.Tensor, inv_freq: torch.Tensor) -> RotaryTables:
    """cos and sin of ``positions`` [T] times ``inv_freq`` ([D/2], or [H, D/2] per head), each pair's angle twice."""
    angles = positions.to(torch.float32)[:, None] * inv_freq[..., None, :]  # [T, D/2] or [H, T, D/2]
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


class RoPE(PositionEncoding):
    """Rotary position embedding, the same frequencies in every head and layer."""

    family = "rotary"
    shares_weights_of = "rope"

    def __init__(self, num_heads: int, head_dim: int, base: float = 10000.0):
        super().__init__(num_heads, head_dim)
        self.base = base
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, base).float(), persistent=False)

    def rotary_tables(self, positions: torch.Tensor) -> RotaryTables:
        return rotary_tables(positions, self.inv_freq)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}"


class _Rescaled(RoPE):
    """RoPE stretched by ``factor`` over ``original_length`` (the training length), rescaled zero-shot to read
    longer inputs: ``set_eval_length(L)`` sets the factor to ``max(trained factor, L / original_length)``, so
    a model trained at factor 1 reads L tokens as the papers' zero-shot baselines do, and one fine-tuned at
    factor s keeps s up to ``s * original_length``."""

    rescaled = True

    def __init__(self, num_heads: int, head_dim: int, factor: float, original_length: int, base: float):
        super().__init__(num_heads, head_dim, base)
        if not factor > 0 or original_length < 1:
            raise EncodingError(
                f"{type(self).__name__} needs factor > 0 and original_length >= 1, "
                f"got {factor}, {original_length}"
            )
        self.trained_factor = float(factor)
        self.original_length = original_length
        self.rescale(self.trained_factor)

    @classmethod
    def training_options(cls, train_length: int) -> dict[str, Any]:
        return {"factor": 1.0, "original_length": train_length}

    @classmethod
    def rescaled_options(cls, length: int, train_length: int) -> dict[str, Any]:
        return {"factor": length / train_length, "original_length": train_length}

    def set_eval_length(self, length: int) -> None:
        self.rescale(max(self.trained_factor, length / self.original_length))

    def rescale(self, factor: float) -> None:
        """Use ``factor`` from now on (the frequencies and, for YaRN, the logit scale follow)."""
        raise NotImplementedError

    def _set_inv_freq(self, inv_freq: torch.Tensor) -> None:
        self.inv_freq = inv_freq.to(device=self.inv_freq.device, dtype=torch.float32)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor}, original_length={self.original_length}"


class RoPEPI(_Rescaled):
    """RoPE with linear position interpolation: positions are divided by ``factor``.

    ``factor`` = target length / training length; ``original_length`` is the training length, kept so that
    ``target_length`` (the length the training range is stretched to) is known.
    """

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        factor: float = 4.0,
        original_length: int = 512,
        base: float = 10000.0,
    ):
        super().__init__(num_heads, head_dim, factor, original_length, base)

    def rescale(self, factor: float) -> None:
        self.factor = factor
        self._set_inv_freq(rope_inv_freq(self.head_dim, self.base) / factor)

    @property
    def target_length(self) -> int:
        return round(self.factor * self.original_length)


class YaRN(_Rescaled):
    """YaRN: RoPE with per-pair interpolation (``yarn_inv_freq``) and a logit temperature ``mscale**2``."""

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        factor: float = 4.0,
        original_length: int = 512,
        base: float = 10000.0,
        beta_fast: float = 32.0,
        beta_slow: float = 1.0,
    ):
        if not 0 < beta_slow < beta_fast:
            raise EncodingError(f"yarn needs 0 < beta_slow < beta_fast, got {beta_slow} and {beta_fast}")
        self.beta_fast = beta_fast
        self.beta_slow = beta_slow
        super().__init__(num_heads, head_dim, factor, original_length, base)

    def rescale(self, factor: float) -> None:
        inv_freq, attention_scale = yarn_inv_freq(
            self.head_dim, self.base, factor, self.original_length, self.beta_fast, self.beta_slow
        )
        self.factor = factor
        self._set_inv_freq(inv_freq)
        self.logit_scale = attention_scale**2

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, beta_fast={self.beta_fast}, beta_slow={self.beta_slow}"
