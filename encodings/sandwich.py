"""Sandwich (Chi et al., ACL 2023): the dot product of sinusoidal embeddings as a fixed bias.

b_h(n) = (sum_{k=1}^{dim/2} cos(n * 10000^(-2k/dim)) - dim/2) * H / (8h), following NVIDIA NeMo's
``SandwichRelativePositionEmbedding`` with ``dim`` the head dimension by default. b(0) = 0 and b <= 0.
"""

from __future__ import annotations

import torch

from .base import EncodingError, PositionEncoding, distance_bias


class Sandwich(PositionEncoding):
    """Parameter-free sinusoidal bias with an ALiBi-like per-head compression ``H / (8h)``."""

    family = "decaying bias"

    def __init__(self, num_heads: int, head_dim: int, dim: int | None = None, base: float = 10000.0):
        super().__init__(num_heads, head_dim)
        self.dim = head_dim if dim is None else dim
        if self.dim < 2 or self.dim % 2:
            raise EncodingError(f"sandwich dim must be even and >= 2, got {self.dim}")
        if not base > 1:
            raise EncodingError(f"sandwich needs base > 1, got {base}")
        frequencies = base ** (-2.0 * torch.arange(1, self.dim // 2 + 1, dtype=torch.float64) / self.dim)
        heads = torch.arange(1, num_heads + 1, dtype=torch.float64)
        self.register_buffer("frequencies", frequencies, persistent=False)
        self.register_buffer("head_scale", (num_heads / (8.0 * heads)).float(), persistent=False)

    def profile(self, distances: torch.Tensor) -> torch.Tensor:
        """Bias values [H, M] at ``distances`` [M]."""
        summed = torch.cos(distances.double()[:, None] * self.frequencies).sum(-1) - self.dim / 2
        return self.head_scale[:, None] * summed.float()

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return distance_bias(self.profile, q_positions, k_positions)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, dim={self.dim}"
