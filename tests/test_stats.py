"""Intervals and tests over seeds against SciPy's Student t."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ltsgen.training.stats import mean_interval, paired_test, t_central, t_quantile


@pytest.mark.parametrize("df", [1, 2, 3, 4, 5, 8, 13, 30, 101])
def test_t_distribution_matches_scipy(df):
    for t in (0.0, 0.3, 1.0, 2.0, 4.3, 12.7, 80.0):
        assert t_central(t, df) == pytest.approx(1 - 2 * stats.t.sf(t, df), abs=1e-12)
    for confidence in (0.5, 0.9, 0.95, 0.99):
        assert t_quantile(confidence, df) == pytest.approx(stats.t.ppf((1 + confidence) / 2, df), rel=1e-10)


def test_the_interval_of_the_mean_matches_scipy_and_numpy():
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 10):
        values = rng.normal(10.0, 2.0, size=n)
        low, high = stats.t.interval(0.95, n - 1, loc=values.mean(), scale=stats.sem(values))
        assert mean_interval(values.tolist()) == pytest.approx((values.mean(), low, high), rel=1e-10)
    assert mean_interval([4.0]) == (4.0, 4.0, 4.0)
    assert mean_interval([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)


def test_the_paired_test_matches_scipy():
    rng = np.random.default_rng(1)
    for n in (2, 3, 6):
        a = rng.normal(5.0, 1.0, size=n)
        b = a + rng.normal(0.4, 0.3, size=n)
        difference, p = paired_test(a.tolist(), b.tolist())
        assert difference == pytest.approx(float((a - b).mean()), rel=1e-12)
        assert p == pytest.approx(stats.ttest_rel(a, b).pvalue, rel=1e-9)
    assert paired_test([1.0], [2.0]) == (-1.0, None)
    assert paired_test([1.0, 2.0], [2.0, 3.0]) == (-1.0, 0.0)  # the same difference every seed
