"""Length buckets: batches of whole documents drawn within one bucket, and exact-length evaluation sets.

Bucketed batching itself is ``StreamingDataset(..., by_bucket=True)`` (the bucket of each global batch comes
from ``order.bucket_schedule``); this module collates such batches and reads evaluation sets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import torch

from .contract import EVAL_SPLIT
from .errors import LoaderError


class PadCollate:
    """Collate records of one bucket into ``input_ids`` [B, L] (right-padded with ``pad_id``) and ``lengths``.

    Args:
        pad_id: the token id that fills rows shorter than the longest.
        max_len: cut longer records to this many tokens (None: keep all).
    """

    def __init__(self, pad_id: int, max_len: int | None = None) -> None:
        self.pad_id, self.max_len = pad_id, max_len

    def __call__(self, batch: list[dict]) -> dict:
        arrays = [np.asarray(record["input_ids"])[: self.max_len] for record in batch]
        width = max(len(a) for a in arrays)
        ids = torch.full((len(arrays), width), self.pad_id, dtype=torch.long)
        for row, array in enumerate(arrays):
            ids[row, : len(array)] = torch.from_numpy(array.astype(np.int64))
        return {
            "input_ids": ids,
            "lengths": torch.tensor([len(a) for a in arrays]),
            "id": [record.get("id") for record in batch],
        }


def load_eval_set(
    path_or_url: str | os.PathLike, length: int, *, split: str = EVAL_SPLIT, allow_pipe: bool = False
) -> torch.Tensor:
    """The evaluation sequences of exactly ``length`` tokens (``DIR/<split>/<length>/``), in stored order.

    Args:
        path_or_url: the dataset directory.
        length: the sequence length (the bucket folder's name).
        split: ``EVAL_SPLIT``, or ``EVAL_CONCAT_SPLIT`` for the concatenated-stream variant.
        allow_pipe: read through a ``pipe:`` template.

    Returns:
        LongTensor [n, length], every sequence (the same in each rank of a distributed job); ``LoaderError``
        when a sequence has another length.
    """
    rows = [
        record["input_ids"]
        for record in eval_records(path_or_url, length, split=split, allow_pipe=allow_pipe)
    ]
    return torch.from_numpy(np.stack(rows).astype(np.int64))


def eval_records(
    path_or_url: str | os.PathLike,
    length: int,
    *,
    split: str = EVAL_SPLIT,
    columns: tuple[str, ...] = ("input_ids",),
    allow_pipe: bool = False,
) -> Iterator[dict]:
    """The records of ``load_eval_set``'s sequences with ``columns`` (``input_ids`` and ``id`` always), one
    at a time and in stored order; ``LoaderError`` at the first whose ``input_ids`` has another length."""
    from .dataset import StreamingDataset

    columns = tuple(dict.fromkeys(("input_ids", "id", *columns)))
    dataset = StreamingDataset(  # every sequence, in every process of a torch.distributed job
        path_or_url, split, bucket=str(length), shuffle=False, columns=columns, allow_pipe=allow_pipe,
        rank=0, world_size=1,
    )  # fmt: skip
    for number, record in enumerate(dataset):
        if len(record["input_ids"]) != length:
            raise LoaderError(
                f"{dataset.root}: {split}/{length} sequence {number} ({record['id']}) has "
                f"{len(record['input_ids'])} tokens, not {length}"
            )
        yield record
