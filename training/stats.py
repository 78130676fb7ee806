"""Intervals and tests over seeds, from Student's t distribution (exact for whole degrees of freedom).

A comparison trains each encoding with a few seeds; the mean over seeds gets a 95% Student-t interval
(``mean +- t_{0.975, n-1} * s / sqrt(n)``, s the sample standard deviation), and a ranking of two encodings
a paired t-test over seeds (the same seed gives both the same data order and evaluation documents).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

CONFIDENCE = 0.95


def t_central(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with ``df`` (a whole number >= 1) degrees of freedom.

    The closed forms of Abramowitz & Stegun 26.7.3 and 26.7.4 in theta = atan(t / sqrt(df)).
    """
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    t = abs(t)
    if math.isinf(t):
        return 1.0
    theta = math.atan(t / math.sqrt(df))
    cos2 = math.cos(theta) ** 2
    if df % 2:  # odd: (2/pi)(theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    term, total = 1.0, 1.0  # even: sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
    for k in range(1, df // 2):
        term *= cos2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


def t_quantile(confidence: float, df: int) -> float:
    """The t with P(|T| <= t) = ``confidence`` (``t_{(1 + confidence) / 2, df}``), by bisection."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    low, high = 0.0, 1.0
    while t_central(high, df) < confidence:
        low, high = high, high * 2
    for _ in range(200):
        middle = (low + high) / 2
        low, high = (middle, high) if t_central(middle, df) < confidence else (low, middle)
    return (low + high) / 2


def mean_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(mean, low, high)``: the Student-t interval of the mean; with one value, low = high = the value."""
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = sum(values) / n
    if n == 1:
        return mean, mean, mean
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_quantile(confidence, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def paired_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float | None]:
    """``(mean of a - b, two-sided p-value)`` of the paired t-test; p is None with fewer than two pairs."""
    if len(a) != len(b):
        raise ValueError(f"paired samples differ in size: {len(a)} and {len(b)}")
    differences = [x - y for x, y in zip(a, b, strict=True)]
    n = len(differences)
    mean = sum(differences) / n
    if n < 2:
        return mean, None
    sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
    if sd == 0:
        return mean, 0.0 if mean else 1.0
    return mean, 1.0 - t_central(mean / (sd / math.sqrt(n)), n - 1)


def significant(p: float | None, level: float = 1 - CONFIDENCE) -> bool:
    return p is not None and p < level
