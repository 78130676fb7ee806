"""T5 relative position bias (Raffel et al.), unidirectional: a learned [num_buckets, H] table over log buckets.

As in T5, one table serves every layer.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from .base import EncodingError, PositionEncoding, distance_bias


def t5_relative_position_bucket(
    distance: torch.Tensor, num_buckets: int = 32, max_distance: int = 128
) -> torch.Tensor:
    """Causal bucket of ``distance`` = i - j (negative values count as 0), as T5's unidirectional buckets.

    Distances below num_buckets/2 get their own bucket; larger ones share logarithmically wider buckets up
    to ``max_distance``, beyond which everything falls in the last bucket.
    """
    exact = num_buckets // 2
    n = distance.to(torch.long).clamp(min=0)
    scaled = (
        torch.log(n.float().clamp(min=exact) / exact) / math.log(max_distance / exact) * (num_buckets - exact)
    )
    logarithmic = (exact + scaled.to(torch.long)).clamp(max=num_buckets - 1)
    return torch.where(n < exact, n, logarithmic)


class T5Bias(PositionEncoding):
    """Learned per-head bias per distance bucket, initialised N(0, (num_heads * head_dim) ** -0.5)."""

    family = "learned bias"

    def __init__(self, num_heads: int, head_dim: int, num_buckets: int = 32, max_distance: int = 128):
        super().__init__(num_heads, head_dim)
        if num_buckets < 2 or max_distance <= num_buckets // 2:
            raise EncodingError(
                f"t5 needs num_buckets >= 2 and max_distance > num_buckets / 2, got {num_buckets}, {max_distance}"
            )
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.table = nn.Parameter(torch.randn(num_buckets, num_heads) * (num_heads * head_dim) ** -0.5)

    @classmethod
    def training_options(cls, train_length: int) -> dict[str, Any]:
        """``max_distance`` = min(128, T): T5's own 128 where it fits, and never past the training length, so
        that every bucket is trained rather than left at its initialisation (at T <= 16, where every distance
        falls in the 16 exact buckets, 17: the least the default 32 buckets allow)."""
        return {"max_distance": min(128, max(train_length, 17))}

    def lookup(self, distances: torch.Tensor) -> torch.Tensor:
        buckets = t5_relative_position_bucket(distances, self.num_buckets, self.max_distance)
        return self.table[buckets].T

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return distance_bias(self.lookup, q_positions, k_positions)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, num_buckets={self.num_buckets}, max_distance={self.max_distance}"
