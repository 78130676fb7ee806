"""Intervals and tests for per-document metrics of runs trained with several seeds, and Holm's correction.

Any metric that gives one number per evaluation document and seed (a loss, an extrapolation penalty, an
attention entropy, a recall accuracy) goes through the same two calls:

- ``estimate(values)``: the mean over seeds of each seed's mean over documents, its 95% interval and the
  two-sided p-value of "the mean is 0".
- ``paired(a, b)``: the same for ``a - b``, document by document within each seed (the same documents and
  seeds give both; pairing removes what the documents share).

Every seed of a comparison is evaluated on the same documents, so seeds and documents are crossed, not
nested: a document that is hard for one seed is hard for all of them, and its difficulty does not average
out over seeds. The interval is that of the mean of the crossed random-effects model ``value = mean + seed +
document + residual``: its variance ``var(seed) / S + var(document) / N + var(residual) / (S N)``, from the
two-way analysis of variance of the S x N table (a component whose estimate falls below 0 left out), with a t
quantile on Satterthwaite's degrees of freedom, which fall to S - 1 when the seeds dominate. Both sources of
variation are in the interval: the training (seeds) and the text (documents); with one seed, the text alone.

Calibration, simulated here (3,000 tables of 5 seeds x 32 documents under "the mean is 0", in ten mixes of
seed, document and residual variance, from seed-dominated to text-dominated and residual-dominated, the
usual case of a paired difference): tests at 0.05 reject 2.5-5.8% of them (with 3 seeds up to 7.2%),
against 13-34% for a bootstrap that resamples each seed's documents on their own (a nested design), which
the first versions of this module used. ``test_stats.py`` checks the calibration.

Values that are all the same (up to the last bits of a float) give the mean as its own interval (a penalty
at the training length is 0 by definition), and the p-value of the exact sign test on the seeds' means,
``2 ** (1 - S)`` when they share a sign (1 with one seed, 0.0625 with five), else 1: identical values have
no spread to scale a t test by, and five runs that answered alike are five signs, no more. Where only the
documents valued by every seed are alike: no interval and no test.

Values are ``{seed: [value per document]}``, the documents in the same order for every seed; NaN marks a
document without a value (e.g. one without a fact to recall), left out of that seed's mean. The variance is
taken over the documents with a value in every seed.

``holm(pvalues)`` corrects a family of tests for multiplicity (Holm 1979; SciPy has no step-down correction).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ltsgen.errors import require

CONFIDENCE = 0.95
MIN_SEEDS = 5  # fewer seeds: intervals are reported, verdicts are "too few seeds"
LEVEL = 0.05  # family-wise error rate of a report's tests (after Holm)
ALIKE_ULPS = 8  # values whose spread is within this many float steps of their size count as one number
TESTS = "the intervals and tests of a comparison"  # what scipy (the train extra) is needed for

Values = Mapping[int, Sequence[float]]


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its interval and the p-value of "the mean is 0" (see the module docstring)."""

    mean: float
    low: float
    high: float
    p: float
    seeds: int
    documents: int  # values that entered the mean (NaN left out)
    dof: float  # of the t quantile (Satterthwaite's): inf when every value is the same, nan with no interval


