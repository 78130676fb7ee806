"""The stateless order of an epoch, and who reads which part of it.

Everything here is a pure function of (shard sizes, seed, epoch, batch geometry): no state is kept, so
any rank, worker or resumed process computes the same answer without talking to the others.

- Epoch order: shards are permuted, grouped into windows of ``window`` consecutive shards, and the items
  of each window are permuted among themselves. Position ``p`` of the epoch is one item.
- Global batches: batch ``s`` holds positions ``[s * G, (s + 1) * G)``; the last partial batch is dropped
  (``remainder="drop"``) or filled by wrapping around to the start of the epoch (``"wrap"``).
- Rank ``r`` of ``world`` takes positions ``[r * b, (r + 1) * b)`` of each global batch (``G = b * world``);
  DataLoader worker ``w`` of ``k`` takes the global batches ``anchor + w, anchor + w + k, ...`` (the
  DataLoader interleaves its workers round-robin, so the rank still sees global batches in order). The
  workers of ``StreamingDataset.loader()`` send runs of consecutive batches instead, one message through
  the DataLoader's pipe per run: of whole shuffle windows in turns when each batch has one home window
  (``window_runs``, so that a worker decodes only the windows it serves), else in turns (``worker_runs``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.random import default_rng  # imported here: numpy loads its random module lazily

REMAINDERS = ("drop", "wrap")


def generator(seed: int, *keys: int) -> np.random.Generator:
    """A random generator that depends only on its arguments.

    Args:
        seed: the user's seed.
        *keys: what the draw is for (epoch, stream, purpose, window): non-negative ints.

    Returns:
        A numpy ``Generator``.
    """
    return default_rng([seed, *keys])


@dataclass(frozen=True)
class EpochOrder:
    """The order of the items of one stream of shards (``sizes[i]`` items in shard ``i``) in one epoch."""

    sizes: tuple[int, ...]
    seed: int
    epoch: int
    shuffle: bool = True
    window: int = 4
    stream: int = 0  # distinguishes the streams (length buckets) of one dataset

    @cached_property
    def shard_order(self) -> np.ndarray:
        count = len(self.sizes)
        if not self.shuffle:
            return np.arange(count)
        return generator(self.seed, self.epoch, self.stream, 0).permutation(count)

    @cached_property
    def window_starts(self) -> np.ndarray:
        """Position of the first item of each window, plus the total (length ``windows + 1``)."""
        sizes = np.asarray(self.sizes, dtype=np.int64)[self.shard_order]
        per_window = np.add.reduceat(sizes, np.arange(0, len(sizes), self.window)) if len(sizes) else sizes
        return np.concatenate([[0], np.cumsum(per_window)]).astype(np.int64)

    @property
    def total(self) -> int:
        return int(self.window_starts[-1])

    @property
    def num_windows(self) -> int:
        return len(self.window_starts) - 1

    def window_of(self, position: int) -> int:
        """The window holding epoch position ``position``.

        Args:
            position: an item's position in the epoch.

        Returns:
            The window's index.
        """
        return int(np.searchsorted(self.window_starts, position, side="right")) - 1

    def window_shards(self, index: int) -> np.ndarray:
        """The shards of window ``index``.

        Args:
            index: the window.

        Returns:
            Shard indices (into ``sizes``) in the epoch's shard order.
        """
        return self.shard_order[index * self.window : (index + 1) * self.window]

    def window_items(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Every item of a window, in epoch order.

        Args:
            index: the window.

        Returns:
            ``(shard, row)``: two int64 arrays, one entry per item.
        """
        shards = self.window_shards(index)
        counts = np.asarray([self.sizes[s] for s in shards], dtype=np.int64)
        shard_of = np.repeat(shards, counts)
        starts = np.repeat(np.cumsum(counts) - counts, counts)
        rows = np.arange(len(shard_of), dtype=np.int64) - starts
        if self.shuffle:
            perm = generator(self.seed, self.epoch, self.stream, 1, index).permutation(len(shard_of))
            shard_of, rows = shard_of[perm], rows[perm]
        return shard_of, rows


