"""Learning-rate schedule: linear warm-up, then cosine decay to a floor."""

from __future__ import annotations

import math


class WarmupCosine:
    """LR multiplier for ``torch.optim.lr_scheduler.LambdaLR``.

    Rises linearly from ``1/warmup`` to 1 over ``warmup`` steps, then follows a cosine from 1 down to
    ``min_ratio`` at ``total`` steps, and stays there. A plain object (not a lambda) so that the
    scheduler's ``state_dict`` carries its settings.
    """

    def __init__(self, warmup: int, total: int, min_ratio: float = 0.1) -> None:
        if total < 1 or warmup < 0 or not 0.0 <= min_ratio <= 1.0:
            raise ValueError(f"bad schedule: warmup={warmup}, total={total}, min_ratio={min_ratio}")
        self.warmup = warmup
        self.total = total
        self.min_ratio = min_ratio

    def __call__(self, step: int) -> float:
        if step < self.warmup:
            return (step + 1) / self.warmup
        span = max(1, self.total - self.warmup)
        progress = min(1.0, (step - self.warmup) / span)
        return self.min_ratio + (1.0 - self.min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
