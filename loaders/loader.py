"""``StreamingLoader``: the DataLoader of ``StreamingDataset.loader()``, whole batches in global order for any
worker count, and ``collate_records`` for whole records."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

from ltsgen.errors import LtsgenError, UsageError


class _Batches(IterableDataset):
    """A dataset's per-rank batches, each with its global batch index (for ``DataLoader(batch_size=None)``)."""

    def __init__(self, dataset: IterableDataset) -> None:
        self.dataset = dataset

    def __iter__(self):
        try:
            yield from self.dataset._whole_batches()
        except LtsgenError as error:
            if get_worker_info() is None:
                raise
            yield _WorkerFailure(
                error
            )  # torch would wrap it in a multi-line "Caught ... in DataLoader worker"

    def __len__(self) -> int:
        return self.dataset.num_batches


class _WorkerFailure:
    """An ``LtsgenError`` raised in a worker, sent as an item so that the loader raises it as it was."""

    def __init__(self, error: LtsgenError) -> None:
        self.error = error


class StreamingLoader(DataLoader):
    """The DataLoader of ``StreamingDataset.loader()``: whole batches in global order for any worker count.

    Workers send compact arrays through the pipe (no shared-memory segment per batch) and the LongTensors
    are made here. Each batch carries its global index, so the dataset in this process always stands after
    the last batch yielded: ``state_dict()`` is exact at any moment, and ``load_state_dict()`` accepts a
    state taken with any world size or worker count (the global batch size must be the same). Workers start
    from the dataset's position at each ``iter()``, which is why ``persistent_workers`` is refused.
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
        super().__init__(
            _Batches(dataset), batch_size=None, num_workers=num_workers, collate_fn=_as_made, **kwargs
        )
        self.streaming = dataset

    def __iter__(self):
        for item in super().__iter__():
            if isinstance(item, _WorkerFailure):
                raise item.error from None  # its one line, as without workers
            batch, data = item
            self.streaming._seek(batch + 1)
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
