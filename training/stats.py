"""Intervals and tests for per-document metrics of runs trained with several seeds, and Holm's correction.

Any metric that gives one number per evaluation document and seed (a loss, an extrapolation penalty, an
attention entropy, a recall accuracy) goes through the same two calls:

- ``bootstrap(values)``: the mean over seeds of each seed's mean over documents, its 95% interval and the
  two-sided p-value of "the mean is 0", from a hierarchical bootstrap: each resample draws the seeds with
  replacement, then, for every seed drawn, that seed's documents with replacement. Both sources of variation
  are in the interval: the training (seeds) and the text (documents).
- ``paired(a, b)``: the same for ``a - b``, document by document within each seed (the same documents and
  seeds give both; pairing removes what the documents share).

Values are ``{seed: [value per document]}``; NaN marks a document without a value (e.g. one without a fact to
recall) and is left out of that seed's mean. The p-value is the percentile-bootstrap one,
``2 * min(P*(mean <= 0), P*(mean >= 0))`` with add-one smoothing, so ``p < 0.05`` exactly when 0 lies outside
the 95% percentile interval (up to resampling noise); the smallest p a run can give is ``2 / (resamples + 1)``.
With few seeds the seed level of the bootstrap is coarse (5 seeds give 126 distinct draws), which is why a
verdict needs ``MIN_SEEDS``.

``holm(pvalues)`` corrects a family of tests for multiplicity (Holm 1979; SciPy has no step-down correction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
MIN_SEEDS = 5  # fewer seeds: intervals are reported, verdicts are "too few seeds"
LEVEL = 0.05  # family-wise error rate of a report's tests (after Holm)

Values = Mapping[int, Sequence[float]]


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its hierarchical-bootstrap interval and the p-value of "the mean is 0"."""

    mean: float
    low: float
    high: float
    p: float
    seeds: int
    documents: int  # values that entered the mean (NaN left out)


def bootstrap(
    values: Values, *, confidence: float = CONFIDENCE, resamples: int = RESAMPLES, seed: int = 0
) -> Estimate:
    """The hierarchical-bootstrap estimate of the mean of ``values`` ({seed: [value per document]}).

    The mean is the mean over seeds of each seed's mean over its documents (each seed weighs the same).
    ``seed`` fixes the resampling, so a report is the same every time it is written.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    groups = [np.asarray(v, dtype=np.float64) for v in values.values()]
    groups = [g[~np.isnan(g)] for g in groups]
    groups = [g for g in groups if g.size]
    if not groups:
        raise ValueError("no values")
    rng = np.random.default_rng(seed)
    n_seeds = len(groups)
    # draws[b, k]: the mean of an independent document resample of the seed drawn at place k of resample b
    chosen = rng.integers(0, n_seeds, size=(resamples, n_seeds))
    draws = np.empty((resamples, n_seeds))
    for index, group in enumerate(groups):
        where = chosen == index
        picks = rng.integers(0, group.size, size=(int(where.sum()), group.size))
        draws[where] = group[picks].mean(axis=1)
    means = draws.mean(axis=1)
    mean = float(np.mean([g.mean() for g in groups]))
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    below = (np.count_nonzero(means <= 0) + 1) / (resamples + 1)
    above = (np.count_nonzero(means >= 0) + 1) / (resamples + 1)
    return Estimate(mean, float(low), float(high), float(min(1.0, 2 * min(below, above))), n_seeds,
                    sum(g.size for g in groups))  # fmt: skip


def differences(a: Values, b: Values) -> dict[int, list[float]]:
    """``a - b`` document by document, for the seeds both have (each seed's documents must be the same)."""
    out = {}
    for key in a.keys() & b.keys():
        left, right = np.asarray(a[key], dtype=np.float64), np.asarray(b[key], dtype=np.float64)
        if left.shape != right.shape:
            raise ValueError(f"seed {key}: {left.size} and {right.size} documents cannot be paired")
        out[key] = (left - right).tolist()
    if not out:
        raise ValueError("no seed in common")
    return dict(sorted(out.items()))


def paired(a: Values, b: Values, **options) -> Estimate:
    """The hierarchical-bootstrap estimate of the mean of ``a - b`` (see ``differences``), paired by seed
    and document; ``options`` as ``bootstrap``'s."""
    return bootstrap(differences(a, b), **options)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjusted p-values, in the given order; None (no test) stays None and is not counted.

    The i-th smallest of m p-values becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``; rejecting where the
    adjusted p lies below the level keeps the family-wise error rate at that level.
    """
    tested = [(p, i) for i, p in enumerate(pvalues) if p is not None]
    adjusted: list[float | None] = [None] * len(pvalues)
    running = 0.0
    for rank, (p, index) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (len(tested) - rank) * p))
        adjusted[index] = running
    return adjusted
