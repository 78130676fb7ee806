"""Row groups decoded once for all the DataLoader workers of a loader, in shared memory.

The workers of ``StreamingDataset.loader(num_workers=N)`` serve interleaved batches, so each of them needs
documents from every row group of a window. Alone, each would read, check and decode the whole window:
N times the work of one process. Instead, each shard's token ids live in one file of a folder in shared
memory (``/dev/shm`` where there is one) that the loader makes for one pass of its workers and removes
after it: a row group is claimed by the first worker that needs it or owns it (worker ``g mod N`` decodes
row group ``g`` ahead, in the background), read, checked against its sha256 and decoded there once, and
read from the file by the others. The file is a cache: a worker that finds none (or one removed once its
window was passed) decodes on its own, and one whose claimer failed decodes the row group itself (and
meets the same error). Files of windows two behind the current one are removed, so the folder holds about
two windows of ids whatever the dataset's size.
"""

from __future__ import annotations

import fcntl
import mmap
import os
import shutil
import tempfile
import time

import numpy as np

FREE, CLAIMED, DONE, FAILED = 0, 1, 2, 3
_HEADER_ALIGN = 64
_POLL_SECONDS = 0.0002


def shared_folder() -> str:
    """A new private folder for one pass of a loader's workers (in ``/dev/shm`` when the system has one)."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    return tempfile.mkdtemp(prefix="ltsgen-loader-", dir=base)


def remove_folder(folder: str) -> None:
    """Remove a folder of ``shared_folder`` (the workers' maps of its files stay valid until they end)."""
    shutil.rmtree(folder, ignore_errors=True)


class SharedDecodes:
    """One worker's view of the shared folder.

    Args:
        folder: the folder (``shared_folder``).
        worker, workers: this worker and how many there are (worker ``g mod workers`` owns row group ``g``).
    """

    def __init__(self, folder: str, worker: int, workers: int) -> None:
        self.folder, self.worker, self.workers = folder, worker, workers

    def region(self, index: int, groups: int, size: int, dtype: np.dtype) -> SharedRegion | None:
        """The shared ids of shard ``index`` (created by the first worker to ask), or None when the folder
        is gone (the loader's pass ended) or cannot hold it: the caller then decodes on its own.

        Args:
            index: the shard's index in the split.
            groups: its row groups.
            size: its token count.
            dtype: the ids' dtype.
        """
        path = os.path.join(self.folder, f"{index}.ids")
        offset = -(-groups // _HEADER_ALIGN) * _HEADER_ALIGN
        length = offset + size * np.dtype(dtype).itemsize
        try:
            if not os.path.exists(path):
                _create(path, length)
            fd = os.open(path, os.O_RDWR)
        except OSError:  # the folder is gone, or full
            return None
        try:
            if os.fstat(fd).st_size != length:
                return None
            memory = mmap.mmap(fd, length) if length else None
        except OSError:
            os.close(fd)
            return None
        return SharedRegion(fd, memory, groups, offset, size, np.dtype(dtype))

    def owned(self, groups: int) -> range:
        """The row groups this worker decodes ahead."""
        return range(self.worker, groups, self.workers)

    def forget(self, index: int) -> None:
        """Remove shard ``index``'s file (its window is passed; maps of it stay valid)."""
        try:
            os.unlink(os.path.join(self.folder, f"{index}.ids"))
        except OSError:
            pass


class SharedRegion:
    """One shard's ids in shared memory: a state byte per row group, then the values."""

    def __init__(self, fd: int, memory: mmap.mmap | None, groups: int, offset: int, size: int, dtype) -> None:
        self.fd = fd
        if memory is None:
            self.states = np.zeros(groups, np.uint8)
            self.values = np.zeros(0, dtype)
        else:
            self.states = np.frombuffer(memory, np.uint8, groups)
            self.values = np.frombuffer(memory, dtype, size, offset)

    def __del__(self) -> None:
        os.close(self.fd)

    def claim(self, group: int) -> bool:
        """Whether this process decodes ``group`` (it was free, or its claimer failed); else it is done
        or being decoded elsewhere (``wait``)."""
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            mine = self.states[group] in (FREE, FAILED)
            if mine:
                self.states[group] = CLAIMED
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        return mine

    def finish(self, group: int, ok: bool) -> None:
        """Publish the claimed ``group`` as decoded (its values written), or as failed."""
        self.states[group] = DONE if ok else FAILED

    def wait(self, group: int) -> bool:
        """Wait while another process decodes ``group``; True once it is decoded, False if it failed."""
        while self.states[group] == CLAIMED:
            time.sleep(_POLL_SECONDS)
        return bool(self.states[group] == DONE)

    def busy(self, group: int) -> bool:
        """Whether another process decodes ``group`` now (or has decoded it)."""
        return bool(self.states[group] in (CLAIMED, DONE))


def _create(path: str, length: int) -> None:
    """Create ``path`` of ``length`` zero bytes atomically (a complete file appears, or none replaces one)."""
    fd, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".", suffix=".tmp")
    try:
        if length:
            os.posix_fallocate(fd, 0, length)  # all of it now: a full /dev/shm fails here, not in a write
        os.close(fd)
        try:
            os.link(temporary, path)  # fails when another worker created it first: theirs is used
        except FileExistsError:
            pass
    finally:
        os.unlink(temporary)