@dataclass(frozen=True)
class BatchPlan:
    """How ``total`` positions of one stream divide into global batches of ``global_batch`` positions."""

    total: int
    global_batch: int
    remainder: str = "drop"

    @property
    def num_batches(self) -> int:
        if self.remainder == "drop":
            return self.total // self.global_batch
        return -(-self.total // self.global_batch)

    def positions(self, batch: int, rank: int, batch_size: int) -> np.ndarray:
        """The epoch positions of one rank's slice of a global batch.

        Args:
            batch: the global batch.
            rank: the rank.
            batch_size: the per-rank batch size.

        Returns:
            ``batch_size`` positions, wrapped around the epoch's end.
        """
        start = batch * self.global_batch + rank * batch_size
        return np.arange(start, start + batch_size, dtype=np.int64) % self.total


def bucket_schedule(batches_per_stream: list[int], seed: int, epoch: int, shuffle: bool) -> np.ndarray:
    """For each global batch, the stream (length bucket) it comes from.

    Args:
        batches_per_stream: global batches of each stream.
        seed, epoch: the order's seed and epoch.
        shuffle: permute the labels (else stream by stream).

    Returns:
        One stream label per global batch, a seeded permutation.
    """
    labels = np.repeat(np.arange(len(batches_per_stream)), batches_per_stream)
    if shuffle:
        labels = labels[generator(seed, epoch, 2**31 - 1).permutation(len(labels))]
    return labels


def batch_in_stream(schedule: np.ndarray) -> np.ndarray:
    """For each global batch, its index among the batches of its own stream.

    Args:
        schedule: ``bucket_schedule``'s labels.

    Returns:
        An int64 array of the same length.
    """
    index = np.empty(len(schedule), dtype=np.int64)
    for stream in np.unique(schedule):
        where = np.flatnonzero(schedule == stream)
        index[where] = np.arange(len(where))
    return index


def worker_batches(num_batches: int, consumed: int, anchor: int, worker: int, num_workers: int) -> range:
    """The global batches left for one DataLoader worker.

    Args:
        num_batches: global batches in the epoch.
        consumed: where this worker's own progress stands (at least ``anchor``).
        anchor: the global batch where the current rotation of workers started.
        worker, num_workers: this worker and how many there are.

    Returns:
        The batches ``anchor + worker (mod num_workers)`` from ``consumed`` on.
    """
    first = anchor + worker
    if first < consumed:
        first += -(-(consumed - first) // num_workers) * num_workers
    return range(first, num_batches, num_workers)


def worker_runs(num_batches: int, start: int, worker: int, num_workers: int, longest: int) -> list[range]:
    """The runs of consecutive global batches left for one worker of ``StreamingDataset.loader()``.

    The batches from ``start`` on are cut into runs of 1, 2, 4, ... batches, then ``longest`` each (the first
    batch comes as soon as it is made; later ones travel in bulk), dealt to the workers in turns.

    Args:
        num_batches: global batches in the epoch.
        start: the first batch not yet yielded.
        worker, num_workers: this worker and how many there are.
        longest: the most batches in a run (at least 1).

    Returns:
        Run ``worker``, ``worker + num_workers``, ... of that layout.
    """
    return [
        run
        for index, run in enumerate(_doubling_runs(start, num_batches, longest))
        if index % num_workers == worker
    ]


def window_runs(homes: np.ndarray, start: int, worker: int, num_workers: int, longest: int) -> list[range]:
    """The runs of consecutive global batches left for one worker, whole windows to each worker in turns.

    The batches from ``start`` on are grouped by their home window (``homes[i]`` is batch ``start + i``'s,
    ascending): group ``g`` goes to worker ``g % num_workers``, which thus decodes only its windows. Each
    group is cut into runs of 1, 2, 4, ... batches, then ``longest`` each.

    Args:
        homes: the home window of each batch from ``start`` on, non-decreasing.
        start: the first batch not yet yielded.
        worker, num_workers: this worker and how many there are.
        longest: the most batches in a run (at least 1).

    Returns:
        This worker's runs, ascending.
    """
    bounds = window_groups(homes)
    groups = range(worker, len(bounds) - 1, num_workers)
    return [run for g in groups for run in _doubling_runs(start + bounds[g], start + bounds[g + 1], longest)]


def window_groups(homes: np.ndarray) -> list[int]:
    """Where each group of batches with one home window starts (``homes``: as for ``window_runs``).

    Args:
        homes: the home window of each batch from some start on.

    Returns:
        The index in ``homes`` of each group's first batch, then ``len(homes)``: group ``g`` is
        ``homes[bounds[g]:bounds[g + 1]]``, served by worker ``g % num_workers``.
    """
    return [0, *(np.flatnonzero(np.diff(homes)) + 1).tolist(), len(homes)]


def _doubling_runs(first: int, stop: int, longest: int) -> list[range]:
    """Batches ``first`` to ``stop`` cut into runs of 1, 2, 4, ... batches, then ``longest`` each."""
    runs, size = [], 1
    while first < stop:
        runs.append(range(first, min(stop, first + size)))
        first, size = first + size, min(longest, 2 * size)
    return runs
