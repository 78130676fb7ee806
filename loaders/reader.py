"""The shards of a dataset as one process reads them: fetched, verified and decoded in a few threads.

A window of the epoch order needs several shards before its first item (its items are permuted
together), so the shards of a window are opened at once, one thread each (reading, hashing and parquet
decoding release the GIL). A shard that a window needs now (``get``) has the packed token ids of
verified parquet shards decoded lazily, a row group at a time as the blocks reach them
(``formats.RowGroupTokens``), and so is their text when it is tokenized on the fly
(``formats.RowGroupTexts``): the first batch of a window, or of a resume in its middle, decodes only the
row groups its few documents live in. A parquet shard whose footer lists its row groups' sha256
(``footer_sha256`` in the manifest) is checked by its footer and row groups (``indexed.IndexedParquet``):
a window's first batches read and check only the footers and the row groups they decode. Other shards are
hashed whole first. No id is readable before the bytes it comes from passed their check.
Once that batch is out, the rest of the window is completed and the next window decoded whole in the
background while the current one is consumed. The most recent decoded shards are kept; the threads are
daemons, so a process never waits at exit for a prefetch it no longer needs: at exit the queued calls are
cancelled and only those already running are let finish (at most ``EXIT_WAIT_S``), so that no thread is
inside pyarrow's native code while the interpreter and pyarrow's thread pools are torn down (that aborts
the process with "terminate called without an active exception"). At the end of its part of an epoch a
process waits for every call (``settle``): the shards it was fetching whole belong in the node's cache.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import Any

from .contract import ShardInfo
from .errors import LoaderError
from .formats import RowGroupTexts, ShardColumns, decode_shard
from .indexed import IndexedParquet, ShardBytes
from .storage import StorageError


class ShardReader:
    """Decoded shards of one split, by index into ``shards``, for one process.

    Args:
        fetch: ``fetch(info) -> (bytes, verified)``: the shard's bytes, and whether its sha256 was
            already checked (by a cache at download); ``where(info)`` names it in errors; ``local(info)``
            is its path when it is a local file read directly (a range at a time), else None;
            ``ranges(info)`` reads byte ranges of a remote shard not yet in the node's cache, else None
            (a first batch then reads the footer and its row groups by range, and the shard is fetched
            whole, through the cache, once the window's first batch is out).
        fmt: the shards' format (``contract.FORMATS``).
        shards: the split's shards as read, in manifest order.
        columns: fields to decode (None: all).
        convert: what to keep of a decoded shard, given it and its manifest entry (its token column, or the
            whole ``ShardColumns``).
        verify: check each shard's sha256 against the manifest each time it is read (where
            the manifest has a footer_sha256: the footer's, and each row group's against the footer).
        on_error: ``"raise"`` on a corrupt shard, or ``"skip"`` it (its result is None).
        keep: decoded shards kept in memory (the most recently used).
        threads: decoding threads.
        lazy: decode the token ids (or the text to tokenize) of verified parquet shards that ``get`` asks for
            a row group at a time as they are needed (``convert`` then gets a ``RowGroupTokens`` column, or
            ``RowGroupTexts``, completed by ``prefetch``).
        max_text_chars: for text that ``convert`` tokenizes (None: it does not), refuse a shard whose
            texts are missing or not strings, or longer than this (0: no limit; tokenizing takes about 130
            bytes of memory per character), before ``convert``.
    """

    def __init__(
        self,
        fetch: Callable[[ShardInfo], tuple[bytes, bool]],
        where: Callable[[ShardInfo], str],
        local: Callable[[ShardInfo], str | None],
        ranges: Callable[[ShardInfo], Callable[[int, int], bytes] | None],
        fmt: str,
        shards: list[ShardInfo],
        *,
        columns: Iterable[str] | None,
        convert: Callable[[ShardColumns, ShardInfo], Any],
        verify: bool,
        on_error: str,
        keep: int,
        threads: int,
        lazy: bool = False,
        max_text_chars: int | None = None,
    ) -> None:
        self._fetch, self._where, self._local, self._ranges = fetch, where, local, ranges
        self._by_range: dict[int, ShardBytes] = {}  # remote shards opened by range, to be fetched whole
        self.format, self.shards = fmt, shards
        self.columns = None if columns is None else list(columns)
        self.convert, self.verify, self.on_error = convert, verify, on_error
        self.keep, self.lazy, self.max_text_chars = keep, lazy, max_text_chars
        self.skipped: dict[str, str] = {}
        self._warned: set[str] = set()
        self._decoded: OrderedDict[int, Future] = OrderedDict()
        self._pool = _DaemonPool(threads)

    def get(self, indices: Iterable[int], by_range: bool = True) -> dict[int, Any]:
        """The decoded shards ``indices`` (None for one skipped as corrupt), decoded in parallel.

        Args:
            indices: shard indices into ``shards``.
            by_range: a remote shard decoded lazily is read by range (a first batch), else fetched whole.

        Returns:
            index -> what ``convert`` keeps of the shard, or None when it was skipped.
        """
        futures = {index: self._submit(index, self.lazy, by_range=by_range) for index in indices}
        results = {index: future.result() for index, future in futures.items()}
        for index, result in results.items():
            where = self._where(self.shards[index])
            if result is None and where not in self._warned:
                self._warned.add(where)
                warnings.warn(f"skipping corrupt shard ({self.skipped[where]})", stacklevel=3)
        return results

    def prefetch(self, indices: Iterable[int]) -> None:
        """Decode shards whole in the background (``get`` then waits only for what is left), including
        the row groups that shards ``get`` decoded lazily have not reached yet.

        Args:
            indices: shard indices into ``shards``.
        """
        for index in indices:
            future = self._submit(index, lazy=False)
            if self.lazy:
                self._pool.submit(self._complete, index, future)

    def background(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on one of the reader's threads (after the reads already queued there).

        Args:
            fn, args: the call; its result and errors are dropped (it decodes ahead of a later load).
        """
        self._pool.submit(fn, *args)

    def settle(self) -> None:
        """Wait until the background reads and decodes have ended, those they queued included (an epoch's
        last downloads into the node's cache, before a DataLoader worker exits)."""
        self._pool.settle()

    def _submit(self, index: int, lazy: bool, by_range: bool = False) -> Future:
        future = self._decoded.get(index)
        if future is not None and future.done() and not future.cancelled() and future.exception() is not None:
            future = None  # a read that failed (a server that went away) is tried again, not replayed
            self._by_range.pop(index, None)  # and its ranged source with it: a whole fetch starts afresh
        if future is None:
            future = self._decoded[index] = self._pool.submit(self._decode, index, lazy, by_range)
            while len(self._decoded) > self.keep:
                self._decoded.popitem(last=False)
        else:
            self._decoded.move_to_end(index)
        return future

    def _decode(self, index: int, lazy: bool, by_range: bool) -> Any:
        info = self.shards[index]
        where = self._where(info)
        try:
            # every read is checked: a shard replaced since an earlier read is caught
            if self.verify and self.format == "parquet" and info.footer_sha256:
                shard = self._by_row_group(index, where, lazy, by_range)
            else:
                data, verified = self._fetch(info)
                if self.verify and not verified:
                    self._check(index, data, where)
                # only checked bytes are decoded lazily: a row group may then fail only when it is reached
                lazy = lazy and (verified or self.verify)
                shard = self._decode_bytes(data, where, lazy)
                del data
            check_counts(shard, info, where)
            if self.max_text_chars is not None:
                check_texts(shard, self.max_text_chars, where)
            return self.convert(shard, info)
        except StorageError:  # a store that failed the read, a cache that cannot be written: no bad shard
            raise
        except LoaderError as error:
            if self.on_error == "raise":
                raise
            self.skipped[where] = str(error)
            return None

    def _by_row_group(self, index: int, where: str, lazy: bool, by_range: bool) -> ShardColumns:
        """A parquet shard checked by its footer and its row groups (``IndexedParquet``): when its packed
        ids, or the text tokenized into them, are decoded lazily (a window's first batches) only the row
        groups decoded are read and checked, otherwise every row group is checked first (also with
        ``on_error="skip"``: which shards are skipped changes a window's layout). A remote shard is read by
        range only for a window's first batches (``by_range``), and fetched whole ahead of later windows,
        into the node's cache."""
        info = self.shards[index]
        ranged = lazy and self.on_error == "raise" and self.columns in (["input_ids"], ["text"])
        path = self._local(info) if ranged else None
        ranges = self._ranges(info) if ranged and by_range and path is None else None
        if path is not None:
            source = ShardBytes(where, path=path)
        elif ranges is not None:
            source = self._by_range[index] = ShardBytes(where, ranges=ranges, size=info.bytes)
        else:
            data, verified = self._fetch(info)
            if verified:  # checked whole at download
                return self._decode_bytes(data, where, lazy)
            source = ShardBytes(where, data=data)
        if source.size != info.bytes:
            raise LoaderError(f"{where}: holds {source.size} bytes, the manifest says {info.bytes}")
        indexed = IndexedParquet(source, info.footer_sha256)
        if ranged and self.columns == ["text"]:
            return ShardColumns(indexed.num_rows, fields={"text": indexed.texts()})
        if ranged:
            return ShardColumns(indexed.num_rows, tokens=indexed.tokens())
        indexed.check_row_groups()
        return self._decode_bytes(data, where, lazy)

    def _decode_bytes(self, data: bytes, where: str, lazy: bool) -> ShardColumns:
        """Decode checked bytes; ``lazy``: parquet token ids, and text when a corrupt row group is to raise
        (not to skip the shard, which must be known before its window is laid out), as they are reached."""
        lazy_text = lazy and self.on_error == "raise"
        return decode_shard(data, self.format, where, self.columns, lazy_tokens=lazy, lazy_text=lazy_text)

    def _check(self, index: int, data: bytes, where: str) -> None:
        """Refuse bytes whose sha256 is not the manifest's."""
        self.shards[index].check_bytes(data, where)

    def _complete(self, index: int, decoded: Future) -> None:
        """Decode the row groups a lazily decoded shard has not reached (an error surfaces when one is
        loaded)."""
        column = decoded.result()
        source = self._by_range.pop(index, None)
        if column is not None and source is not None:  # fetched whole now (into the cache, if any)
            data, verified = self._fetch(self.shards[index])
            if not verified:
                self._check(index, data, self._where(self.shards[index]))
            source.fill(data)
        if column is not None:
            column.decode()


