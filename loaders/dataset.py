"""``StreamingDataset``: any ltsgen dataset directory or URL as a resumable PyTorch ``IterableDataset``.

The order is stateless (``order.py``); the only state is (seed, epoch, samples consumed), so resume
costs one window read, works after any number of interruptions, and continues the same global order
with another world size or DataLoader worker count (elastic) while the global batch size stays the same.
Nothing is shared between processes: every rank and worker reads what it needs from the shards itself.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .contract import MANIFEST_NAME, ContractError, Manifest, ShardInfo, parse_bucket_name, parse_manifest
from .formats import ShardColumns, TokenColumn, decode_shard
from .order import REMAINDERS, BatchPlan, EpochOrder, batch_in_stream, bucket_schedule, worker_batches
from .packing import PackedWindow, block_positions, tokenize_column
from .sources import check_pipe, join, read_bytes

STATE_FORMAT = "ltsgen.loaders/1"
ON_ERROR = ("raise", "skip")
_WINDOW_CACHE = 2  # decoded windows kept per process: the current one and its neighbour


class StreamingDataset(IterableDataset):
    """Records (or packed token blocks) of one split of an ltsgen dataset directory, local or remote.

    Args:
        path_or_url: the dataset directory: a path, ``file://``, ``http(s)://`` or any fsspec URL
            (``pipe:`` templates only with ``allow_pipe=True``, see ``sources``).
        split, bucket: which shards (``bucket=None``: every bucket of the split).
        shuffle, seed, epoch, shuffle_window: the epoch order (shard permutation, then a permutation of
            the items of each window of ``shuffle_window`` shards).
        rank, world_size: default to torch.distributed's when it is initialised, else 0 and 1.
        batch_size: the per-rank batch size, which must be the DataLoader's (``loader()`` sets it); the
            global batch is ``batch_size * world_size``, and rank ``r`` takes slice ``r`` of each one.
        remainder: ``"drop"`` the last partial global batch of the epoch, or ``"wrap"`` around to fill it.
        columns, transform: fields to read; a function applied to each yielded item.
        seq_len: pack documents into blocks of ``seq_len + 1`` tokens with EOS between documents and yield
            ``{"input_ids": LongTensor[seq_len + 1]}`` (plus ``"position_ids"`` with ``position_ids=True``).
            Untokenized data is tokenized on the fly with ``tokenizer`` (default: the directory's).
        by_bucket: draw each global batch from one length bucket, the bucket order a seeded permutation.
        verify: check each shard's sha256 against the manifest on its first read in a process.
        on_error: ``"raise"`` on a corrupt shard, or ``"skip"`` it (counted in ``skipped``; its slots are
            refilled from the rest of its shuffle window so that every rank keeps the same count).
    """

    def __init__(
        self,
        path_or_url: str | os.PathLike,
        split: str = "train",
        *,
        bucket: str | None = None,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        columns: Sequence[str] | None = None,
        transform: Callable[[dict], Any] | None = None,
        batch_size: int = 1,
        remainder: str = "drop",
        shuffle_window: int = 4,
        seq_len: int | None = None,
        position_ids: bool = False,
        tokenizer: Any = None,
        eos_id: int | None = None,
        by_bucket: bool = False,
        verify: bool = True,
        on_error: str = "raise",
        allow_pipe: bool = False,
    ) -> None:
        super().__init__()
        self.root = str(path_or_url)
        check_pipe(self.root, allow_pipe)
        if remainder not in REMAINDERS:
            raise ValueError(f"remainder must be one of {REMAINDERS}, not {remainder!r}")
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
        if batch_size < 1 or shuffle_window < 1 or (seq_len is not None and seq_len < 1):
            raise ValueError("batch_size, shuffle_window and seq_len must be positive")
        if seq_len is not None and transform is not None:
            raise ValueError(
                "transform applies to records; with seq_len, transform the blocks in the training loop"
            )
        if by_bucket and seq_len is not None:
            raise ValueError("by_bucket batches whole documents by length; it does not combine with seq_len")
        self.split, self.bucket = split, bucket
        self.shuffle, self.seed, self.epoch, self.shuffle_window = shuffle, seed, epoch, shuffle_window
        self.rank, self.world_size = _distributed(rank, world_size)
        self.batch_size, self.remainder = batch_size, remainder
        self.global_batch_size = batch_size * self.world_size
        self.columns = None if columns is None else tuple(columns)
        self.transform = transform
        self.seq_len, self.position_ids = seq_len, position_ids
        self.by_bucket, self.verify, self.on_error, self.allow_pipe = by_bucket, verify, on_error, allow_pipe

        where = join(self.root, MANIFEST_NAME)
        self.manifest: Manifest = parse_manifest(read_bytes(where, allow_pipe=allow_pipe), where)
        self.shards: list[ShardInfo] = self.manifest.shards(split, bucket)
        if not self.shards:
            have = sorted({s.bucket for s in self.manifest.shards(split) if s.bucket})
            which = f"split {split!r}" + (f" bucket {bucket!r} (buckets: {have})" if bucket else "")
            raise ContractError(f"{where}: {which} has no shards")
        self.streams = self._streams()
        self.tokenized = all(s.tokens is not None for s in self.shards)
        self._tokenizer = tokenizer
        self.eos_id = eos_id
        if seq_len is not None:
            if not self.tokenized and self._tokenizer is None and not self.manifest.tokenizer:
                raise ContractError(
                    f"{where}: the data is not tokenized and no tokenizer was given or stored"
                )
            if self.eos_id is None:
                stored = (self.manifest.tokenizer or {}).get("eos_id")
                self.eos_id = stored if stored is not None else _eos_id(self.tokenizer, where)
        self._process: _ProcessState | None = None
        self._shard_tokens: dict[int, int] = {
            i: s.tokens + s.samples for i, s in enumerate(self.shards) if s.tokens is not None
        }
        self.plans = [
            BatchPlan(self._stream_total(i), self.global_batch_size, remainder)
            for i in range(len(self.streams))
        ]
        if self.num_batches == 0:
            raise ContractError(
                f"{where}: split {split!r} has too few items for one global batch of {self.global_batch_size}"
            )
        self.fingerprint = self._fingerprint()
        self._consumed = 0  # global batches this copy has finished (or, with _partial, the one in progress)
        self._partial = 0  # items of this rank's slice of batch _consumed already yielded
        self._anchor = 0  # the global batch where the current worker rotation started
        self._workers = 1

    # ------------------------------------------------------------------ sizes

    @property
    def num_batches(self) -> int:
        """Global batches per epoch (the same on every rank)."""
        return sum(plan.num_batches for plan in self.plans)

    def __len__(self) -> int:
        """Items this rank yields in a whole epoch (``num_batches * batch_size``)."""
        return self.num_batches * self.batch_size

    @property
    def skipped(self) -> dict[str, str]:
        """Shards skipped in this process with ``on_error="skip"``: path -> reason."""
        return {} if self._process is None else dict(self._process.skipped)

    @property
    def tokenizer(self):
        if self._tokenizer is None or isinstance(self._tokenizer, str | os.PathLike):
            from tokenizers import Tokenizer

            location = self._tokenizer or join(self.root, self.manifest.tokenizer["path"])
            raw = read_bytes(location, allow_pipe=self.allow_pipe)
            self._tokenizer = Tokenizer.from_str(raw.decode("utf-8"))
        return self._tokenizer

    # ------------------------------------------------------------------ state

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning (no-op when it is the current epoch, e.g. after resume)."""
        if epoch != self.epoch:
            self.epoch, self._consumed, self._partial, self._anchor = epoch, 0, 0, 0

    def state_dict(self) -> dict[str, Any]:
        """The whole position: (seed, epoch, samples consumed), plus what checks that it fits."""
        return {
            "format": STATE_FORMAT,
            "fingerprint": self.fingerprint,
            "seed": self.seed,
            "epoch": self.epoch,
            "samples_consumed": self._consumed * self.global_batch_size,
            "global_batch_size": self.global_batch_size,
            "batch_size": self.batch_size,
            "partial": self._partial,
            "anchor": self._anchor if self._workers > 1 else self._consumed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume from ``state_dict()``, or from a torchdata ``StatefulDataLoader.state_dict()`` taken
        with any world size and worker count (elastic); the global batch size must be the same."""
        state = dataset_state(state)
        if state.get("format") != STATE_FORMAT:
            raise ValueError(f"not an ltsgen loader state (format {state.get('format')!r})")
        if state["fingerprint"] != self.fingerprint:
            raise ValueError(
                "the state belongs to another dataset or configuration (shards, seq_len, shuffle, "
                "shuffle_window, remainder or by_bucket differ)"
            )
        if state["global_batch_size"] != self.global_batch_size:
            raise ValueError(
                f"global batch size changed from {state['global_batch_size']} to {self.global_batch_size}: "
                "resume needs the same batch_size * world_size"
            )
        if state["partial"] and state["batch_size"] != self.batch_size:
            raise ValueError("a state taken inside a batch resumes only with the same per-rank batch size")
        self.seed, self.epoch = state["seed"], state["epoch"]
        self._consumed = state["samples_consumed"] // self.global_batch_size
        self._partial = state["partial"]
        in_worker = get_worker_info() is not None  # torchdata restores each worker's own state there
        self._anchor = state["anchor"] if in_worker else self._consumed

    # ------------------------------------------------------------------ iteration

    def __iter__(self):
        """This rank's items, one at a time (for a DataLoader with ``batch_size=self.batch_size``)."""
        for batch, first, data in self._rank_batches():
            if self.seq_len is None:
                items = data
            else:
                items = [
                    {k: torch.from_numpy(v[i].astype(np.int64)) for k, v in data.items()}
                    for i in range(len(data["input_ids"]))
                ]
            for i in range(first, self.batch_size):
                self._consumed, self._partial = (batch + 1, 0) if i + 1 == self.batch_size else (batch, i + 1)
                yield items[i]

    def iter_batches(self):
        """This rank's batches, whole and compact: packed blocks as numpy arrays in the storage dtype
        (``loader()`` makes the LongTensors in the main process), records collated by ``collate_records``."""
        for batch, first, data in self._rank_batches():
            self._consumed, self._partial = batch + 1, 0
            if self.seq_len is None:
                yield collate_records(data[first:])
            else:
                yield {key: value[first:] for key, value in data.items()}

    def loader(self, num_workers: int = 0, **kwargs):
        """A torchdata ``StatefulDataLoader`` of this rank's batches (``{"input_ids": LongTensor[B, seq_len + 1]}``
        when packing). Workers send compact arrays through the pipe: no shared-memory segment per batch."""
        return _loader_class()(
            _Batches(self), batch_size=None, num_workers=num_workers, collate_fn=_identity, **kwargs
        )

    def _rank_batches(self):
        """``(global batch, first item to yield, data)`` for each global batch this process serves."""
        info = get_worker_info()
        worker, workers = (info.id, info.num_workers) if info is not None else (0, 1)
        self._workers = workers
        process = self._process_state()
        orders = self._orders()
        schedule, in_stream = self._schedule()
        start, skip = self._consumed, self._partial
        for batch in worker_batches(self.num_batches, start, self._anchor, worker, workers):
            stream, index = (0, batch) if schedule is None else (int(schedule[batch]), int(in_stream[batch]))
            positions = self.plans[stream].positions(index, self.rank, self.batch_size)
            first = skip if batch == start else 0
            if self.seq_len is None:
                data = [self._record(process, stream, orders[stream], int(p)) for p in positions]
            else:
                data = self._blocks(process, stream, orders[stream], positions)
            yield batch, first, data

    # ------------------------------------------------------------------ internals

    def _streams(self) -> list[list[int]]:
        if not self.by_bucket:
            return [list(range(len(self.shards)))]
        names = {s.bucket for s in self.shards}
        if None in names:
            raise ContractError(f"{self.root}: by_bucket needs a bucketed split, {self.split!r} is not")
        order = [b for b in self.manifest.buckets or [] if b in names]
        order += sorted(names - set(order), key=_bucket_key)
        return [[i for i, s in enumerate(self.shards) if s.bucket == name] for name in order]

    def _stream_total(self, stream: int) -> int:
        shards = self.streams[stream]
        if self.seq_len is None:
            return sum(self.shards[i].samples for i in shards)
        return sum(self._tokens_of(i) for i in shards) // (self.seq_len + 1)

    def _tokens_of(self, shard: int) -> int:
        """Tokens a shard adds to the packed stream (its ids plus one EOS per record)."""
        if shard not in self._shard_tokens:  # untokenized data: tokenize it once to count
            column = self._process_state().tokens(shard)  # None: skipped as corrupt, adds nothing
            self._shard_tokens[shard] = 0 if column is None else int(column.offsets[-1]) + len(column)
        return self._shard_tokens[shard]

    def _fingerprint(self) -> str:
        key = {
            "split": self.split,
            "bucket": self.bucket,
            "shards": [[s.path, s.sha256, s.samples] for s in self.shards],
            "seq_len": self.seq_len,
            "shuffle": self.shuffle,
            "shuffle_window": self.shuffle_window,
            "remainder": self.remainder,
            "by_bucket": self.by_bucket,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]

    def _process_state(self) -> _ProcessState:
        if self._process is None or self._process.pid != os.getpid():
            self._process = _ProcessState(self)
        return self._process

    def _orders(self) -> list[EpochOrder]:
        process = self._process_state()
        if process.epoch_key != (self.seed, self.epoch):
            process.epoch_key = (self.seed, self.epoch)
            process.windows.clear()
            process.starts.clear()
            process.token_columns.clear()
            process.orders = [
                EpochOrder(
                    tuple(self.shards[i].samples for i in shards),
                    self.seed,
                    self.epoch,
                    self.shuffle,
                    self.shuffle_window,
                    stream,
                )
                for stream, shards in enumerate(self.streams)
            ]
        return process.orders

    def _schedule(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        if len(self.streams) == 1:
            return None, None
        labels = bucket_schedule([p.num_batches for p in self.plans], self.seed, self.epoch, self.shuffle)
        return labels, batch_in_stream(labels)

    def _record(self, process: _ProcessState, stream: int, order: EpochOrder, position: int) -> Any:
        window = order.window_of(position)
        shards, rows = process.window_records(stream, order, window)
        offset = position - int(order.window_starts[window])
        record = shards[offset].record(int(rows[offset]))
        return record if self.transform is None else self.transform(record)

    def _blocks(self, process: _ProcessState, stream: int, order: EpochOrder, positions: np.ndarray) -> dict:
        block = self.seq_len + 1
        runs = np.split(positions, np.flatnonzero(np.diff(positions) != 1) + 1)
        pieces = [
            process.stream_tokens(stream, order, int(r[0]) * block, (int(r[-1]) + 1) * block) for r in runs
        ]
        data = {"input_ids": np.concatenate([p[0] for p in pieces]).reshape(-1, block)}
        if self.position_ids:
            data["position_ids"] = block_positions(np.concatenate([p[1] for p in pieces]), block)
        return data


class _Batches(IterableDataset):
    """A dataset's per-rank batches as an IterableDataset (for ``DataLoader(batch_size=None)``)."""

    def __init__(self, dataset: StreamingDataset) -> None:
        self.dataset = dataset

    def __iter__(self):
        return self.dataset.iter_batches()

    def __len__(self) -> int:
        return self.dataset.num_batches

    def state_dict(self) -> dict[str, Any]:
        return self.dataset.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.dataset.load_state_dict(state)


def _identity(batch):
    return batch


@functools.cache
def _loader_class() -> type:
    """``StatefulDataLoader`` whose batches become LongTensors in the main process (torchdata loads lazily)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    class StreamingLoader(StatefulDataLoader):
        def __iter__(self):
            for batch in super().__iter__():
                yield {
                    k: torch.from_numpy(v.astype(np.int64)) if isinstance(v, np.ndarray) else v
                    for k, v in batch.items()
                }

    return StreamingLoader


class _ProcessState:
    """What one process (main or DataLoader worker) has read: verified shards, decoded windows, skips."""

    def __init__(self, dataset: StreamingDataset) -> None:
        self.dataset = dataset
        self.pid = os.getpid()
        self.epoch_key: tuple[int, int] | None = None
        self.orders: list[EpochOrder] = []
        self.windows: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self.skipped: dict[str, str] = {}
        self.verified: set[int] = set()
        self.token_columns: OrderedDict[int, TokenColumn] = OrderedDict()
        self.starts: dict[int, np.ndarray] = {}

    def shard(self, index: int, columns: Sequence[str] | None) -> ShardColumns | None:
        """Shard ``index`` decoded, or None when it is corrupt and ``on_error="skip"``."""
        ds = self.dataset
        info = ds.shards[index]
        where = join(ds.root, info.path)
        if where in self.skipped:
            return None
        try:
            data = read_bytes(where, allow_pipe=ds.allow_pipe)
            if ds.verify and info.sha256 and index not in self.verified:
                digest = hashlib.sha256(data).hexdigest()
                if digest != info.sha256:
                    raise ContractError(
                        f"{where}: sha256 {digest[:16]}... does not match the manifest's {info.sha256[:16]}... "
                        "(corrupt or changed shard)"
                    )
                self.verified.add(index)
            shard = decode_shard(data, ds.manifest.format, where, columns)
            if shard.num_rows != info.samples:
                raise ContractError(
                    f"{where}: holds {shard.num_rows} records, the manifest says {info.samples}"
                )
            if (
                shard.tokens is not None
                and info.tokens is not None
                and shard.tokens.offsets[-1] != info.tokens
            ):
                raise ContractError(
                    f"{where}: holds {int(shard.tokens.offsets[-1])} tokens, the manifest says {info.tokens}"
                )
            return shard
        except ContractError as error:
            if ds.on_error == "raise":
                raise
            self.skipped[where] = str(error)
            warnings.warn(f"skipping corrupt shard ({error})", stacklevel=2)
            return None

    def tokens(self, index: int) -> TokenColumn | None:
        """The token ids of shard ``index`` (tokenized on the fly when the data has none)."""
        if index in self.token_columns:
            return self.token_columns[index]
        ds = self.dataset
        shard = self.shard(index, ["input_ids"] if ds.tokenized else ["text"])
        if shard is None:
            return None
        column = shard.tokens
        if column is None:
            dtype = np.uint16 if ds.tokenizer.get_vocab_size() <= 2**16 else np.uint32
            column = tokenize_column(shard.fields["text"], ds.tokenizer, dtype)
        self.token_columns[index] = column
        while len(self.token_columns) > 2 * ds.shuffle_window:
            self.token_columns.popitem(last=False)
        return column

    def _cached(self, key: tuple[int, int], build: Callable[[], Any]) -> Any:
        if key not in self.windows:
            self.windows[key] = build()
            while len(self.windows) > _WINDOW_CACHE:
                self.windows.popitem(last=False)
        return self.windows[key]

    def window_records(self, stream: int, order: EpochOrder, window: int):
        """Decoded shards and rows of each item of a window, in epoch order (skipped shards refilled)."""

        def build():
            ds = self.dataset
            local, rows = order.window_items(window)
            decoded = {s: self.shard(ds.streams[stream][s], ds.columns) for s in set(local.tolist())}
            ok = np.asarray([decoded[s] is not None for s in local.tolist()], dtype=bool)
            if not ok.all():
                if not ok.any():
                    raise ContractError(f"{ds.root}: every shard of a shuffle window is corrupt")
                local, rows = np.resize(local[ok], len(local)), np.resize(rows[ok], len(rows))
            return [decoded[s] for s in local.tolist()], rows

        return self._cached((stream, window), build)

    def window_tokens(self, stream: int, order: EpochOrder, window: int) -> PackedWindow:
        """The packed token stream of a window (corrupt shards skipped, the rest repeated to fill it)."""

        def build():
            ds = self.dataset
            shards = order.window_shards(window)
            nominal = sum(ds._tokens_of(ds.streams[stream][s]) for s in shards.tolist())
            columns = {s: self.tokens(ds.streams[stream][s]) for s in shards.tolist()}
            valid = [s for s in shards.tolist() if columns[s] is not None]
            if not valid:
                raise ContractError(f"{ds.root}: every shard of a shuffle window is corrupt")
            local, rows = order.window_items(window)
            keep = np.isin(local, valid)
            column_of = np.searchsorted(np.sort(valid), local[keep])  # index into the sorted valid shards
            packed = PackedWindow(
                [columns[s] for s in sorted(valid)], column_of, rows[keep], ds.eos_id, nominal
            )
            if len(valid) == len(shards) and packed.total != nominal:
                raise ContractError(
                    f"{ds.root}: a window packs to {packed.total} tokens, the manifest counts {nominal}"
                )
            return packed

        return self._cached((stream, window), build)

    def stream_tokens(self, stream: int, order: EpochOrder, start: int, stop: int):
        """Tokens ``[start, stop)`` of a stream's packed epoch (and their document offsets)."""
        starts = self.token_starts(stream, order)
        want = self.dataset.position_ids
        ids, offsets = [], []
        window = int(np.searchsorted(starts, start, side="right")) - 1
        while start < stop:
            lo, hi = start - int(starts[window]), min(stop, int(starts[window + 1])) - int(starts[window])
            piece_ids, piece_offsets = self.window_tokens(stream, order, window).slice(lo, hi, want)
            ids.append(piece_ids)
            offsets.append(piece_offsets)
            start = int(starts[window]) + hi
            window += 1
        return np.concatenate(ids), (np.concatenate(offsets) if want else None)

    def token_starts(self, stream: int, order: EpochOrder) -> np.ndarray:
        """Offset of each window in the stream's packed epoch, from the manifest's token counts."""
        ds = self.dataset
        if stream not in self.starts:
            sizes = [
                sum(ds._tokens_of(ds.streams[stream][s]) for s in order.window_shards(w).tolist())
                for w in range(order.num_windows)
            ]
            self.starts[stream] = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return self.starts[stream]


def collate_records(batch: list[dict]) -> dict[str, list]:
    """Collate records into a dict of lists (token ids stay one array per record)."""
    return {key: [record.get(key) for record in batch] for key in batch[0]}


def dataset_state(state: dict[str, Any]) -> dict[str, Any]:
    """The global dataset state inside a ``state_dict()`` or a torchdata ``StatefulDataLoader`` state.

    With DataLoader workers, each worker's snapshot holds its own progress; the global position is the
    furthest one, since the loader yields global batches in order.
    """
    if "samples_consumed" in state:
        return state
    if "dataset_state" in state and state["dataset_state"]:
        return state["dataset_state"]
    snapshots = (state.get("_snapshot") or {}).get("_worker_snapshots") or {}
    found = [s["dataset_state"] for s in snapshots.values() if s.get("dataset_state")]
    if not found:
        raise ValueError("no ltsgen dataset state in this state dict")
    best = max(found, key=lambda s: (s["samples_consumed"], s["partial"]))
    if best["partial"]:
        raise ValueError("the loader state was taken inside a batch; resume needs a batch boundary")
    return best


def _distributed(rank: int | None, world_size: int | None) -> tuple[int, int]:
    initialised = torch.distributed.is_available() and torch.distributed.is_initialized()
    if rank is None:
        rank = torch.distributed.get_rank() if initialised else 0
    if world_size is None:
        world_size = torch.distributed.get_world_size() if initialised else 1
    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside world size {world_size}")
    return rank, world_size


def _eos_id(tokenizer, where: str) -> int:
    for token in ("<|endoftext|>", "</s>", "<eos>", "[SEP]"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise ContractError(f"{where}: the tokenizer has no end-of-text token; pass eos_id")


def _bucket_key(name: str) -> tuple[int, float]:
    try:
        lo, hi = parse_bucket_name(name)
    except ValueError:
        return (2**62, 0.0)
    return lo, float("inf") if hi is None else hi
