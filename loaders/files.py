"""Local files written whole or not at all, and their checksums: the bottom of ``ltsgen.loaders``. It imports
nothing of ltsgen's, so that the storage layer and every writer above it (builders, cards, runs) share it."""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO


def open_regular(path: str | os.PathLike, mode: str = "rb") -> IO:
    """A local file opened for reading; an ``OSError`` for anything but a regular file, checked before it
    is opened (a FIFO would block for ever, a device such as ``/dev/zero`` never end: a dataset's shard or
    manifest may be a symlink to one)."""
    if not stat.S_ISREG(os.stat(path).st_mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    return open(path, mode)  # noqa: SIM115 - the caller closes it


def read_regular_file(path: str | os.PathLike) -> bytes:
    """The bytes of a local regular file (``open_regular``)."""
    with open_regular(path) as handle:
        return handle.read()


def sha256_file(path: str | os.PathLike, chunk_size: int = 1 << 20) -> str:
    """The sha256 of a local file, read in chunks.

    Args:
        path: the file.
        chunk_size: bytes per read.

    Returns:
        The hex digest.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()


_UMASK = os.umask(0o022)
os.umask(_UMASK)


@contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """A temporary path beside ``path`` that becomes ``path`` only if the ``with`` block succeeds.

    Args:
        path: the final local path (its folder is created).

    Returns:
        A context manager yielding the temporary path; it is renamed over ``path`` on success and
        removed on failure.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; the final file gets the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def temporaries_of(names: Iterable[str]) -> re.Pattern[str]:
    """What ``atomic_path`` calls the temporary file of one of ``names`` (regular expressions) while it is
    written: ``.<final name>.<random>.tmp``; a match's ``name`` group is the final name."""
    return re.compile(r"^\.(?P<name>" + "|".join(names) + r")\.\w+\.tmp$")
