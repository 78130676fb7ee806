"""``StreamingLoader``: the DataLoader of ``StreamingDataset.loader()``, whole batches in global order for any
worker count, and ``collate_records`` for whole records."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ltsgen.errors import LtsgenError, UsageError

from .formats import import_decoders
from .order import window_groups, window_runs, worker_runs

RUN_ITEMS = 256  # the most items (blocks or records) a worker sends in one message: 32 batches of 8
# packed tokens each of several workers may have made ahead of the main process (its runs in flight, as the
# default prefetch_factor), so that a worker goes on with its next window while the main process hands out
# another worker's: 16 MB of uint16 ids, 31 runs of [8, 1025] blocks (measured: 16 to 64 such runs alike)
IN_FLIGHT_TOKENS = 1 << 23


class _Batches(IterableDataset):
    """A dataset's per-rank batches as runs of ``(global batch, data)`` (for ``DataLoader(batch_size=None)``).

    In the main process each run is one batch. A worker sends runs of consecutive batches, one DataLoader
    message each (its queues, pickling and the pipe are paid once per run), of at most ``RUN_ITEMS`` items.
    For packed blocks of one stream each worker serves whole windows in turns (``order.window_runs``) and
    decodes only those: a batch whose tokens run from one worker's window into the next worker's is made
    in two parts, each by the worker serving its window, and ``StreamingLoader`` packs the two (the blocks
    are a pure function of the token stream) and puts the batches back in order. Otherwise (records,
    by_bucket, mixtures) the runs are dealt in turns (``order.worker_runs``).
    """

    def __init__(self, dataset: IterableDataset) -> None:
        self.dataset = dataset
        self.longest = max(1, RUN_ITEMS // dataset.batch_size)  # batches in a run

    def __iter__(self):
        info = get_worker_info()
        ds = self.dataset
        if info is None:
            for batch in ds._whole_batches():
                yield [batch]
            return
        done, batch = [], ds._consumed
        try:
            runs, tails, heads = self._runs(info.id, info.num_workers)
            batches = ds._whole_batches(b for run in runs for b in run if b not in tails)
            for run in runs:
                done = []
                if run[0] in heads:  # the head of the batch that crosses into this run's window
                    batch, lo, hi = heads[run[0]]
                    done.append(_Piece(batch, 1, ds._stream_piece(lo, hi)))
                for batch in run:
                    done.append(
                        _Piece(batch, 0, ds._stream_piece(*tails[batch])) if batch in tails else next(batches)
                    )
                yield done
            ds._settle()
        except LtsgenError as error:  # torch would wrap it in a multi-line "Caught ... in DataLoader worker"
            yield [*done, _WorkerFailure(error, batch)]  # after the batches made before it

    def _runs(self, worker: int, num_workers: int) -> tuple[list[range], dict, dict]:
        """This worker's runs of batches from the dataset's position on, and the batches it makes in part:
        ``tails`` (batch -> its tokens before the next group's window) and ``heads`` (the first batch of a
        run -> the batch that crosses into its window and that batch's tokens there)."""
        ds, start = self.dataset, self.dataset._consumed
        homes = ds._home_windows(start)
        if homes is None:
            return worker_runs(ds.num_batches, start, worker, num_workers, self.longest), {}, {}
        runs = window_runs(homes, start, worker, num_workers, self.longest)
        ds._serve_windows((int(homes[run[0] - start]) for run in runs), int(homes[0]) if len(homes) else 0)
        bounds, tails, heads = window_groups(homes), {}, {}
        for group, lo, cut, hi in ds._window_cuts(start, homes):
            crossing = start + bounds[group] - 1
            if (group - 1) % num_workers == worker:
                tails[crossing] = (lo, cut)
            if group % num_workers == worker:
                heads[crossing + 1] = (crossing, cut, hi)
        return runs, tails, heads

    def __len__(self) -> int:
        return self.dataset.num_batches


class _Piece:
    """Part ``part`` (0: before the window boundary, 1: after) of global batch ``batch``'s tokens, made by
    the worker serving that window: ``tokens`` as ``(ids, document offsets)``."""

    def __init__(self, batch: int, part: int, tokens: tuple) -> None:
        self.batch, self.part, self.tokens = batch, part, tokens


class _WorkerFailure:
    """An ``LtsgenError`` raised in a worker while making global batch ``batch``, sent as an item so that
    the loader raises it as it was, in that batch's turn."""

    def __init__(self, error: LtsgenError, batch: int) -> None:
        self.error, self.batch = error, batch


class StreamingLoader(DataLoader):
    """The DataLoader of ``StreamingDataset.loader()``: whole batches in global order for any worker count.

    Workers send compact arrays through the pipe (no shared-memory segment per batch), in runs of consecutive
    batches (one message per run), and the LongTensors are made here. When several workers pack, each may have
    ``IN_FLIGHT_TOKENS`` tokens of runs made ahead (the default ``prefetch_factor``); one worker, which serves
    every window, and records, whose sizes are not known ahead, keep the DataLoader's default of 2 runs. Each
    batch carries its global index: batches that come before their turn (a worker serving a later window) wait
    here, at most about a window per worker, and the dataset in this process always stands after the last
    batch yielded: ``state_dict()`` is exact at any moment, and ``load_state_dict()`` accepts a state taken
    with any world size or worker count (the global batch size must be the same). Workers start from the
    dataset's position at each ``iter()``, which is why ``persistent_workers`` is refused.
    """

    def __init__(self, dataset: IterableDataset, num_workers: int = 0, **kwargs: Any) -> None:
        fixed = [
            name for name in ("batch_size", "collate_fn", "persistent_workers") if kwargs.pop(name, None)
        ]
        if fixed:
            raise UsageError(
                f"StreamingDataset.loader() does not take {fixed[0]}: the dataset makes whole batches of its "
                "own batch_size, and workers start from its position at each iter()"
            )
        if not (
            isinstance(num_workers, numbers.Integral)
            and not isinstance(num_workers, bool)
            and num_workers >= 0
        ):
            raise UsageError(f"num_workers must be an integer of at least 0, not {num_workers!r}")
        num_workers = int(num_workers)
        batches = _Batches(dataset)
        if num_workers > 1 and dataset.seq_len is not None:
            run_tokens = batches.longest * dataset.batch_size * (dataset.seq_len + 1)
            kwargs.setdefault("prefetch_factor", max(2, IN_FLIGHT_TOKENS // run_tokens))
        super().__init__(batches, batch_size=None, num_workers=num_workers, collate_fn=_as_made, **kwargs)
        self.streaming = dataset

    def __iter__(self):
        if self.num_workers:  # the workers inherit the decoders rather than import them, at every epoch
            import_decoders(self.streaming._read_formats())
        waiting: dict[int, Any] = {}  # batches (or a failure) that came before their turn
        parts: dict[int, dict[int, tuple]] = {}  # the first part to come of a batch made in two
        turn = self.streaming._consumed
        for run in super().__iter__():
            for item in run:
                if isinstance(item, _WorkerFailure):
                    waiting[item.batch] = item
                elif isinstance(item, _Piece):
                    both = parts.setdefault(item.batch, {})
                    both[item.part] = item.tokens
                    if len(both) == 2:
                        waiting[item.batch] = self.streaming._pack([both[0], both[1]])
                        del parts[item.batch]
                else:
                    waiting[item[0]] = item[1]
            while turn in waiting:
                data = waiting.pop(turn)
                if isinstance(data, _WorkerFailure):
                    raise data.error from None  # its one line, as without workers
                turn += 1
                self.streaming._seek(turn)
                yield {
                    k: torch.from_numpy(v.astype(np.int64)) if isinstance(v, np.ndarray) else v
                    for k, v in data.items()
                }

    def state_dict(self) -> dict[str, Any]:
        """The dataset's position after the last batch yielded.

        Returns:
            ``StreamingDataset.state_dict()``.
        """
        return self.streaming.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue at ``state`` with this loader's worker count, whatever the state's was.

        Args:
            state: as for ``StreamingDataset.load_state_dict``.
        """
        self.streaming.load_state_dict(state)


def _as_made(batch):
    """The batch as the worker made it (the collate function of ``StreamingLoader``)."""
    return batch


def collate_records(batch: list[dict]) -> dict[str, list]:
    """Collate whole records (a ``collate_fn``).

    Args:
        batch: records, all with the fields of the first.

    Returns:
        field -> list of values; token ids stay one numpy array per record.
    """
    return {key: [record.get(key) for record in batch] for key in batch[0]}
