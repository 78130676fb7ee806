"""The copy task's rows: a random segment repeated to fill the row at a period that changes from row to row,
scored from the repeat's second token on, the same for the same step."""

from __future__ import annotations

import torch

from ltsgen.training.copytask import FIRST_ID, LONGEST, SHORTEST, copy_rows


def periods_of(inputs: torch.Tensor) -> list[int]:
    """Each row's smallest period (the rows' segments hold distinct ids in these tests' seeds)."""
    return [next(p for p in range(1, len(row)) if torch.equal(row[p:], row[:-p])) for row in inputs]


def test_rows_repeat_a_segment_at_a_changing_period_and_score_only_what_an_earlier_token_predicts():
    inputs, targets = copy_rows(64, 100, 1000, seed=3, step=7)
    assert inputs.shape == targets.shape == (64, 100)
    assert inputs.min() >= FIRST_ID and inputs.max() < 1000
    periods = periods_of(inputs)
    assert min(periods) >= SHORTEST and max(periods) <= LONGEST
    assert len(set(periods)) >= 15  # no fixed offset predicts the repeat
    for row, target, period in zip(inputs, targets, periods, strict=True):
        assert (target[:period] == -100).all()  # the segment and the repeat's first token are unpredictable
        # every other target is the input after it, which followed the same token one period back
        assert torch.equal(target[period:-1], row[period + 1 :])
        assert torch.equal(target[period:-1], row[1 : 100 - period])
        assert target[-1] == row[100 - period]


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
    # segments of 5 (10 // 2); ids from 150 (300 // 2)
    inputs, targets = copy_rows(3, 10, 300, seed=0, step=0)
    assert periods_of(inputs) == [5, 5, 5] and inputs.min() >= 150
    assert (targets != -100).sum().item() == 3 * 5
