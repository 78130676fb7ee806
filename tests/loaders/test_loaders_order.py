"""Property tests of the stateless epoch order: exactly once, world-size independence, resume anywhere."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ltsgen.loaders.order import (
    BatchPlan,
    EpochOrder,
    batch_in_stream,
    bucket_schedule,
    window_runs,
    worker_batches,
    worker_runs,
)

shard_sizes = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=12).filter(
    lambda s: sum(s) > 0
)


def epoch_items(order: EpochOrder) -> list[tuple[int, int]]:
    items = []
    for window in range(order.num_windows):
        shards, rows = order.window_items(window)
        assert len(shards) == order.window_starts[window + 1] - order.window_starts[window]
        items += list(zip(shards.tolist(), rows.tolist(), strict=True))
    return items


def loader_batches(
    plan: BatchPlan, rank: int, batch_size: int, workers: int, consumed: int = 0
) -> list[list[int]]:
    """What one rank's DataLoader yields: its workers' batches, interleaved round-robin."""
    queues = [list(worker_batches(plan.num_batches, consumed, consumed, w, workers)) for w in range(workers)]
    out = []
    while any(queues):
        for queue in queues:
            if queue:
                out.append(plan.positions(queue.pop(0), rank, batch_size).tolist())
    return out


@settings(max_examples=60, deadline=None)
@given(sizes=shard_sizes, seed=st.integers(0, 2**32 - 1), epoch=st.integers(0, 5), window=st.integers(1, 5))
def test_epoch_order_is_a_permutation_of_every_item(sizes, seed, epoch, window):
    order = EpochOrder(tuple(sizes), seed, epoch, True, window)
    items = epoch_items(order)
    assert sorted(items) == [(s, r) for s, n in enumerate(sizes) for r in range(n)]
    assert items == epoch_items(EpochOrder(tuple(sizes), seed, epoch, True, window))  # stateless
    assert order.total == sum(sizes)


def test_unshuffled_order_is_the_stored_order():
    order = EpochOrder((3, 0, 2), seed=5, epoch=1, shuffle=False, window=2)
    assert epoch_items(order) == [(0, 0), (0, 1), (0, 2), (2, 0), (2, 1)]


@settings(max_examples=80, deadline=None)
@given(
    total=st.integers(1, 300),
    world=st.integers(1, 4),
    batch_size=st.integers(1, 5),
    workers=st.integers(1, 8),
    remainder=st.sampled_from(["drop", "wrap"]),
)
def test_ranks_and_workers_cover_each_position_once_with_equal_counts(
    total, world, batch_size, workers, remainder
):
    plan = BatchPlan(total, batch_size * world, remainder)
    per_rank = [loader_batches(plan, r, batch_size, workers) for r in range(world)]
    counts = {len(batches) for batches in per_rank}
    assert counts == {plan.num_batches}  # every rank the same number of batches: no DDP deadlock
    # global batch t of the run is the ranks' t-th batches together, in rank order
    seen = [p for t in range(plan.num_batches) for r in range(world) for p in per_rank[r][t]]
    assert seen == [p % total for p in range(plan.num_batches * plan.global_batch)]
    if remainder == "drop":
        assert len(set(seen)) == len(seen) == total - total % plan.global_batch
    else:
        assert set(seen) == set(range(total)) and len(seen) - total < plan.global_batch


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(8, 200),
    global_batch=st.sampled_from([6, 12]),
    world_before=st.sampled_from([1, 2, 3, 6]),
    world_after=st.sampled_from([1, 2, 3, 6]),
    workers_before=st.integers(1, 4),
    workers_after=st.integers(1, 4),
    data=st.data(),
)
def test_elastic_resume_continues_the_same_global_order(
    total, global_batch, world_before, world_after, workers_before, workers_after, data
):
    plan = BatchPlan(total, global_batch, "drop")
    if plan.num_batches == 0:
        return
    stop = data.draw(st.integers(0, plan.num_batches))

    def run(world, workers, consumed):
        size = global_batch // world
        per_rank = [loader_batches(plan, r, size, workers, consumed) for r in range(world)]
        return [p for t in range(len(per_rank[0])) for r in range(world) for p in per_rank[r][t]]

    full = run(world_before, workers_before, 0)
    resumed = full[: stop * global_batch] + run(world_after, workers_after, stop)
    assert resumed == full


def test_one_shard_feeds_eight_workers():
    order = EpochOrder((64,), seed=3, epoch=0, shuffle=True, window=4)
    plan = BatchPlan(order.total, global_batch=4)
    per_worker = [list(worker_batches(plan.num_batches, 0, 0, w, 8)) for w in range(8)]
    assert all(len(batches) == 2 for batches in per_worker)  # no idle worker
    assert sorted(b for batches in per_worker for b in batches) == list(range(16))


@settings(max_examples=80, deadline=None)
@given(
    num_batches=st.integers(0, 400),
    start=st.integers(0, 400),
    workers=st.integers(1, 8),
    longest=st.integers(1, 40),
)
def test_worker_runs_interleaved_give_every_batch_from_start_once_in_order(
    num_batches, start, workers, longest
):
    per_worker = [worker_runs(num_batches, start, w, workers, longest) for w in range(workers)]
    out = []
    while any(per_worker):  # the DataLoader takes one item (a run) from each worker in turn
        for runs in per_worker:
            if runs:
                out += list(runs.pop(0))
    assert out == list(range(start, num_batches))
    sizes = [len(run) for w in range(workers) for run in worker_runs(num_batches, start, w, workers, longest)]
    assert all(1 <= size <= longest for size in sizes)
    assert worker_runs(10, 0, 0, 1, 4) == [range(0, 1), range(1, 3), range(3, 7), range(7, 10)]


@settings(max_examples=40, deadline=None)
@given(batches=st.lists(st.integers(0, 20), min_size=1, max_size=6), seed=st.integers(0, 1000))
def test_bucket_schedule_uses_each_bucket_batch_once(batches, seed):
    schedule = bucket_schedule(batches, seed, epoch=1, shuffle=True)
    index = batch_in_stream(schedule)
    for stream, count in enumerate(batches):
        assert sorted(index[schedule == stream].tolist()) == list(range(count))
    assert np.array_equal(schedule, bucket_schedule(batches, seed, epoch=1, shuffle=True))


@settings(max_examples=80, deadline=None)
@given(
    windows=st.lists(st.integers(0, 30), min_size=0, max_size=8),
    start=st.integers(0, 60),
    workers=st.integers(1, 5),
    longest=st.integers(1, 9),
)
def test_window_runs_give_each_worker_whole_windows_and_every_batch_once(windows, start, workers, longest):
    homes = np.repeat(np.arange(len(windows)), windows)  # batches of each window, some windows empty
    start = min(start, len(homes))
    homes_left = homes[start:]
    per_worker = [window_runs(homes_left, start, w, workers, longest) for w in range(workers)]
    served = sorted(b for runs in per_worker for run in runs for b in run)
    assert served == list(range(start, len(homes)))  # every batch from the start once
    for runs in per_worker:
        for run in runs:
            assert 1 <= len(run) <= longest and len({int(homes[b]) for b in run}) == 1
    owner = {int(homes[b]): w for w, runs in enumerate(per_worker) for run in runs for b in run}
    for w, runs in enumerate(per_worker):  # a window is served by one worker alone, in turns
        assert all(owner[int(homes[b])] == w for run in runs for b in run)
    groups = list(dict.fromkeys(homes_left.tolist()))
    assert [owner[g] for g in groups] == [i % workers for i in range(len(groups))]
    assert window_runs(np.array([0] * 10 + [1] * 3), 0, 0, 2, 4) == [
        range(0, 1),
        range(1, 3),
        range(3, 7),
        range(7, 10),
    ]
    assert window_runs(np.array([0] * 10 + [1] * 3), 0, 1, 2, 4) == [range(10, 11), range(11, 13)]