def check_counts(shard: ShardColumns, info: ShardInfo, where: str) -> None:
    """Refuse a decoded shard whose record or token count differs from its manifest entry.

    Args:
        shard: the decoded shard.
        info: its manifest entry.
        where: its path or URL, for the message.
    """
    if shard.num_rows != info.samples:
        raise LoaderError(f"{where}: holds {shard.num_rows} records, the manifest says {info.samples}")
    if shard.tokens is not None and info.tokens is not None and shard.tokens.offsets[-1] != info.tokens:
        raise LoaderError(
            f"{where}: holds {int(shard.tokens.offsets[-1])} tokens, the manifest says {info.tokens}"
        )


def check_texts(
    shard: ShardColumns,
    limit: int,
    where: str,
    option: str = "max_doc_chars",
    remedy: str = "or store token ids",
) -> None:
    """Refuse a decoded shard whose text cannot be tokenized: no ``text`` column, a record without a text
    or with one that is not a string, or (``limit`` > 0) a text longer than ``limit`` characters. Texts
    decoded a row group at a time (``RowGroupTexts``) are checked as each row group is decoded.

    Args:
        shard: the decoded shard.
        limit: the most characters a text may have (0: no limit).
        where: its path or URL, for the message.
        option: the option that sets ``limit``, and ``remedy`` beside raising it, for the message.
    """

    def check(texts: Iterable[str | None], first_row: int) -> None:
        for row, text in enumerate(texts, first_row):
            if not isinstance(text, str):
                raise LoaderError(
                    f"{where}: record {row} has no text to tokenize"
                    if text is None
                    else f"{where}: record {row}'s text is {type(text).__name__}, not a string"
                )
            if limit and len(text) > limit:
                raise LoaderError(
                    f"{where}: record {row} has {len(text):,} characters, over {option}={limit:,} (tokenizing "
                    f"it takes about {len(text) * 130 / 1e9:.1f} GB; raise {option}, 0 for no limit"
                    f"{', ' + remedy if remedy else ''})"
                )

    texts = shard.fields.get("text")
    if texts is None:
        raise LoaderError(f"{where}: no text to tokenize (the shard has no text field)")
    if isinstance(texts, RowGroupTexts):
        texts.on_decode = check
    else:
        check(texts, 0)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def decoding_threads(window: int, workers: int, remote: bool) -> int:
    """Threads that fetch and decode shards in one process.

    Args:
        window: shards per shuffle window (fetched and decoded together).
        workers: DataLoader worker processes sharing this machine's CPUs (1 for the main process alone).
        remote: whether shards come over the network, where a thread mostly waits for its download.

    Returns:
        One thread per shard of a window; for local shards within this process's share of the CPUs.
    """
    if remote:
        return window
    return max(1, min(window, usable_cpus() // max(1, workers)))


EXIT_WAIT_S = 10.0  # at exit, how long the calls already running are waited for


class _DaemonPool:
    """A fixed set of daemon threads running submitted calls in order (started on first use; calls are
    submitted from the threads too, so that a shard's check queues behind the reads of its window)."""

    def __init__(self, threads: int) -> None:
        self.size = threads
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.started = 0
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._unfinished = 0  # calls submitted and not yet ended (run, cancelled or dropped)
        self._closed = False
        _POOLS.add(self)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        future: Future = Future()
        with self._lock:
            self._unfinished += 1
            start = self.started < self.size
            self.started += start
        self.jobs.put((future, fn, args))
        if start:
            threading.Thread(target=self._run, name="ltsgen-shards", daemon=True).start()
        return future

    def close(self, timeout: float) -> None:
        """Cancel the queued calls, start no other, and wait up to ``timeout`` seconds for the running ones."""
        with self._lock:
            self._closed = True
        while True:
            try:
                self.jobs.get_nowait()[0].cancel()
            except queue.Empty:
                break
            self._ended()
        with self._idle:  # the calls running, and those they queue meanwhile, which no thread starts now
            self._idle.wait_for(lambda: self._unfinished == 0, timeout)

    def settle(self) -> None:
        """Wait until every call submitted has ended (calls submitted by calls too: each is counted before
        the call that submits it ends)."""
        with self._idle:
            self._idle.wait_for(lambda: self._unfinished == 0)

    def _run(self) -> None:
        while True:
            future, fn, args = self.jobs.get()
            with self._lock:  # closing and starting a call exclude each other: close() waits for every start
                start = not self._closed and future.set_running_or_notify_cancel()
            if not start:
                future.cancel()  # closed (a no-op when its caller cancelled it)
                self._ended()
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as error:  # handed to the caller of result()
                future.set_exception(error)
            finally:
                self._ended()

    def _ended(self) -> None:
        with self._idle:
            self._unfinished -= 1
            self._idle.notify_all()


_POOLS: weakref.WeakSet[_DaemonPool] = weakref.WeakSet()  # this process's pools
os.register_at_fork(after_in_child=_POOLS.clear)  # a forked child has none of its parent's threads


@atexit.register
def _close_pools() -> None:
    """At exit: no shard call left running (see the module's docstring)."""
    for pool in list(_POOLS):
        pool.close(EXIT_WAIT_S)
