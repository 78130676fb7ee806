"""A node-local cache of remote shards, shared by every rank and DataLoader worker on the machine.

``ShardCache(directory, limit)`` keeps one file per shard, named by its sha256 (so a rebuilt dataset never
meets a stale copy, and two datasets sharing a shard share its file). Reading a shard:

- a hit is one local read, checked against the manifest's size and (unless ``verify=False``) sha256:
  a copy changed in place, even at the same size, is removed and downloaded again, never served. Its
  modification time is set to now, which is what "least recently used" means here (skipped on a
  read-only cache, whose hits are still served);
- a miss downloads the shard once per node: the downloading process holds a POSIX record lock on
  ``<name>.part`` (the partial download itself), and every other process or thread that wants the same
  shard waits on that lock and then reads the finished file. The download is checked against the
  manifest's sha256 once, written into the ``.part`` file and renamed to its final name atomically;
- after a download, the least recently used of its files beyond ``limit`` bytes are removed (never the one
  just written, so a limit below one shard still works, one shard at a time).

Nothing outlives a process but finished shards: the kernel drops a dead process's locks, a ``.part`` left
by a kill -9 is taken over by the next download of that shard (or removed by the next process that opens
the cache and finds it unlocked), and no shared memory or lock file is used. A cache folder that cannot
be created or written (read-only, full) is a one-line ``StorageError`` naming it. Record locks are per process
(not inherited by DataLoader workers across fork); threads of one process share a lock per shard name.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

from .contract import ShardInfo
from .errors import LoaderError
from .storage import StorageError

PART_SUFFIX = ".part"
# the names the cache writes (``ShardCache.name``: a sha256, or url- and one, and an extension; and a
# download's ``.part``): nothing else in its folder is counted, evicted or removed, so a folder shared with
# other files loses none of them (a bare sha256, as Hugging Face names its blobs, is not the cache's)
OWN_NAME = re.compile(r"(url-)?[0-9a-f]{64}\.[^/]*")
NO_SUFFIX = ".shard"  # the extension of a shard whose path has none
_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}
_UNITS.update({"kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40})


def parse_size(limit: int | str | None) -> int | None:
    """Bytes from ``limit``: an int, or a string such as ``"500MB"``, ``"2GiB"`` (None: no limit).

    Args:
        limit: the size.

    Returns:
        The size in bytes, or None.
    """
    if limit is None or (isinstance(limit, int) and not isinstance(limit, bool)):
        if limit is not None and limit < 0:
            raise LoaderError(f"cache_limit must not be negative, not {limit}")
        return limit
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", str(limit))
    if match is None or match.group(2).lower() not in _UNITS:
        raise LoaderError(f"cache_limit {limit!r} is not a size such as 500MB or 2GiB")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


class ShardCache:
    """Shards kept in ``directory`` for every process of this machine, at most ``limit`` bytes of them.

    Args:
        directory: a local folder (created if missing); give every rank and worker of a node the same one.
        limit: bytes (or a size string, see ``parse_size``) beyond which least recently used shards go;
            None keeps everything.
    """

    def __init__(self, directory: str | os.PathLike, limit: int | str | None = None) -> None:
        self.directory = Path(directory).absolute()
        self.limit = parse_size(limit)

    def name(self, info: ShardInfo, url: str) -> str:
        """The cache file name of a shard.

        Args:
            info: its manifest entry.
            url: where it comes from.

        Returns:
            Its sha256 (without one, ``url-`` and a hash of its URL and size) and its extension (``NO_SUFFIX``
            for a path without one).
        """
        suffix = "".join(Path(info.path).suffixes) or NO_SUFFIX
        if info.sha256:
            return info.sha256 + suffix
        return "url-" + hashlib.sha256(f"{url}\n{info.bytes}".encode()).hexdigest() + suffix

    def holds(self, info: ShardInfo, url: str) -> bool:
        """Whether the shard is in the cache now (whole: a download is renamed into place when complete).

        Args:
            info, url: as for ``read``; a folder that cannot be created is a ``StorageError``, as there.
        """
        self._open()
        try:
            return (self.directory / self.name(info, url)).stat().st_size == info.bytes
        except OSError:  # absent, or unreadable: read by range, then as ``read`` decides
            return False

    def read(
        self, info: ShardInfo, url: str, download: Callable[[], bytes], verify: bool = True
    ) -> tuple[bytes, bool]:
        """The bytes of the shard at ``url``, from the cache or downloaded into it (once per node).

        Args:
            info: the shard's manifest entry (size, sha256).
            url: where it comes from (for messages and, without a sha256, the cache name).
            download: fetches the shard's bytes from ``url``.
            verify: check a cached copy against the sha256 on every hit (a changed copy is downloaded
                again); False trusts the cache folder as it trusts the dataset.

        Returns:
            ``(bytes, verified)``: ``verified`` is True when the bytes were checked against the sha256
            (at download, or at this hit).
        """
        self._open()
        name = self.name(info, url)
        final = self.directory / name
        with self._thread_lock(name):
            data = self._hit(final, info, verify)
            if data is None:
                data = self._fetch(final, info, url, download, verify)
                self._evict(keep=final)
            return data, info.sha256 is not None and verify

    # ---------------------------------------------------------------- internals

    def _open(self) -> None:
        """Once per process: create the folder, and remove partial downloads no process is writing."""
        with _STATE.guard:
            if self.directory in _STATE.opened:
                return
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise _cache_error(self.directory, "cannot be created", error) from None
            for part in self.directory.glob("*" + PART_SUFFIX):
                if not OWN_NAME.fullmatch(part.name):
                    continue
                try:
                    fd = _open_part(part)
                except OSError:  # a read-only cache: nothing of it can be removed
                    continue
                try:
                    if _lock(fd, wait=False) and _same_file(fd, part):
                        part.unlink(missing_ok=True)
                finally:
                    os.close(fd)
            _STATE.opened.add(self.directory)

    def _thread_lock(self, name: str) -> threading.Lock:
        with _STATE.guard:
            return _STATE.locks.setdefault((self.directory, name), threading.Lock())

    def _hit(self, final: Path, info: ShardInfo, verify: bool) -> bytes | None:
        try:
            data = final.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as error:
            raise _cache_error(final, "cannot be read", error) from None
        if len(data) != info.bytes:  # a file cut short (a machine crash before it reached the disk)
            return None
        if verify and info.sha256 is not None and hashlib.sha256(data).hexdigest() != info.sha256:
            _remove(final)  # changed in place: downloaded again (its name is the sha256 it must have)
            return None
        try:
            os.utime(final)
        except OSError:  # evicted by another process just now, or a read-only cache: the bytes are good
            pass
        return data

    def _fetch(
        self, final: Path, info: ShardInfo, url: str, download: Callable[[], bytes], verify: bool
    ) -> bytes:
        part = final.with_name(final.name + PART_SUFFIX)
        while True:
            try:
                fd = _open_part(part)
            except OSError as error:
                raise _cache_error(part, "cannot be written", error) from None
            try:
                _lock(fd, wait=True)  # another process downloading this shard: wait for it
                if not _same_file(fd, part):
                    continue  # it finished (renamed) or gave up (removed) while we waited
                data = self._hit(final, info, verify)
                if data is not None:  # finished by another process: our .part is an empty leftover
                    part.unlink(missing_ok=True)
                    return data
                try:
                    data = download()
                    if info.sha256 is not None:
                        digest = hashlib.sha256(data).hexdigest()
                        if digest != info.sha256:
                            raise LoaderError(
                                f"{url}: sha256 {digest[:16]}... does not match the manifest's "
                                f"{info.sha256[:16]}... (corrupt or changed shard)"
                            )
                    try:
                        os.ftruncate(fd, 0)
                        _write_all(fd, data)
                    except OSError as error:
                        raise _cache_error(part, "cannot be written", error) from None
                    try:
                        os.rename(part, final)  # while holding the lock: waiters then find the final file
                    except OSError as error:
                        raise _cache_error(final, "cannot be written", error) from None
                except BaseException:
                    part.unlink(missing_ok=True)
                    raise
                return data
            finally:
                os.close(fd)

    def _evict(self, keep: Path) -> None:
        if self.limit is None:
            return
        entries = []
        for path in self.directory.iterdir():
            if path.name.endswith(PART_SUFFIX) or path == keep or not OWN_NAME.fullmatch(path.name):
                continue
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            entries.append((stat.st_mtime_ns, stat.st_size, path))
        try:
            total = keep.stat().st_size + sum(size for _, size, _ in entries)
        except FileNotFoundError:
            return
        for _, size, path in sorted(entries):
            if total <= self.limit:
                break
            if _remove(path):  # a file this process may not remove (another user's) stays, and counts
                total -= size


class _ProcessState:
    """This process's claims: a thread lock per shard, and the folders already opened. A fork child starts
    afresh (a lock held by a thread of its parent would never be released in the child)."""

    def __init__(self) -> None:
        self.guard = threading.Lock()
        self.locks: dict[tuple[Path, str], threading.Lock] = {}
        self.opened: set[Path] = set()


_STATE = _ProcessState()


def _after_fork() -> None:
    global _STATE
    _STATE = _ProcessState()


os.register_at_fork(after_in_child=_after_fork)


def _open_part(part: Path) -> int:
    part.parent.mkdir(parents=True, exist_ok=True)  # the folder may have been removed under us
    return os.open(part, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def _lock(fd: int, wait: bool) -> bool:
    """Take the exclusive record lock on the whole file; False when ``wait`` is off and it is held.

    The kernel sees record locks per process, so two processes whose threads download different shards
    while waiting for each other's look deadlocked to it (EDEADLK). They are not: a thread holds one lock
    at a time and releases it when its download ends, so waiting a moment and asking again is enough.
    """
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError as error:
            if not wait and error.errno in (errno.EACCES, errno.EAGAIN):
                return False
            if error.errno != errno.EDEADLK:
                raise
        time.sleep(0.02)


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (named.st_ino, named.st_dev) == (mine.st_ino, mine.st_dev)


def _cache_error(path: Path, problem: str, error: OSError) -> StorageError:
    reason = error.strerror or str(error)
    return StorageError(
        f"cache_dir: {path} {problem} ({reason}): free space, or give a writable cache_dir", reason
    )


def _remove(path: Path) -> bool:
    """Remove a file; False when it stays (a read-only cache or another user's file: a changed copy is
    never served)."""
    try:
        path.unlink(missing_ok=True)
    except OSError:
        return False
    return True


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(view):
        offset += os.pwrite(fd, view[offset:], offset)