def estimate(values: Values, *, confidence: float = CONFIDENCE) -> Estimate:
    """The mean of ``values`` ({seed: [value per document]}, the same documents for every seed), its interval
    and p-value, seeds and documents crossed (see the module docstring).

    The mean is the mean over seeds of each seed's mean over its documents (each seed weighs the same).
    """
    student = require("scipy.stats", "train", TESTS).t

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    rows = [np.asarray(v, dtype=np.float64) for v in values.values()]
    if len({row.size for row in rows}) > 1:
        raise ValueError(
            f"every seed needs the same documents, in order (got {sorted({r.size for r in rows})})"
        )
    table = np.array([row for row in rows if not np.isnan(row).all()])
    if not table.size:
        raise ValueError("no values")
    valued = ~np.isnan(table)
    with np.errstate(invalid="ignore"):  # inf - inf: a NaN mean, no warning
        seed_means = np.array([row[~np.isnan(row)].mean() for row in table])
        mean = float(seed_means.mean())
    seeds, documents = table.shape[0], int(valued.sum())
    complete = table[:, valued.all(axis=0)]  # the documents with a value in every seed
    if complete.size < 2 or np.isinf(table).any():  # no variance to estimate (an infinite value has none):
        # no interval, no test
        return Estimate(mean, -math.inf, math.inf, 1.0, seeds, documents, math.nan)
    if _alike(complete):  # no spread to scale a t test by
        if not _alike(table[valued]):  # alike only where every seed has a value: no interval, no test
            return Estimate(mean, -math.inf, math.inf, 1.0, seeds, documents, math.nan)
        # every value: the mean is its own interval, tested by the exact sign test on the seeds' means
        p = 2.0 ** (1 - seeds) if (seed_means > 0).all() or (seed_means < 0).all() else 1.0
        return Estimate(mean, mean, mean, p, seeds, documents, math.inf)
    variance, dof = _mean_variance(complete)
    if not variance > 0:  # values apart by less than a float resolves (an underflow): nothing to test by
        return Estimate(mean, -math.inf, math.inf, 1.0, seeds, documents, math.nan)
    scale = math.sqrt(variance)
    half = float(student.ppf(1 - (1 - confidence) / 2, dof)) * scale
    p = float(2 * student.sf(abs(mean) / scale, dof))
    return Estimate(mean, mean - half, mean + half, p, seeds, documents, dof)


def _alike(values: np.ndarray) -> bool:
    """Whether ``values`` are one number up to the last bits of a float (0.7 - 0.4 against 0.3 - 0.0): their
    spread is rounding, which a t test would take for a variance and call any mean certain."""
    return bool(np.ptp(values) <= ALIKE_ULPS * np.finfo(np.float64).eps * np.abs(values).max())


def _mean_variance(table: np.ndarray) -> tuple[float, float]:
    """The variance of the grand mean of an S x N table (seeds x documents, crossed random effects; at least
    two values) and Satterthwaite's degrees of freedom for it.

    With mean squares ``MS_s`` (seeds, S - 1 degrees of freedom), ``MS_d`` (documents, N - 1) and ``MS_e``
    (residual, (S - 1)(N - 1)), ``S N var = (MS_s - MS_e) + (MS_d - MS_e) + MS_e``, a component left out
    where its mean square falls below ``MS_e`` (its variance estimated at 0); the degrees of freedom are
    Satterthwaite's for that combination of mean squares.
    """
    seeds, documents = table.shape
    if seeds == 1 or documents == 1:  # the text alone, or the training alone
        values = table.ravel()
        return float(values.var(ddof=1)) / values.size, values.size - 1
    grand = table.mean()
    by_seed, by_document = table.mean(axis=1), table.mean(axis=0)
    seed_ms = documents * float(by_seed.var(ddof=1))
    document_ms = seeds * float(by_document.var(ddof=1))
    residual = table - by_seed[:, None] - by_document[None, :] + grand
    residual_ms = float((residual**2).sum()) / ((seeds - 1) * (documents - 1))
    terms = [
        (ms, dof) for ms, dof in ((seed_ms, seeds - 1), (document_ms, documents - 1)) if ms > residual_ms
    ]
    terms.append((residual_ms * (1 - len(terms)), (seeds - 1) * (documents - 1)))  # coefficient 1 - kept
    total = sum(ms for ms, _ in terms)
    if not total > 0:
        return 0.0, math.inf
    return total / table.size, total**2 / sum(ms**2 / dof for ms, dof in terms if ms)


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
    """The estimate of the mean of ``a - b`` (see ``differences``), paired by seed and document; ``options``
    as ``estimate``'s."""
    return estimate(differences(a, b), **options)


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
