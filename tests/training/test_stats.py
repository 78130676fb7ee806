"""The hierarchical bootstrap over seeds and documents, the paired test and Holm's correction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ltsgen.training.stats import bootstrap, differences, holm, paired


def test_one_seed_is_the_ordinary_bootstrap_of_documents_as_scipy_computes_it():
    values = np.random.default_rng(0).normal(1.0, 2.0, size=40)
    estimate = bootstrap({0: values.tolist()}, resamples=20_000)
    reference = stats.bootstrap((values,), np.mean, method="percentile", n_resamples=20_000, random_state=1)
    assert estimate.mean == pytest.approx(values.mean(), rel=1e-12)
    assert estimate.low == pytest.approx(reference.confidence_interval.low, abs=0.05)
    assert estimate.high == pytest.approx(reference.confidence_interval.high, abs=0.05)
    assert (estimate.seeds, estimate.documents) == (1, 40)


def test_the_interval_holds_the_variation_between_seeds_not_only_between_documents():
    # documents agree within each seed, the seeds differ: a bootstrap of documents alone would have no width
    estimate = bootstrap({0: [1.0] * 8, 1: [3.0] * 8})
    assert (estimate.mean, estimate.low, estimate.high) == (2.0, 1.0, 3.0)
    assert estimate.p == pytest.approx(2 / 10_001)  # every resample lies above 0


def test_the_mean_weighs_seeds_alike_and_leaves_nan_out():
    estimate = bootstrap({0: [1.0, 1.0, float("nan")], 1: [4.0]})
    assert estimate.mean == 2.5 and estimate.documents == 3 and estimate.seeds == 2
    assert bootstrap({0: [float("nan")], 1: [2.0]}).seeds == 1
    with pytest.raises(ValueError, match="no values"):
        bootstrap({0: [float("nan")]})


def test_a_constant_is_exact_and_zero_is_not_significant():
    assert bootstrap({s: [0.5] * 4 for s in range(3)}).low == 0.5
    assert bootstrap({s: [0.0] * 4 for s in range(3)}).p == 1.0


def test_the_p_value_falls_with_the_effect_and_agrees_with_the_interval():
    rng = np.random.default_rng(3)
    noise = {s: rng.normal(0, 1, size=16) for s in range(5)}
    null = bootstrap({s: v.tolist() for s, v in noise.items()})
    shifted = bootstrap({s: (v + 1.0).tolist() for s, v in noise.items()})
    assert null.p > 0.05 and null.low < 0 < null.high
    assert shifted.p < 0.01 and shifted.low > 0
    assert bootstrap({0: [1.0, 2.0]}, seed=7) == bootstrap({0: [1.0, 2.0]}, seed=7)  # reproducible


def test_paired_uses_the_differences_of_the_same_documents_and_seeds():
    a = {0: [1.0, 5.0, 9.0], 1: [2.0, 6.0, 10.0]}
    b = {0: [0.5, 4.5, 8.5], 1: [1.5, 5.5, 9.5], 2: [0.0, 0.0, 0.0]}
    assert differences(a, b) == {0: [0.5, 0.5, 0.5], 1: [0.5, 0.5, 0.5]}  # seed 2 has no pair
    # the documents differ widely, the pairs do not: the paired interval is exact
    assert (paired(a, b).low, paired(a, b).high) == (0.5, 0.5)
    with pytest.raises(ValueError, match="seed 0: 3 and 2 documents cannot be paired"):
        paired(a, {0: [1.0, 2.0]})


def test_holm_matches_the_step_down_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, None, 0.01]) == [0.5, None, 0.02]  # None is no test and is not counted
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # capped at 1, then monotone
