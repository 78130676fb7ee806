"""The copy task's rows: random ids repeated once, scored on the repeat only, the same for the same step."""

from __future__ import annotations

import torch

from ltsgen.training.copytask import FIRST_ID, HALF, copy_rows


def test_rows_repeat_their_first_half_and_score_only_the_predictable_repeat():
    inputs, targets = copy_rows(5, 100, 1000, seed=3, step=7)
    assert inputs.shape == targets.shape == (5, 100)
    assert torch.equal(inputs[:, HALF : 2 * HALF], inputs[:, :HALF])
    assert inputs.min() >= FIRST_ID and inputs.max() < 1000
    scored = targets != -100
    assert scored.sum(dim=1).tolist() == [HALF - 1] * 5  # the repeat's tokens after its first
    # target at p is the input at p + 1: each scored prediction copies a token 32 back
    assert torch.equal(targets[:, HALF : 2 * HALF - 1], inputs[:, HALF + 1 : 2 * HALF])
    assert torch.equal(targets[:, HALF : 2 * HALF - 1], inputs[:, 1:HALF])


def test_rows_depend_on_seed_rank_and_step_only():
    first = copy_rows(4, 64, 512, seed=0, step=10, rank=1)
    assert all(
        torch.equal(a, b) for a, b in zip(first, copy_rows(4, 64, 512, seed=0, step=10, rank=1), strict=True)
    )
    for other in (
        dict(seed=1, step=10, rank=1),
        dict(seed=0, step=11, rank=1),
        dict(seed=0, step=10, rank=0),
    ):
        assert not torch.equal(copy_rows(4, 64, 512, **other)[0], first[0])


def test_short_windows_and_small_vocabularies_still_make_a_repeat():
    inputs, targets = copy_rows(3, 10, 300, seed=0, step=0)  # half = 5; ids from 150 (300 // 2)
    assert torch.equal(inputs[:, 5:10], inputs[:, :5]) and inputs.min() >= 150
    assert (targets != -100).sum().item() == 3 * 4
