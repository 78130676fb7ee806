"""FIRE (Li et al., ICLR 2024): a learned MLP of the progressively normalised log distance.

    b(i, j) = f( psi(i - j) / psi(max(L, i)) ),   psi(x) = log(|c| x + 1)

f maps R -> R^H (here: two hidden layers of width 32 with ReLU, the paper's best ablation; the public
reference listing has one), c is learnable (init 0.1) and the threshold L is learnable (init 512, stored
as a learnable multiplier of the initial value, as in the reference). One module per layer by default.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from .base import EncodingError, PositionEncoding, distance_bias

EPS = 1e-6
#: Query-key pairs per chunk in the per-pair path; bounds its intermediates.
PAIRS_PER_CHUNK = 1 << 18


def fire_normalized_distance(
    i: torch.Tensor,
    j: torch.Tensor,
    c: float | torch.Tensor = 0.1,
    threshold: float | torch.Tensor | None = 512.0,
) -> torch.Tensor:
    """FIRE's MLP input ``log(|c|(i-j)+1) / (log(|c| max(threshold, i)+1) + 1e-6)``; threshold None: ``max`` is i.

    Broadcasts ``i`` against ``j``; distances i - j below 0 count as 0. The value lies in [0, 1] for j <= i.
    """
    c = torch.as_tensor(c, dtype=torch.float32).abs()
    i = torch.as_tensor(i).to(torch.float32)
    j = torch.as_tensor(j).to(torch.float32)
    normaliser = i if threshold is None else torch.maximum(i, torch.as_tensor(threshold, dtype=torch.float32))
    return torch.log1p(c * (i - j).clamp(min=0)) / (torch.log1p(c * normaliser) + EPS)


class FIRE(PositionEncoding):
    """Functional interpolation for relative positions, one learned MLP [1 -> width -> ... -> H]."""

    family = "learned bias"

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        threshold: float | None = 512.0,
        c: float = 0.1,
        mlp_width: int = 32,
        mlp_layers: int = 2,
        share_across_layers: bool = False,
    ):
        super().__init__(num_heads, head_dim)
        if mlp_layers < 1 or mlp_width < 1:
            raise EncodingError(
                f"fire needs mlp_layers >= 1 and mlp_width >= 1, got {mlp_layers}, {mlp_width}"
            )
        if threshold is not None and not threshold > 0:
            raise EncodingError(f"fire threshold must be positive or None, got {threshold}")
        if not c > 0:
            raise EncodingError(f"fire needs c > 0 (its log transform log(c x + 1)), got {c}")
        self.shared_across_layers = share_across_layers
        layers: list[nn.Module] = []
        width_in = 1
        for _ in range(mlp_layers):
            layers += [nn.Linear(width_in, mlp_width), nn.ReLU()]
            width_in = mlp_width
        layers.append(nn.Linear(width_in, num_heads))
        self.mlp = nn.Sequential(*layers)
        self.c = nn.Parameter(torch.tensor(float(c)))
        self.initial_threshold = threshold
        self.threshold_multiplier = None if threshold is None else nn.Parameter(torch.tensor(1.0))

    @classmethod
    def training_options(cls, train_length: int) -> dict[str, Any]:
        """The threshold L starts at a quarter of the training length (the reference's 512 for 2,048), so that
        training positions span the whole normalised range [0, 1] the MLP later reads."""
        return {"threshold": train_length / 4}

    @torch.no_grad()
    def learned(self) -> dict[str, Any]:
        """c and the threshold L as learned (L is None when disabled)."""
        threshold = self.threshold
        return {"c": float(self.c.abs()), "threshold": None if threshold is None else float(threshold)}

    @property
    def threshold(self) -> torch.Tensor | None:
        """The learned threshold L (a scalar tensor), or None when disabled."""
        if self.threshold_multiplier is None:
            return None
        return (self.threshold_multiplier * self.initial_threshold).abs()

    def _heads(self, u: torch.Tensor) -> torch.Tensor:
        """MLP on normalised distances ``u`` [...] -> [H, ...]."""
        return self.mlp(u.unsqueeze(-1)).movedim(-1, 0)

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        threshold = self.threshold
        c = self.c.abs()
        if threshold is None:
            below = torch.zeros_like(q_positions, dtype=torch.bool)
        else:
            below = q_positions.to(torch.float32) <= threshold.detach()
        # Rows at or below the threshold share the normaliser psi(L): their bias depends on i - j only,
        # so the MLP runs once per distance. Rows above it interpolate the MLP between its knots per pair.
        parts, order = [], []
        if below.any():
            rows = below.nonzero().squeeze(1)
            normaliser = torch.log1p(c * threshold) + EPS

            def table(distances: torch.Tensor) -> torch.Tensor:
                return self._heads(torch.log1p(c * distances) / normaliser)

            parts.append(distance_bias(table, q_positions[rows], k_positions))
            order.append(rows)
        if not below.all():
            rows = (~below).nonzero().squeeze(1)
            parts.append(self._per_pair(q_positions[rows], k_positions, c, threshold))
            order.append(rows)
        if len(parts) == 1:
            return parts[0]
        rows = torch.cat(order)
        return torch.cat(parts, dim=1).index_select(1, torch.argsort(rows))

    def knots(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Points [P] in [0, 1] between which the ReLU MLP is linear, and its values there [H, P].

        Each hidden layer's pre-activations are linear between consecutive points found so far, so their zero
        crossings are exact; adding them layer by layer gives every breakpoint of the MLP on [0, 1].
        """
        linears = [module for module in self.mlp if isinstance(module, nn.Linear)]
        points = torch.tensor([0.0, 1.0], device=self.c.device)
        for depth in range(len(linears) - 1):
            hidden = points[:, None]
            for linear in linears[:depth]:
                hidden = torch.relu(linear(hidden))
            pre = linears[depth](hidden)  # [P, width]
            left, right = pre[:-1], pre[1:]
            crossing = left * right < 0
            fraction = left / torch.where(crossing, left - right, torch.ones_like(left))
            inside = points[:-1, None] + fraction * (points[1:] - points[:-1])[:, None]
            points = torch.sort(torch.cat((points, inside[crossing]))).values
        return points, self._heads(points)

    def _per_pair(
        self,
        q_positions: torch.Tensor,
        k_positions: torch.Tensor,
        c: torch.Tensor,
        threshold: torch.Tensor | None,
    ) -> torch.Tensor:
        points, values = self.knots()
        slope = (values[:, 1:] - values[:, :-1]) / (points[1:] - points[:-1]).clamp(min=1e-12)
        intercept = values[:, :-1] - slope * points[:-1]  # the MLP is intercept + slope * u on each segment
        rows_per_chunk = max(1, PAIRS_PER_CHUNK // k_positions.numel())
        recompute = torch.is_grad_enabled() and self.c.requires_grad
        chunks = []
        for start in range(0, q_positions.numel(), rows_per_chunk):
            rows = q_positions[start : start + rows_per_chunk, None]
            arguments = (rows, k_positions, c, threshold, points, slope, intercept)
            if recompute:  # keep only the bias for backward, not the per-pair intermediates
                chunks.append(checkpoint(self._rows, *arguments, use_reentrant=False))
            else:
                chunks.append(self._rows(*arguments))
        return torch.cat(chunks, dim=1)

    @staticmethod
    def _rows(rows, k_positions, c, threshold, points, slope, intercept) -> torch.Tensor:
        """The MLP at every (row, key) pair, evaluated on the linear piece that holds it: [H, R, K]."""
        u = fire_normalized_distance(rows, k_positions, c, threshold)
        segment = (
            torch.searchsorted(points.detach(), u.detach(), right=True).sub_(1).clamp_(0, points.numel() - 2)
        )
        segment = segment.flatten()
        shape = (slope.shape[0], *u.shape)
        return torch.addcmul(
            intercept.index_select(1, segment).view(shape), slope.index_select(1, segment).view(shape), u
        )

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, threshold={self.initial_threshold}, "
            f"share_across_layers={self.shared_across_layers}"
        )
