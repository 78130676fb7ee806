"""``StreamingDataset``: any ltsgen dataset directory or URL as a resumable PyTorch ``IterableDataset``.

The order is stateless (``order.py``); the only state is (seed, epoch, samples consumed), so resume
costs one window read, works after any number of interruptions, and continues the same global order
with another world size or DataLoader worker count (elastic) while the global batch size stays the same.
Every rank and worker reads the shards it needs itself (``reader.py``), through a node-local cache that
they all share when ``cache_dir`` is given (``cache.py``); no state is shared between processes.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import numbers
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from ltsgen.errors import UsageError

from .cache import ShardCache
from .contract import (
    MANIFEST_NAME,
    MAX_DOC_CHARS,
    TRAIN_SPLIT,
    Manifest,
    ShardInfo,
    bucket_order,
    parse_manifest,
    token_dtype,
)
from .errors import LoaderError
from .formats import ShardColumns, TokenColumn
from .loader import StreamingLoader, collate_records
from .mixture import Mixture, resolve_weights, source_seed
from .order import (
    REMAINDERS,
    BatchPlan,
    EpochOrder,
    batch_in_stream,
    bucket_schedule,
    window_groups,
    worker_batches,
)
from .packing import (
    PackedWindow,
    TextTokens,
    block_positions,
    parse_tokenizer,
    tokenize_column,
    without_truncation,
)
from .reader import ShardReader, decoding_threads
from .sources import PIPE_PREFIX, check_pipe, is_remote, join, read_bytes, read_ranges
from .state import STATE_FORMAT, WorkerWitness, check_state, dataset_state, mixture_text
from .stored_ids import stored_token_shards
from .token_counts import read_token_counts, write_token_counts

ON_ERROR = ("raise", "skip")
__all__ = ["LoaderError", "StreamingDataset", "StreamingMixture", "dataset_state"]


class StreamingDataset(IterableDataset):
    """Records (or packed token blocks) of one split of an ltsgen dataset directory, local or remote.

    Args:
        path_or_url: the dataset directory: a path, ``file://``, ``http(s)://`` or any fsspec URL
            (``pipe:`` templates only with ``allow_pipe=True``, see ``sources``); or a mapping
            ``{path_or_url: proportion}``, which mixes several datasets (``StreamingMixture``).
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
        verify: check each shard's sha256 against the manifest each time it is read (a shard without one
            is then refused).
        on_error: ``"raise"`` on a corrupt shard, or ``"skip"`` it (counted in ``skipped``; its slots are
            refilled from the rest of its shuffle window, or the nearest later window when none is left
            there, so that every rank keeps the same count).
        allow_pipe: run ``pipe:`` templates (they execute a shell command).
        storage_options: keyword arguments for the URL's fsspec filesystem (credentials, endpoint, ...).
        cache_dir, cache_limit: a node-local folder where remote shards are kept for every rank and worker
            of the machine (see ``cache.ShardCache``: each shard downloaded and checked against its sha256
            once per node, the least recently used beyond ``cache_limit`` bytes, e.g. ``"20GB"``, removed).
            Without it each process reads the shards it needs itself, every epoch.
        max_doc_chars: with ``seq_len`` on untokenized data, a shard holding a text longer than this is
            refused (or skipped with ``on_error="skip"``) before it is tokenized, which costs about 130 bytes
            of memory per character; 0 for no limit.
        token_counts: with ``seq_len`` on untokenized data, a local JSON file of each record's token count
            for the tokenizer (``token_counts.py``): the shards counted there are not tokenized to plan
            the stream, and those counted here are written to it (``ltsgen train`` keeps one in its run
            folder, so that a resumed run plans without tokenizing the split).
    """

    def __init__(
        self,
        path_or_url: str | os.PathLike,
        split: str = TRAIN_SPLIT,
        *,
        bucket: str | None = None,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        columns: Sequence[str] | None = None,
        transform: Callable[[dict], Any] | None = None,
        batch_size: int | None = None,
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
        storage_options: dict[str, Any] | None = None,
        cache_dir: str | os.PathLike | None = None,
        cache_limit: int | str | None = None,
        max_doc_chars: int = MAX_DOC_CHARS,
        token_counts: str | os.PathLike | None = None,
    ) -> None:
        super().__init__()
        check_pipe(str(path_or_url), allow_pipe)
        _check_options(batch_size, remainder, shuffle_window, seq_len, transform, by_bucket, on_error)
        for name, value in (("seed", seed), ("epoch", epoch), ("max_doc_chars", max_doc_chars)):
            _check_integer(name, value, 63)
        if eos_id is not None:
            _check_integer("eos_id", eos_id, 32)
        if cache_dir is None and cache_limit is not None:
            raise UsageError("cache_limit needs cache_dir (the folder it limits)")
        if token_counts is not None and is_remote(str(token_counts)):
            raise UsageError(f"token_counts is a local file, not {token_counts}")
        self.root = str(path_or_url)
        self.split, self.bucket = split, bucket
        self.shuffle, self.seed, self.epoch = shuffle, int(seed), int(epoch)  # numpy's integers as Python's
        self.shuffle_window = int(shuffle_window)
        self._place(rank, world_size, batch_size, remainder)
        self.columns = None if columns is None else tuple(columns)
        self.transform = transform
        self.seq_len, self.position_ids = None if seq_len is None else int(seq_len), position_ids
        self.by_bucket, self.verify, self.on_error, self.allow_pipe = by_bucket, verify, on_error, allow_pipe
        self.storage_options = dict(storage_options or {})
        self.max_doc_chars = max_doc_chars
        self.token_counts = token_counts
        # local shards (file:// too) are read in place, whatever cache_dir says
        cached = cache_dir is not None and is_remote(self.root)
        self.cache = ShardCache(cache_dir, cache_limit) if cached else None
        self._read_manifest()
        self.streams = self._streams()
        self._choose_token_source(tokenizer, eos_id)
        self._plan_batches()
        self.identity = self._identity()

    def _place(
        self, rank: int | None, world_size: int | None, batch_size: int | None, remainder: str
    ) -> None:
        """This rank's share of the global batches, and the position at the start of the epoch."""
        self.rank, self.world_size = _distributed(rank, world_size)
        self.batch_size, self.remainder = int(batch_size or 1), remainder  # numpy's integers as Python's
        self._batch_size_known = batch_size is not None
        self.global_batch_size = self.batch_size * self.world_size
        self._process: _ProcessState | None = None
        self._consumed = 0  # global batches this copy has finished (or, with _partial, the one in progress)
        self._partial = 0  # items of this rank's slice of batch _consumed already yielded
        self._anchor = 0  # the global batch where the current worker rotation started
        self._workers = 1
        self._served_windows: list[int] | None = None  # a loader worker's windows (None: every window)
        self._first_window = 0  # with _served_windows: the window of the loader's first batch
        self._witness = WorkerWitness()

    def _read_manifest(self) -> None:
        """The manifest and the shards of the split (and bucket), each with a sha256 when verifying."""
        where = join(self.root, MANIFEST_NAME)
        self.manifest: Manifest = parse_manifest(self._read(where), where)
        self.shards: list[ShardInfo] = self.manifest.shards(self.split, self.bucket)
        if not self.shards:
            have = sorted({s.bucket for s in self.manifest.shards(self.split) if s.bucket})
            which = f"split {self.split!r}" + (
                f" bucket {self.bucket!r} (buckets: {have})" if self.bucket else ""
            )
            raise LoaderError(f"{where}: {which} has no shards")
        unverifiable = [s.path for s in self.shards if s.sha256 is None]
        if self.verify and unverifiable:
            raise LoaderError(
                f"{where}: shard {unverifiable[0]} has no sha256 to verify it against "
                f"({len(unverifiable)} shards without one; verify=False reads them unverified)"
            )

    def _choose_token_source(self, tokenizer: Any, eos_id: int | None) -> None:
        """What packing reads: the shards' own ids, an attached tokenizer's stored ids (the same tokenizer,
        so the packed stream and the state's identity are those of tokenizing the text), or the text,
        tokenized here; and the EOS id between documents."""
        self.tokenized = all(s.tokens is not None for s in self.shards)
        self._tokenizer = tokenizer = _as_tokenizer(tokenizer)
        self._tokenizer_digest: str | None = None
        self.eos_id = None if eos_id is None else int(eos_id)
        stored_ids = None if self.seq_len is None or self.tokenized else stored_token_shards(
            self.manifest, self.shards, tokenizer, self._read
        )  # fmt: skip
        self.reads_stored_ids = stored_ids is not None
        self.read_shards, self.read_format = (self.shards, self.manifest.format) if stored_ids is None else (
            stored_ids, "parquet"
        )  # fmt: skip
        self.tokenized = self.tokenized or self.reads_stored_ids
        if self.seq_len is None:
            return
        where = join(self.root, MANIFEST_NAME)
        if not self.tokenized and self._tokenizer is None and not self.manifest.tokenizer:
            raise LoaderError(f"{where}: the data is not tokenized and no tokenizer was given or stored")
        if self.eos_id is None:
            stored = (self.manifest.tokenizer or {}).get("eos_id")
            self.eos_id = stored if stored is not None else _eos_id(self.tokenizer, where)

    def _plan_batches(self) -> None:
        """The global batches of each stream (one, or one per bucket with ``by_bucket``)."""
        self._shard_tokens: dict[int, int] = {
            i: s.tokens + s.samples for i, s in enumerate(self.read_shards) if s.tokens is not None
        }
        self._record_tokens: dict[str, np.ndarray] = {}  # shard sha256 -> its records' token counts
        counting = self.token_counts is not None and self.seq_len is not None and not self.tokenized
        recorded = read_token_counts(self.token_counts, self._tokenizer_sha256()) if counting else {}
        for i, shard in enumerate(self.shards):
            counts = recorded.get(shard.sha256)
            if counts is not None and len(counts) == shard.samples:
                self._record_tokens[shard.sha256] = np.asarray(counts, dtype=np.int32)
                self._shard_tokens[i] = sum(counts) + shard.samples
        self.plans = [
            BatchPlan(self._stream_total(i), self.global_batch_size, self.remainder)
            for i in range(len(self.streams))
        ]
        if counting:
            self._record_token_counts(recorded)
        if self.num_batches == 0:
            if self.skipped:
                raise self._skipped_error(f"split {self.split!r} has too few items left for one global batch")
            items = sum(plan.total for plan in self.plans)
            what = (
                f"{items} items"
                if self.seq_len is None
                else f"{items} blocks of seq_len + 1 = {self.seq_len + 1:,} tokens"
            )
            raise LoaderError(
                f"{join(self.root, MANIFEST_NAME)}: split {self.split!r} has {what}, too few for one global "
                f"batch of {self.global_batch_size}"
            )

    def _record_token_counts(self, recorded: dict[str, list[int]]) -> None:
        """Add the shards counted here (not those skipped as corrupt) to the ``token_counts`` file."""
        counted = {  # those read from the file are there already (a list of another length was counted again)
            sha256: counts.tolist()
            for sha256, counts in self._record_tokens.items()
            if sha256 not in recorded or len(recorded[sha256]) != len(counts)
        }
        if not counted:
            return
        try:
            write_token_counts(self.token_counts, self._tokenizer_sha256(), {**recorded, **counted})
        except OSError as error:  # a cache: the dataset reads as well without it
            warnings.warn(
                f"{self.token_counts}: token counts not kept ({error.strerror or error})", stacklevel=4
            )

    def __new__(cls, path_or_url: Any = None, *args: Any, **kwargs: Any):
        """A mapping ``{path_or_url: proportion}`` makes a ``StreamingMixture``."""
        if cls is StreamingDataset and isinstance(path_or_url, Mapping):
            cls = StreamingMixture
        return super().__new__(cls)

    __new__.__signature__ = inspect.signature(__init__)  # help() and IDEs show the constructor's arguments

    def __getstate__(self) -> dict[str, Any]:
        """Pickled for spawned DataLoader workers without this process's reader (threads do not pickle)."""
        return dict(self.__dict__, _process=None)

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
        return {} if self._process is None else dict(self._process.reader.skipped)

    @property
    def tokenizer(self):
        if self._tokenizer is None or isinstance(self._tokenizer, str | os.PathLike):
            stored = self.manifest.tokenizer or {}
            location = self._tokenizer or join(self.root, stored["path"])
            raw = self._read(location)
            expected = None if self._tokenizer else stored.get("sha256")
            if self.verify and expected and hashlib.sha256(raw).hexdigest() != expected:
                raise LoaderError(
                    f"{location}: sha256 does not match the manifest's (corrupt or changed tokenizer)"
                )
            self._tokenizer = parse_tokenizer(raw, location)
            self._tokenizer_digest = hashlib.sha256(raw).hexdigest()
        return self._tokenizer

    # ------------------------------------------------------------------ state

    def set_epoch(self, epoch: int) -> None:
        """Start epoch ``epoch`` from its beginning, as ``DistributedSampler.set_epoch`` does.

        Args:
            epoch: the epoch; the current one is left where it stands (e.g. just after a resume).
        """
        _check_integer("epoch", epoch, 63)
        if epoch > self._last_epoch():
            raise UsageError(
                f"epoch {epoch} is beyond the last this dataset can number ({self._last_epoch()})"
            )
        if epoch != self.epoch:
            self.epoch, self._consumed, self._partial, self._anchor = int(epoch), 0, 0, 0
        self._witness.lower()

    def state_dict(self) -> dict[str, Any]:
        """The whole position, exact after the last item or batch yielded (also through ``loader()``).

        Returns:
            A small JSON-ready dict: (seed, epoch, samples consumed), plus the identity of what it resumes
            (``state.IDENTITY_KEYS``). A ``LoaderError`` when DataLoader worker processes iterate this dataset
            outside ``loader()``: this process's copy cannot know where they stand.
        """
        if self._witness.raised and get_worker_info() is None:
            raise LoaderError(
                "state_dict() of a StreamingDataset that a DataLoader's worker processes iterate cannot say "
                "where they stand: use dataset.loader(num_workers=N) and its state_dict(), or torchdata's "
                "StatefulDataLoader"
            )
        return {
            "format": STATE_FORMAT,
            "identity": dict(self.identity),
            "seed": self.seed,
            "epoch": self.epoch,
            "samples_consumed": self._consumed * self.global_batch_size,
            "global_batch_size": self.global_batch_size,
            "batch_size": self.batch_size,
            "partial": self._partial,
            "anchor": self._anchor if self._workers > 1 else self._consumed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where ``state`` stands, with any world size and worker count (elastic).

        Args:
            state: ``state_dict()`` of this dataset or its loader, on any rank, or a torchdata
                ``StatefulDataLoader.state_dict()``; every field is checked (``state.check_state``), and a
                ``LoaderError`` names the one that is malformed or differs (the global batch size, the
                identity of the dataset, tokenizer, ``seq_len`` or mixture) before anything changes. A state
                of the released ``ltsgen.loaders/1`` format resumes when its fingerprint is this dataset's;
                it recorded no tokenizer, so the tokenizer could not be checked.
        """
        state = dataset_state(state)
        state = check_state(
            state,
            self._state_identity(state),
            self.global_batch_size,
            self.batch_size,
            self.num_batches,
            self._v1_fingerprint(),
        )
        if state["epoch"] > self._last_epoch():
            raise LoaderError(
                f"state.epoch: {state['epoch']} is beyond the last this dataset can number ({self._last_epoch()})"
            )
        self.seed, self.epoch = state["seed"], state["epoch"]
        self._consumed = state["samples_consumed"] // self.global_batch_size
        self._partial = state["partial"]
        in_worker = get_worker_info() is not None  # torchdata restores each worker's own state there
        self._anchor = state["anchor"] if in_worker else self._consumed
        self._witness.lower()

    def _last_epoch(self) -> int:
        """The last epoch whose items this dataset can number (a mixture numbers them across its epochs)."""
        return 2**63 - 1

    def _state_identity(self, state: Any) -> dict[str, Any]:
        """The identity ``state`` is checked against (a mixture's may spell its sources as the state does)."""
        return self.identity

    # ------------------------------------------------------------------ iteration

    def __iter__(self):
        """This rank's items, one at a time (for a DataLoader with ``batch_size=self.batch_size``)."""
        info = get_worker_info()
        if info is not None and info.num_workers > 1 and not self._batch_size_known:
            raise UsageError(
                f"{self.root}: a DataLoader with {info.num_workers} workers takes their items in turns of its "
                "batch size, which the dataset must know to keep the order: pass the same batch_size to "
                f"StreamingDataset and DataLoader, or use dataset.loader(num_workers={info.num_workers})"
            )
        if info is not None:
            self._witness.raise_flag()  # the main process's copy no longer knows the position
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
        for _, data in self._whole_batches():
            yield data

    def loader(self, num_workers: int = 0, **kwargs) -> StreamingLoader:
        """A DataLoader of this rank's whole batches, in the same order for any ``num_workers``.

        Args:
            num_workers: DataLoader worker processes; each decodes the windows of the batches it serves.
            **kwargs: other ``torch.utils.data.DataLoader`` arguments (``pin_memory``, ``timeout``,
                ``prefetch_factor``: runs of batches requested ahead of each worker, by default about 8M
                tokens' worth with 2 or more packing workers); not ``batch_size`` or ``collate_fn``, which
                the dataset fixes.

        Returns:
            A ``StreamingLoader``: batches ``{"input_ids": LongTensor[batch_size, seq_len + 1]}`` when
            packing (records collated by ``collate_records`` otherwise); its ``state_dict()`` is the
            dataset's, which this dataset's own ``state_dict()`` also gives at any moment.
        """
        return StreamingLoader(self, num_workers=num_workers, **kwargs)

    def _whole_batches(self, batches: Iterable[int] | None = None):
        """``(global batch, data)`` for each of this process's batches (or of ``batches``, ascending from the
        position), the items not yet yielded only."""
        for batch, first, data in self._rank_batches(batches):
            self._consumed, self._partial = batch + 1, 0
            if self.seq_len is None:
                yield batch, collate_records(data[first:])
            else:
                yield batch, {key: value[first:] for key, value in data.items()}

    def _seek(self, consumed: int) -> None:
        """Stand after global batch ``consumed - 1`` (the main process follows its loader's workers)."""
        self._consumed, self._partial, self._anchor = consumed, 0, consumed
        self._witness.lower()

    def _served(self, batches: Iterable[int] | None) -> Iterable[int]:
        """The global batches this process serves: ``batches``, or by default its turns of one batch among
        the DataLoader's workers (``order.worker_batches``). Notes the worker count for the state."""
        info = get_worker_info()
        worker, self._workers = (info.id, info.num_workers) if info is not None else (0, 1)
        if batches is not None:
            return batches
        return worker_batches(self.num_batches, self._consumed, self._anchor, worker, self._workers)

    def _home_windows(self, start: int) -> np.ndarray | None:
        """The window holding the first token of this rank's slice of each global batch from ``start`` on,
        for packed blocks of one stream; else None: records are decoded a whole shard at a time (a batch
        crossing into the next window would decode all of it) and may carry a transform, whose work runs
        in turns better, and the batches of several streams (``by_bucket``) alternate."""
        if self.seq_len is None or len(self.streams) > 1:
            return None
        order = self._orders()[0]
        batches = np.arange(start, self.num_batches, dtype=np.int64)
        blocks = (batches * self.global_batch_size + self.rank * self.batch_size) % self.plans[0].total
        starts = self._process_state().token_starts(0, order)
        return np.searchsorted(starts, blocks * (self.seq_len + 1), side="right") - 1

    def _window_cuts(self, start: int, homes: np.ndarray) -> list[tuple[int, int, int, int]]:
        """The batches from ``start`` on whose tokens run from one group of ``order.window_groups`` into the
        home window of the next, cut where that window starts (a batch resumed part-way is not cut).

        Args:
            start: the first batch not yet yielded.
            homes: ``_home_windows(start)``.

        Returns:
            ``(group, lo, cut, hi)`` for each such batch (``start + window_groups(homes)[group] - 1``): this
            rank's slice of it is tokens ``[lo, hi)`` of the packed stream, group ``group``'s window
            starts at ``cut``.
        """
        starts = self._process_state().token_starts(0, self._orders()[0])
        block, bounds, cuts = self.seq_len + 1, window_groups(homes), []
        for group in range(1, len(bounds) - 1):
            batch = start + bounds[group] - 1
            first = batch * self.global_batch_size + self.rank * self.batch_size  # this rank's first block
            lo, hi = first * block, (first + self.batch_size) * block
            cut = int(starts[homes[bounds[group]]])
            wrapped = first + self.batch_size > self.plans[0].total  # its blocks run past the epoch's end
            if lo < cut < hi and not wrapped and not (batch == start and self._partial):
                cuts.append((group, lo, cut, hi))
        return cuts

    def _stream_piece(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Tokens ``[lo, hi)`` of the packed stream (one stream) and their document offsets."""
        return self._process_state().stream_tokens(0, self._orders()[0], lo, hi)

    def _serve_windows(self, windows: Iterable[int], first: int) -> None:
        """Decode in the background only ``windows`` (a loader worker's) and what its batches reach; read
        remote shards by range only in window ``first`` (the loader's first batch), else whole."""
        self._served_windows, self._first_window = sorted(set(windows)), first

    def _rank_batches(self, batches: Iterable[int] | None = None):
        """``(global batch, first item to yield, data)`` for each global batch this process serves."""
        served = self._served(batches)
        process = self._process_state()
        orders = self._orders()
        schedule, in_stream = self._schedule()
        start, skip = self._consumed, self._partial
        for batch in served:
            stream, index = (0, batch) if schedule is None else (int(schedule[batch]), int(in_stream[batch]))
            positions = self.plans[stream].positions(index, self.rank, self.batch_size)
            first = skip if batch == start else 0
            if self.seq_len is None:
                data = [self._record(process, stream, orders[stream], int(p)) for p in positions]
            else:
                data = self._blocks(process, stream, orders[stream], positions)
            yield batch, first, data
            process.prefetch()
        self._settle()

    # ------------------------------------------------------------------ internals

    def _streams(self) -> list[list[int]]:
        if not self.by_bucket:
            return [list(range(len(self.shards)))]
        names = {s.bucket for s in self.shards}
        if None in names:
            raise LoaderError(f"{self.root}: by_bucket needs a bucketed split, {self.split!r} is not")
        order = [b for b in self.manifest.buckets or [] if b in names]
        order += sorted(names - set(order), key=bucket_order)
        return [[i for i, s in enumerate(self.shards) if s.bucket == name] for name in order]

    def _stream_total(self, stream: int) -> int:
        shards = self.streams[stream]
        if self.seq_len is None:
            return sum(self.shards[i].samples for i in shards)
        return sum(self._tokens_of(i) for i in shards) // (self.seq_len + 1)

    def _tokens_of(self, shard: int) -> int:
        """Tokens a shard adds to the packed stream (its ids plus one EOS per record)."""
        if shard not in self._shard_tokens:  # untokenized data: tokenize once to count, a window at a time
            reader = self._process_state().reader
            missing = [i for i in range(len(self.shards)) if i not in self._shard_tokens]
            chunks = _chunks(missing, self.shuffle_window)  # each counted whole: remote shards fetched whole
            for column_of in (reader.get(chunk, by_range=False) for chunk in chunks):
                for index, column in column_of.items():  # None: skipped as corrupt, adds nothing
                    self._shard_tokens[index] = 0 if column is None else int(column.offsets[-1]) + len(column)
                    sha256 = self.shards[index].sha256
                    if column is not None and sha256 is not None:  # the records' counts, for TextTokens
                        self._record_tokens[sha256] = np.diff(column.offsets).astype(np.int32)
        return self._shard_tokens[shard]

    def _where(self, info: ShardInfo) -> str:
        return join(self.root, info.path)

    def _read(self, location: str) -> bytes:
        return read_bytes(location, allow_pipe=self.allow_pipe, storage_options=self.storage_options)

    def _fetch(self, info: ShardInfo) -> tuple[bytes, bool]:
        """A shard's bytes (through the node's cache when there is one), and whether they are verified."""
        where = self._where(info)
        if self.cache is None:
            return self._read(where), False
        return self.cache.read(info, where, functools.partial(self._read, where), self.verify)

    def _local(self, info: ShardInfo) -> str | None:
        """The shard's local path, when it is read directly from a local directory (not through a cache)."""
        if self.cache is not None or is_remote(self.root):
            return None
        where = self._where(info)
        return where[len("file://") :] if where.startswith("file://") else where

    def _ranges(self, info: ShardInfo) -> Callable[[list[tuple[int, int]]], list[bytes]] | None:
        """Reads byte ranges of a remote shard that is not in the node's cache yet, several at once (a
        first batch then fetches only the footer and the row groups it decodes), else None."""
        if not is_remote(self.root) or self.root.startswith(PIPE_PREFIX):
            return None
        where = self._where(info)
        if self.cache is not None and self.cache.holds(info, where):
            return None
        return functools.partial(_read_ranges, where, self.storage_options)

    def _token_column(self, shard: ShardColumns, info: ShardInfo) -> TokenColumn:
        """The token ids of a decoded shard: its own, else its text's, tokenized as the records are reached
        when their token counts are known (``TextTokens``), else all at once."""
        if shard.tokens is not None:
            return shard.tokens
        dtype = np.dtype(token_dtype(self.tokenizer.get_vocab_size()))
        counts = self._record_tokens.get(info.sha256)
        if counts is None:
            return tokenize_column(shard.fields["text"], self.tokenizer, dtype)
        counted_by = "the loader" if self.token_counts is None else str(self.token_counts)
        return TextTokens(shard.fields["text"], counts, self.tokenizer, dtype, self._where(info), counted_by)

    def _skipped_error(self, what: str) -> LoaderError:
        """``what`` happened because shards were skipped as corrupt: one line naming them and why."""
        reasons = list(self.skipped.values())
        more = f"; and {len(reasons) - 3} more" if len(reasons) > 3 else ""
        return LoaderError(f"{self.root}: {what}: skipped as corrupt: {'; '.join(reasons[:3])}{more}")

    def _identity(self) -> dict[str, Any]:
        """What a state of this dataset resumes (``state.IDENTITY_KEYS``; ``mixture`` is None here)."""
        return {
            "dataset": _digest(self._order_key()),
            "tokenizer_sha256": self._tokenizer_sha256(),
            "seq_len": self.seq_len,
            "mixture": None,
        }

    def _order_key(self) -> dict[str, Any]:
        """The shards and options that fix the order of the items."""
        return {
            "split": self.split,
            "bucket": self.bucket,
            "shards": [[s.path, s.sha256, s.samples] for s in self.shards],
            "shuffle": self.shuffle,
            "shuffle_window": self.shuffle_window,
            "remainder": self.remainder,
            "by_bucket": self.by_bucket,
        }

    def _v1_fingerprint(self) -> str | None:
        """The ``fingerprint`` an ``ltsgen.loaders/1`` state of this dataset carries; None for a mixture."""
        if self.identity["mixture"] is not None:
            return None
        return _digest({**self._order_key(), "seq_len": self.seq_len})

    def _tokenizer_sha256(self) -> str | None:
        """The sha256 of the tokenizer behind the packed ids: the one that tokenizes the text here (its
        file's bytes, or for a ``Tokenizer`` object the ``tokenizer.json`` ltsgen would write for it), or the
        manifest's for tokenized data; None for records."""
        if self.seq_len is None:
            return None
        if self.tokenized:
            return (self.manifest.tokenizer or {}).get("sha256")
        tokenizer = self.tokenizer
        if self._tokenizer_digest is None:
            self._tokenizer_digest = hashlib.sha256(tokenizer.to_str(pretty=True).encode("utf-8")).hexdigest()
        return self._tokenizer_digest

    def _read_formats(self) -> set[str]:
        """The formats of the shards this dataset reads."""
        return {self.read_format}

    def _settle(self) -> None:
        """Wait for this process's reads in the background to end, at the end of its part of an epoch: a
        DataLoader worker exits then, and the shards it was fetching whole belong in the node's cache."""
        if self._process is not None and self._process.pid == os.getpid():
            self._process.reader.settle()

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
        return self._pack(
            [process.stream_tokens(stream, order, int(r[0]) * block, (int(r[-1]) + 1) * block) for r in runs]
        )

    def _pack(self, pieces: list[tuple[np.ndarray, np.ndarray | None]]) -> dict:
        """Blocks of ``seq_len + 1`` tokens from consecutive pieces ``(ids, offsets)`` of the packed stream."""
        block = self.seq_len + 1
        data = {"input_ids": np.concatenate([p[0] for p in pieces]).reshape(-1, block)}
        if self.position_ids:
            data["position_ids"] = block_positions(np.concatenate([p[1] for p in pieces]), block)
        return data


def _digest(key: dict[str, Any]) -> str:
    """16 hex digits of the sha256 of ``key`` as sorted JSON."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


class StreamingMixture(StreamingDataset):
    """``StreamingDataset`` of a mapping ``{path_or_url: proportion}``: the sources mixed item by item.

    Takes every option of ``StreamingDataset`` (the source options apply to each source; ``cache_dir`` to
    the remote ones) except ``by_bucket``. A state's ``identity["mixture"]`` names the sources and their
    weights, and a state of another mixture (or of one dataset) is refused (``state.check_state``). See
    ``mixture``'s docstring for the schedule and the sources' epochs.
    """

    def __init__(
        self,
        path_or_url: Mapping[str | os.PathLike, float],
        split: str = TRAIN_SPLIT,
        *,
        seed: int = 0,
        epoch: int = 0,
        rank: int | None = None,
        world_size: int | None = None,
        batch_size: int | None = None,
        remainder: str = "drop",
        by_bucket: bool = False,
        **options: Any,
    ) -> None:
        if by_bucket:
            raise UsageError("by_bucket draws each batch from one length bucket; it does not mix datasets")
        if batch_size is not None:
            _check_positive("batch_size", batch_size)
        if not path_or_url:
            raise UsageError("a mixture needs at least one dataset")
        for name, value in (("seed", seed), ("epoch", epoch)):
            _check_integer(name, value, 63)
        roots = [str(source) for source in path_or_url]
        weights = resolve_weights(list(path_or_url.values()))
        sources = [  # the node cache keeps remote sources' shards; local ones are read in place
            StreamingDataset(root, split, seed=source_seed(seed, index), rank=0, world_size=1, batch_size=1,
                             remainder=remainder, **options)
            for index, root in enumerate(roots)
        ]  # fmt: skip
        self.mixture = Mixture(sources, roots, weights)
        self.sources, first = sources, sources[0]
        self.root = mixture_text(self.mixture.mixture)
        self.split, self.bucket, self.shuffle = split, first.bucket, first.shuffle
        self.seed, self.epoch, self.shuffle_window = int(seed), int(epoch), first.shuffle_window
        self._place(rank, world_size, batch_size, remainder)
        self.columns, self.transform = first.columns, None
        self.seq_len, self.position_ids, self.eos_id = first.seq_len, first.position_ids, first.eos_id
        self.by_bucket, self.verify, self.on_error = False, first.verify, first.on_error
        self.epoch_items = self.mixture.epoch_items
        self.plans = [BatchPlan(self.epoch_items, self.global_batch_size, remainder)]
        if self.num_batches == 0:
            raise LoaderError(
                f"{self.root}: {self.epoch_items} items in all, too few for one global batch of "
                f"{self.global_batch_size}"
            )
        self.identity = self.mixture.identity(self.seq_len)
        if epoch > self._last_epoch():
            raise UsageError(
                f"epoch {epoch} is beyond the last this mixture can number ({self._last_epoch()})"
            )

    def _last_epoch(self) -> int:
        # the items of every epoch are numbered on one int64 axis: epoch * num_batches * global batch + offset
        return (2**63 - 1) // (self.num_batches * self.global_batch_size) - 1

    def _state_identity(self, state: Any) -> dict[str, Any]:
        saved = state.get("identity") if isinstance(state, dict) else None
        return self.mixture.state_identity(
            self.seq_len, saved.get("mixture") if isinstance(saved, dict) else None
        )

    @property
    def skipped(self) -> dict[str, str]:
        """Shards skipped as corrupt in this process, in every source: path -> reason."""
        return self.mixture.skipped

    @property
    def tokenizer(self):
        """The first source's tokenizer (packing checked that the sources share it)."""
        return self.sources[0].tokenizer

    def _read_formats(self) -> set[str]:
        return set().union(*(source._read_formats() for source in self.sources))

    def _home_windows(self, start: int) -> None:
        """None: a mixture's batches draw from every source's windows."""
        return None

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Mixture.locate``: the source, source epoch and position each global position reads."""
        return self.mixture.locate(positions)

    def _rank_batches(self, batches: Iterable[int] | None = None):
        """``(global batch, first item to yield, data)`` for each global batch this process serves."""
        served = self._served(batches)
        start, skip = self._consumed, self._partial
        for batch in served:
            first = (
                self.epoch * self.num_batches + batch
            ) * self.global_batch_size + self.rank * self.batch_size
            yield (
                batch,
                (skip if batch == start else 0),
                self.mixture.items(self.seed, first, self.batch_size, self.seq_len),
            )
            self.mixture.prefetch()
        self._settle()

    def _settle(self) -> None:
        """Each source's ``_settle``."""
        for source in self.sources:
            source._settle()


class _ProcessState:
    """What one process (main or DataLoader worker) keeps: the epoch's orders, decoded windows, its reader."""

    def __init__(self, dataset: StreamingDataset) -> None:
        self.dataset = dataset
        self.pid = os.getpid()
        self.epoch_key: tuple[int, int] | None = None
        self.orders: list[EpochOrder] = []
        self.windows: OrderedDict[tuple[int, int], Any] = OrderedDict()
        self.starts: dict[int, np.ndarray] = {}
        self.windows_kept = min(2, len(dataset.streams))  # one per stream; two buckets alternate
        self.pending: list[int] = []  # shards to decode whole once the current window's first batch is out
        packed = dataset.seq_len is not None
        self.reader = ShardReader(
            dataset._fetch,
            dataset._where,
            dataset._local,
            dataset._ranges,
            dataset.read_format,
            dataset.read_shards,
            columns=(["input_ids"] if dataset.tokenized else ["text"]) if packed else dataset.columns,
            convert=dataset._token_column if packed else _identity,
            verify=dataset.verify,
            on_error=dataset.on_error,
            keep=2 * dataset.shuffle_window,
            threads=decoding_threads(dataset.shuffle_window, _processes(), is_remote(dataset.root)),
            lazy=packed,
            max_text_chars=dataset.max_doc_chars if packed and not dataset.tokenized else None,
        )

    def _cached(self, key: tuple[int, int], build: Callable[[], Any]) -> Any:
        if key not in self.windows:
            self.windows[key] = build()
            while len(self.windows) > self.windows_kept:
                self.windows.popitem(last=False)
        return self.windows[key]

    def _window_shards(self, stream: int, order: EpochOrder, window: int) -> dict[int, Any]:
        """The decoded shards of a window by their index in the stream (token ids decoded as reached)."""
        local = order.window_shards(window).tolist()
        members = self.dataset.streams[stream]
        served = self.dataset._served_windows
        ranged = served is None or window == self.dataset._first_window
        decoded = self.reader.get((members[s] for s in local), by_range=ranged)
        self.pending = [members[s] for s in local] if served is None or window in served else []
        later = [w for w in (served or [window + 1]) if w > window]
        if later and later[0] < order.num_windows:
            self.pending += [members[s] for s in order.window_shards(later[0]).tolist()]
        return {s: decoded[members[s]] for s in local}

    def _donor(self, stream: int, order: EpochOrder, window: int) -> tuple[int, dict[int, Any]]:
        """The nearest later window (cyclically) with a shard not skipped as corrupt, and its decoded shards
        by their index in the stream: what fills a window whose every shard was skipped (the same window in
        every process, rank and worker, as the corruption is the data's)."""
        members = self.dataset.streams[stream]
        for step in range(1, order.num_windows):
            donor = (window + step) % order.num_windows
            local = order.window_shards(donor).tolist()
            decoded = self.reader.get(members[s] for s in local)
            if any(decoded[members[s]] is not None for s in local):
                return donor, {s: decoded[members[s]] for s in local}
        where = "the split" if len(self.dataset.streams) == 1 else "a bucket (by_bucket)"
        raise self.dataset._skipped_error(f"every shard of {where} is corrupt")

    def prefetch(self) -> None:
        """Decode the rest of the last window built and the next one in the background (called once the
        window's first batch is out)."""
        if self.pending:
            self.reader.prefetch(self.pending)
            self.pending = []

    def window_records(self, stream: int, order: EpochOrder, window: int):
        """Decoded shards and rows of each item of a window, in epoch order (skipped shards refilled)."""

        def build():
            local, rows = order.window_items(window)
            decoded = self._window_shards(stream, order, window)
            ok = np.asarray([decoded[s] is not None for s in local.tolist()], dtype=bool)
            if not ok.any():  # filled from the nearest later window that has a shard left
                count = len(local)
                donor, decoded = self._donor(stream, order, window)
                local, rows = order.window_items(donor)
                ok = np.asarray([decoded[s] is not None for s in local.tolist()], dtype=bool)
                local, rows = np.resize(local[ok], count), np.resize(rows[ok], count)
            elif not ok.all():
                local, rows = np.resize(local[ok], len(local)), np.resize(rows[ok], len(rows))
            return [decoded[s] for s in local.tolist()], rows

        return self._cached((stream, window), build)

    def window_tokens(self, stream: int, order: EpochOrder, window: int) -> PackedWindow:
        """The packed token stream of a window (corrupt shards skipped, the rest repeated to fill it)."""

        def build():
            ds = self.dataset
            shards = order.window_shards(window)
            nominal = sum(ds._tokens_of(ds.streams[stream][s]) for s in shards.tolist())
            columns = self._window_shards(stream, order, window)
            valid = [s for s in shards.tolist() if columns[s] is not None]
            filled_from = window
            if not valid:  # packed from the nearest later window that has a shard left
                filled_from, columns = self._donor(stream, order, window)
                valid = [s for s, column in columns.items() if column is not None]
            local, rows = order.window_items(filled_from)
            keep = np.isin(local, valid)
            column_of = np.searchsorted(np.sort(valid), local[keep])  # index into the sorted valid shards
            packed = PackedWindow(
                [columns[s] for s in sorted(valid)],
                column_of,
                rows[keep],
                ds.eos_id,
                nominal,
                background=self.reader.background,
            )
            if filled_from == window and len(valid) == len(shards) and packed.total != nominal:
                counted = "" if ds.token_counts is None else f" (by the manifest, or in {ds.token_counts})"
                raise LoaderError(
                    f"{ds.root}: a window packs to {packed.total} tokens, its shards count {nominal}{counted}"
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
            if lo < hi:  # an empty window (its shards skipped as corrupt when counted) adds nothing
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


def _read_ranges(url: str, storage_options: dict[str, Any], spans: list[tuple[int, int]]) -> list[bytes]:
    return read_ranges(url, spans, storage_options=storage_options)


def _identity(item, info: ShardInfo):
    return item


def _processes() -> int:
    """The processes that share this machine's CPUs for this dataset: its DataLoader's workers, else 1."""
    info = get_worker_info()
    return 1 if info is None else info.num_workers


def _chunks(items: list, size: int) -> list[list]:
    return [items[start : start + size] for start in range(0, len(items), size)]


def _distributed(rank: int | None, world_size: int | None) -> tuple[int, int]:
    initialised = torch.distributed.is_available() and torch.distributed.is_initialized()
    if rank is None:
        rank = torch.distributed.get_rank() if initialised else 0
    if world_size is None:
        world_size = torch.distributed.get_world_size() if initialised else 1
    _check_positive("world_size", world_size)
    _check_integer("rank", rank, 63)
    if not 0 <= rank < world_size:
        raise UsageError(f"rank {rank} is outside world size {world_size}")
    return int(rank), int(world_size)


def _check_options(
    batch_size: int | None,
    remainder: str,
    shuffle_window: int,
    seq_len: int | None,
    transform: Callable | None,
    by_bucket: bool,
    on_error: str,
) -> None:
    """A one-line ``UsageError`` for options out of range or that do not combine."""
    if remainder not in REMAINDERS:
        raise UsageError(f"remainder must be one of {REMAINDERS}, not {remainder!r}")
    if on_error not in ON_ERROR:
        raise UsageError(f"on_error must be one of {ON_ERROR}, not {on_error!r}")
    _check_positive("shuffle_window", shuffle_window)
    for name, value in (("batch_size", batch_size), ("seq_len", seq_len)):
        if value is not None:
            _check_positive(name, value)
    if seq_len is not None and transform is not None:
        raise UsageError(
            "transform applies to records; with seq_len, transform the blocks in the training loop"
        )
    if by_bucket and seq_len is not None:
        raise UsageError("by_bucket batches whole documents by length; it does not combine with seq_len")


def _check_positive(name: str, value: Any) -> None:
    """A one-line ``UsageError`` unless ``value`` is an integer (numpy's too; a bool is none) of at least 1."""
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 1):
        raise UsageError(f"{name} must be a positive integer, not {value!r}")


def _check_integer(name: str, value: Any, bits: int) -> None:
    """A one-line ``UsageError`` unless ``value`` is an integer (numpy's too; a bool is none) from 0 to
    ``2**bits - 1``."""
    if not (isinstance(value, numbers.Integral) and not isinstance(value, bool) and 0 <= value < 2**bits):
        raise UsageError(f"{name} must be an integer from 0 to 2**{bits} - 1, not {value!r}")


TOKENIZER_METHODS = ("encode_batch", "token_to_id", "get_vocab_size", "to_str")  # of a tokenizers.Tokenizer


def _as_tokenizer(tokenizer: Any) -> Any:
    """``tokenizer=`` as the loaders use it: None, a path (read when first needed), a ``tokenizers.Tokenizer``
    (or an object with its methods), or a transformers fast tokenizer's ``backend_tokenizer``."""
    if tokenizer is None or isinstance(tokenizer, str | os.PathLike):
        return tokenizer
    tokenizer = getattr(tokenizer, "backend_tokenizer", None) or tokenizer
    missing = [name for name in TOKENIZER_METHODS if not callable(getattr(tokenizer, name, None))]
    if missing:
        raise UsageError(
            "tokenizer must be a tokenizers.Tokenizer, a transformers fast tokenizer or the path of a "
            f"tokenizer.json, not a {type(tokenizer).__name__} (it has no {missing[0]}())"
        )
    return without_truncation(tokenizer)


def _eos_id(tokenizer, where: str) -> int:
    for token in ("<|endoftext|>", "</s>", "<eos>", "[SEP]"):
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise LoaderError(f"{where}: the tokenizer has no end-of-text token; pass eos_id")
