"""Rotary encodings: RoPE (Su et al.), RoPE with position interpolation (Chen et al.) and YaRN (Peng et al.).

Pairs follow the "rotate_half" convention of Hugging Face Llama / GPT-NeoX: dimension t is paired with
t + d/2. Keys are rotated at their own positions, so a key cache holds rotated keys.
"""

from __future__ import annotations

import math

import torch

from .base import PositionEncoding


def rope_inv_freq(head_dim: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE frequencies ``base ** (-2t / head_dim)`` for t = 0 .. head_dim/2 - 1, in float64."""
    if head_dim % 2:
        raise ValueError(f"rotary encodings need an even head_dim, got {head_dim}")
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


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotate ``x`` [..., T, D] by ``positions`` [T] times ``inv_freq`` ([D/2], or [H, D/2] per head)."""
    angles = positions.to(torch.float32)[:, None] * inv_freq[..., None, :]  # [T, D/2] or [H, T, D/2]
    angles = torch.cat((angles, angles), dim=-1)
    return (x * angles.cos() + rotate_half(x) * angles.sin()).to(x.dtype)


class RoPE(PositionEncoding):
    """Rotary position embedding, the same frequencies in every head and layer."""

    def __init__(self, num_heads: int, head_dim: int, base: float = 10000.0):
        super().__init__(num_heads, head_dim)
        self.base = base
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, base).float(), persistent=False)

    def rotate(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        return apply_rotary(x, positions, self.inv_freq)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}"


class RoPEPI(RoPE):
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
        super().__init__(num_heads, head_dim, base)
        if factor <= 0:
            raise ValueError(f"rope_pi factor must be positive, got {factor}")
        self.factor = factor
        self.original_length = original_length
        self.inv_freq /= factor

    @property
    def target_length(self) -> int:
        return round(self.factor * self.original_length)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, factor={self.factor}, original_length={self.original_length}"


class YaRN(RoPE):
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
        super().__init__(num_heads, head_dim, base)
        if factor <= 0:
            raise ValueError(f"yarn factor must be positive, got {factor}")
        inv_freq, attention_scale = yarn_inv_freq(
            head_dim, base, factor, original_length, beta_fast, beta_slow
        )
        self.inv_freq = inv_freq.float()
        self.logit_scale = attention_scale**2
        self.factor = factor
        self.original_length = original_length
        self.beta_fast = beta_fast
        self.beta_slow = beta_slow

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, factor={self.factor}, original_length={self.original_length}, "
            f"beta_fast={self.beta_fast}, beta_slow={self.beta_slow}"
        )
