"""KERPLE (Chi et al., NeurIPS 2022): conditionally positive definite kernels as a learned bias.

Two parameters per head, shared across layers as in the reference (one module passed to every layer):
  log:   b_h(n) = -r1_h * log(1 + r2_h * n)     r1 ~ 2*U(0,1), r2 ~ U(0,1), both >= 0.01
  power: b_h(n) = -r1_h * n ** r2_h             r1 ~ U(0,1) >= 0.01, r2 ~ 2*U(0,1) in [0.01, 2]
The reference clamps the stored parameters on every forward; here the clamp acts on the value with the
gradient passed straight through, which gives the same forward and keeps parameters trainable.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .base import EncodingError, PositionEncoding, distance_bias

MIN_PARAMETER = 0.01
MAX_POWER = 2.0


def _clamp_straight_through(x: torch.Tensor, low: float, high: float | None = None) -> torch.Tensor:
    return x + (x.clamp(min=low, max=high) - x).detach()


class Kerple(PositionEncoding):
    """KERPLE bias with the ``log`` or ``power`` kernel; ``scale`` is r1 and ``shape`` is r2."""

    family = "decaying bias"

    VARIANTS = ("log", "power")

    def __init__(self, num_heads: int, head_dim: int, variant: str = "log"):
        super().__init__(num_heads, head_dim)
        if variant not in self.VARIANTS:
            raise EncodingError(f"kerple variant must be one of {self.VARIANTS}, got {variant!r}")
        self.variant = variant
        scale_init, shape_init = (2.0, 1.0) if variant == "log" else (1.0, 2.0)
        self.scale = nn.Parameter(scale_init * torch.rand(num_heads))
        self.shape = nn.Parameter(shape_init * torch.rand(num_heads))

    def parameters_in_use(self) -> tuple[torch.Tensor, torch.Tensor]:
        """r1 and r2 per head as the kernel uses them (clamped), each [H]."""
        high = None if self.variant == "log" else MAX_POWER
        return (
            _clamp_straight_through(self.scale, MIN_PARAMETER),
            _clamp_straight_through(self.shape, MIN_PARAMETER, high),
        )

    def kernel(self, distances: torch.Tensor) -> torch.Tensor:
        """Bias values [H, M] at ``distances`` [M] (float, >= 0)."""
        scale, shape = (value[:, None] for value in self.parameters_in_use())
        if self.variant == "log":
            return -scale * torch.log1p(shape * distances)
        return -scale * distances.pow(shape)

    @torch.no_grad()
    def learned(self) -> dict[str, Any]:
        """r1 and r2 per head (log: ``-r1 log(1 + r2 n)``; power: ``-r1 n^r2``)."""
        scale, shape = self.parameters_in_use()
        return {"r1": scale.tolist(), "r2": shape.tolist()}

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return distance_bias(self.kernel, q_positions, k_positions)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, variant={self.variant!r}"
