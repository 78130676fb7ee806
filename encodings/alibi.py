"""ALiBi (Press et al., ICLR 2022): a fixed linear penalty ``-m_h * (i - j)`` per head."""

from __future__ import annotations

import math

import torch

from .base import EncodingError, PositionEncoding, distance_bias


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """Slopes m_h = 2^(-8h/H) for a power-of-two H; otherwise the recipe of the reference code (float64).

    For H that is not a power of two, with c = 2^floor(log2 H), the c slopes for c heads are followed by
    every other slope of the 2c-head list, so head order is not sorted.
    """
    if num_heads < 1:
        raise EncodingError(f"num_heads must be positive, got {num_heads}")

    def power_of_two(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    closest = 2 ** math.floor(math.log2(num_heads))
    slopes = power_of_two(closest) + power_of_two(2 * closest)[0::2][: num_heads - closest]
    return torch.tensor(slopes, dtype=torch.float64)


class ALiBi(PositionEncoding):
    """Attention with linear biases; the same slopes in every layer, no parameters."""

    family = "decaying bias"

    def __init__(self, num_heads: int, head_dim: int):
        super().__init__(num_heads, head_dim)
        self.register_buffer("slopes", alibi_slopes(num_heads).float(), persistent=False)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return distance_bias(lambda n: -self.slopes[:, None] * n, q_positions, k_positions)
