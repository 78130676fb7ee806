"""APE (Vetcha 2026, "Towards Infinite Length Extrapolation"): ltsgen's own parameterisation.

The paper describes APE as adaptive frequency modulation plus a decay bias with linear, logarithmic and
square-root terms; its code is not available, so this is ltsgen's reading of that description:

    logit = q_i^T R(omega_h * theta, i - j) k_j / sqrt(d) - (a_h n + b_h log(1 + n) + c_h sqrt(n)),  n = i - j

omega_h,t = exp(rho_h,t) (rho learnable, 0 at init: plain RoPE), a_h = softplus(alpha_h) + 1e-4 (starts at the
ALiBi slope of head h divided by 4), b_h = softplus(beta_h) and c_h = softplus(gamma_h) (start at 0.1).
The floor on a_h makes sum_n exp(-bias(n)) finite for every parameter value, so attention entropy stays
bounded however long the context. One module per layer.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .alibi import alibi_slopes
from .base import EncodingError, PositionEncoding, RotaryTables, distance_bias
from .rotary import rope_inv_freq, rotary_tables

LINEAR_FLOOR = 1e-4


def _inverse_softplus(y: torch.Tensor) -> torch.Tensor:
    return y + torch.log(-torch.expm1(-y))


class APE(PositionEncoding):
    """Learnable-frequency rotation plus a convergent decay bias (linear + log + sqrt), per head."""

    family = "APE (ltsgen's parameterisation)"

    shared_across_layers = False

    def __init__(
        self,
        num_heads: int,
        head_dim: int,
        base: float = 10000.0,
        log_init: float = 0.1,
        sqrt_init: float = 0.1,
    ):
        super().__init__(num_heads, head_dim)
        if not (log_init > 0 and sqrt_init > 0):
            raise EncodingError(f"ape needs log_init > 0 and sqrt_init > 0, got {log_init} and {sqrt_init}")
        self.base = base
        self.register_buffer("inv_freq", rope_inv_freq(head_dim, base).float(), persistent=False)
        self.log_frequency_scale = nn.Parameter(torch.zeros(num_heads, head_dim // 2))
        linear_init = alibi_slopes(num_heads).float() / 4 - LINEAR_FLOOR
        self.linear = nn.Parameter(_inverse_softplus(linear_init))
        self.log = nn.Parameter(_inverse_softplus(torch.full((num_heads,), float(log_init))))
        self.sqrt = nn.Parameter(_inverse_softplus(torch.full((num_heads,), float(sqrt_init))))

    def rotary_tables(self, positions: torch.Tensor) -> RotaryTables:
        return rotary_tables(positions, self.inv_freq * self.log_frequency_scale.exp())

    def coefficients(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The decay coefficients (a, b, c) per head, each [H]."""
        return F.softplus(self.linear) + LINEAR_FLOOR, F.softplus(self.log), F.softplus(self.sqrt)

    def decay(self, distances: torch.Tensor) -> torch.Tensor:
        """Bias values [H, M] at ``distances`` [M]: ``-(a n + b log(1 + n) + c sqrt(n))``."""
        a, b, c = (value[:, None] for value in self.coefficients())
        return -(a * distances + b * torch.log1p(distances) + c * distances.sqrt())

    @torch.no_grad()
    def learned(self) -> dict[str, Any]:
        """Per head: the decay coefficients, and the frequency multipliers omega (min, median, max)."""
        a, b, c = self.coefficients()
        omega = self.log_frequency_scale.exp()
        return {
            "linear": a.tolist(), "log": b.tolist(), "sqrt": c.tolist(),
            "frequency_scale_min": omega.min(dim=1).values.tolist(),
            "frequency_scale_median": omega.median(dim=1).values.tolist(),
            "frequency_scale_max": omega.max(dim=1).values.tolist(),
        }  # fmt: skip

    def bias(self, q_positions: torch.Tensor, k_positions: torch.Tensor) -> torch.Tensor:
        return distance_bias(self.decay, q_positions, k_positions)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, base={self.base}"
