"""Means over seeds and documents (crossed) with their intervals, the paired test and Holm's correction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ltsgen.training.stats import differences, estimate, holm, paired


def test_one_seed_is_the_t_interval_of_its_documents_as_scipy_computes_it():
    values = np.random.default_rng(0).normal(1.0, 2.0, size=40)
    found = estimate({0: values.tolist()})
    reference = stats.ttest_1samp(values, 0.0)
    low, high = reference.confidence_interval(0.95)
    assert found.mean == pytest.approx(values.mean(), rel=1e-12)
    assert (found.low, found.high, found.p) == pytest.approx((low, high, reference.pvalue), rel=1e-9)
    assert (found.seeds, found.documents, found.dof) == (1, 40, 39)


def test_seeds_that_differ_while_their_documents_agree_are_the_t_test_of_the_seed_means():
    # documents agree within each seed, the seeds differ: only the training varies
    found = estimate({0: [1.0] * 8, 1: [3.0] * 8, 2: [3.5] * 8})
    reference = stats.ttest_1samp([1.0, 3.0, 3.5], 0.0)
    assert (found.mean, found.p, found.dof) == pytest.approx((2.5, reference.pvalue, 2), rel=1e-9)
    assert (found.low, found.high) == pytest.approx(reference.confidence_interval(0.95), rel=1e-9)


def test_documents_shared_by_every_seed_widen_the_interval_as_the_text_varies():
    """Every seed reads the same documents: a document's difficulty is in every seed's mean. Before, each
    seed's documents were resampled on their own, as if each seed read other documents, and the interval
    was about sqrt(seeds) too narrow."""
    text = np.random.default_rng(1).normal(0, 1.0, size=32)
    found = estimate({seed: (text + 0.01 * seed).tolist() for seed in range(5)})
    one = estimate({0: text.tolist()})
    assert found.high - found.low == pytest.approx(one.high - one.low, rel=0.05)


@pytest.mark.parametrize(
    ("seed_sd", "document_sd", "residual_sd"),
    [(0.1, 1.0, 0.3), (1.0, 0.1, 0.3), (0.5, 0.5, 0.5), (0.0, 0.0, 1.0), (0.3, 0.0, 1.0), (0.3, 0.3, 1.0)],
    ids=[
        "text-dominated",
        "seed-dominated",
        "balanced",
        "residual only",
        "seeds in residual",
        "both in residual",
    ],
)
def test_tests_at_five_percent_reject_about_five_percent_of_tables_whose_mean_is_zero(
    seed_sd, document_sd, residual_sd
):
    """2,000 tables of 5 seeds x 32 documents drawn from the crossed model with mean 0 (before: 13-34%
    rejected, by a bootstrap that nested the documents in the seeds)."""
    rng = np.random.default_rng(2)
    rejected = covered = 0
    for _ in range(2000):
        table = (rng.normal(0, seed_sd, (5, 1)) + rng.normal(0, document_sd, (1, 32))
                 + rng.normal(0, residual_sd, (5, 32)))  # fmt: skip
        found = estimate(dict(enumerate(table.tolist())))
        rejected += found.p < 0.05
        covered += found.low <= 0 <= found.high
    assert rejected / 2000 <= 0.07 and rejected + covered == 2000


def test_the_mean_weighs_seeds_alike_and_leaves_nan_out():
    found = estimate({0: [1.0, 1.0, float("nan")], 1: [4.0, float("nan"), float("nan")]})
    assert found.mean == 2.5 and found.documents == 3 and found.seeds == 2
    assert estimate({0: [float("nan")], 1: [2.0]}).seeds == 1
    with pytest.raises(ValueError, match="no values"):
        estimate({0: [float("nan")]})
    with pytest.raises(ValueError, match=r"every seed needs the same documents, in order \(got \[1, 2\]\)"):
        estimate({0: [1.0], 1: [1.0, 2.0]})


def test_a_constant_is_exact_and_zero_is_not_significant():
    assert estimate({s: [0.5] * 4 for s in range(3)}).low == 0.5
    assert estimate({s: [0.0] * 4 for s in range(3)}).p == 1.0


def test_a_constant_is_tested_by_the_signs_of_its_seeds_not_taken_as_proven():
    """Before: p = 0, so five runs that answered one recall alike (1 against a control's 0) were "shown"."""
    assert estimate({s: [1.0] for s in range(5)}).p == 0.0625  # the exact sign test, all 5 of one sign
    assert estimate({s: [-0.5] * 16 for s in range(3)}).p == 0.25
    assert estimate({0: [1.0] * 16}).p == 1.0  # one seed: the training's variation is not seen at all
    third = estimate(
        {s: [1 / 3] * 4 for s in range(5)}
    )  # before: 1/3 left a variance of rounding, p = 1e-190
    assert (third.low, third.high, third.p) == (1 / 3, 1 / 3, 0.0625)
    nan = float("nan")  # alike where every seed has a value, the seeds' means of opposite signs
    mixed = estimate({0: [1.0, 1.0, -10.0], 1: [1.0, 1.0, nan]})
    assert (mixed.low, mixed.high, mixed.p) == (-np.inf, np.inf, 1.0)
    # alike where every seed has a value, apart elsewhere: no interval, so no test (before: "shown" at 7 seeds)
    partly = estimate({s: [0.5, 0.5, 0.2 + s if s else nan] for s in range(7)})
    assert (partly.low, partly.high, partly.p) == (-np.inf, np.inf, 1.0)
    # the same gap of 0.3 that subtraction leaves a bit apart (before: a t test on rounding, p = 9.5e-49)
    rounded = paired({s: [0.7, 0.3, 0.7, 0.3] for s in range(5)}, {s: [0.4, 0.0, 0.4, 0.0] for s in range(5)})
    assert rounded.p == 0.0625 and rounded.low == rounded.high == rounded.mean == pytest.approx(0.3)
    found = paired({s: [1.0, 1.0] for s in range(5)}, {s: [0.0, 0.0] for s in range(5)})
    assert (found.mean, found.low, found.high, found.p) == (1.0, 1.0, 1.0, 0.0625)


def test_values_that_leave_nothing_to_estimate_a_variance_from_give_no_interval():
    """One value, or no document valued by every seed: before, an exact interval and p = 0."""
    nan = float("nan")
    for values in ({0: [3.0]}, {0: [1.0, nan], 1: [nan, 2.0]}):
        found = estimate(values)
        assert (found.low, found.high, found.p) == (-np.inf, np.inf, 1.0)


def test_an_infinite_value_gives_no_interval_and_no_test():
    """Before: the variance was NaN, taken for 0, and the mean "exact": p = 0, a verdict "shown"."""
    for values in ({0: [np.inf, 0.1, 0.2], 1: [0.3, 0.1, 0.2]}, {0: [-np.inf, 0.1], 1: [np.inf, 0.2]}):
        found = estimate(values)
        assert (found.low, found.high, found.p) == (-np.inf, np.inf, 1.0)


def test_the_p_value_falls_with_the_effect_and_agrees_with_the_interval():
    rng = np.random.default_rng(3)
    noise = {s: rng.normal(0, 1, size=16) for s in range(5)}
    null = estimate({s: v.tolist() for s, v in noise.items()})
    shifted = estimate({s: (v + 1.0).tolist() for s, v in noise.items()})
    assert null.p > 0.05 and null.low < 0 < null.high
    assert shifted.p < 0.01 and shifted.low > 0


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
