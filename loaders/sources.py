"""Where shard bytes come from: local paths, ``file://`` and any fsspec URL (``http(s)://``, ``s3://``, ...).

``s3://`` objects are read through one botocore client per process (``s3``), not s3fs, unless a storage
option is one only s3fs takes: a remote first batch then waits for botocore's import, not s3fs's stack.

A ``pipe:`` URL runs a shell command and reads its standard output (the webdataset convention); it is
refused unless the caller opts in with ``allow_pipe=True``, because it executes what a path string says.
For a dataset directory given as ``pipe:`` the command is a template with ``{path}`` standing for the
file inside the directory, e.g. ``pipe:aws s3 cp s3://bucket/data/{path} -``; the path is substituted
quoted for the shell, so ``{path}`` stays unquoted in the template.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ltsgen.errors import LtsgenError

from . import s3
from .errors import LoaderError
from .files import read_regular_file
from .storage import StorageError, filesystem

PIPE_PREFIX = "pipe:"


def is_remote(path_or_url: str | os.PathLike) -> bool:
    """Whether reading ``path_or_url`` goes over the network (any URL but ``file://``, or a ``pipe:``).

    Args:
        path_or_url: a dataset directory or file.

    Returns:
        True for ``s3://``, ``http(s)://``, ``pipe:`` ...; False for local paths and ``file://``.
    """
    text = str(path_or_url)
    return text.startswith(PIPE_PREFIX) or ("://" in text and not text.startswith("file://"))


def located(path_or_url: str | os.PathLike) -> str:
    """The location ``path_or_url`` names, one spelling for each: a local path made absolute with its links
    resolved (``a``, ``./a/`` and ``/work/a`` agree), a URL or a ``pipe:`` as it is."""
    text = str(path_or_url)
    return text if "://" in text or text.startswith(PIPE_PREFIX) else os.path.realpath(text)


def check_pipe(path_or_url: str | os.PathLike, allow_pipe: bool) -> None:
    """Refuse a ``pipe:`` URL in one line unless the caller opted in.

    Args:
        path_or_url: any path or URL.
        allow_pipe: the caller's opt-in.
    """
    if str(path_or_url).startswith(PIPE_PREFIX) and not allow_pipe:
        raise LoaderError(
            f"{path_or_url}: pipe: URLs run shell commands and are refused; pass allow_pipe=True to run it"
        )


def read_bytes(
    path_or_url: str | os.PathLike, *, allow_pipe: bool = False, storage_options: dict[str, Any] | None = None
) -> bytes:
    """The whole content of one file, local or remote.

    Args:
        path_or_url: a local path, ``file://``, any URL ``storage.Storage`` accepts, or ``pipe:COMMAND``.
        allow_pipe: run ``pipe:`` commands (refused otherwise).
        storage_options: keyword arguments for the URL's fsspec filesystem (credentials, endpoint, ...).

    Returns:
        The bytes; a one-line ``LoaderError`` names the file when it cannot be read.
    """
    text = str(path_or_url)
    check_pipe(text, allow_pipe)
    with _read_errors(text):
        if text.startswith(PIPE_PREFIX):
            return _run_pipe(text[len(PIPE_PREFIX) :])
        scheme = urlsplit(text).scheme if "://" in text else ""
        if scheme in ("", "file"):
            return read_regular_file(text[len("file://") :] if scheme == "file" else text)
        reader = _s3_reader(text, storage_options)
        if reader is not None:
            return reader.read(text)
        return filesystem(text, storage_options).cat_file(text)


def read_ranges(
    url: str, spans: list[tuple[int, int]], *, storage_options: dict[str, Any] | None = None
) -> list[bytes]:
    """Byte ranges ``[start, stop)`` of a remote file, requested at once (concurrent range requests for
    ``s3://``, ``gs://``, ``http(s)://`` ...).

    Args:
        url: any fsspec URL but ``file://`` and ``pipe:``.
        spans: the ranges.
        storage_options: keyword arguments for the URL's fsspec filesystem.

    Returns:
        The bytes of each range; a one-line ``LoaderError`` names the file when they cannot be read.
    """
    starts, stops = [start for start, _ in spans], [stop for _, stop in spans]
    with _read_errors(url):
        reader = _s3_reader(url, storage_options)
        if reader is not None:
            pieces = reader.read_ranges(url, spans)
        else:
            fs = filesystem(url, storage_options)
            pieces = fs.cat_ranges([url] * len(spans), starts, stops, on_error="raise")
    for start, stop, data in zip(starts, stops, pieces, strict=True):
        if len(data) != stop - start:
            raise LoaderError(
                f"{url}: bytes {start}-{stop} came back as {len(data)} bytes (changed or truncated)"
            )
    return pieces


@contextmanager
def _read_errors(location: str) -> Iterator[None]:
    """A failed read of ``location`` as one line naming it (ltsgen's own errors, such as a missing extra
    naming which, pass as they are): a ``LoaderError`` when the file is not there, else a ``StorageError``,
    the store's failure (a server gone, a timeout, no permission), which ``on_error="skip"`` never takes
    for a corrupt shard: it would be another shard in each process, and gone once the store is back."""
    try:
        yield
    except FileNotFoundError:
        raise LoaderError(f"{location}: not found") from None
    except LtsgenError:
        raise
    except Exception as error:  # OSError, and network clients' own types (botocore, aiohttp, requests)
        reason = f"{type(error).__name__}: {error}"
        raise StorageError(f"{location}: cannot be read ({reason})", reason) from None


def _s3_reader(url: str, storage_options: dict[str, Any] | None) -> s3.S3Client | None:
    """The botocore reader of a plain ``s3://`` URL, or None where fsspec's filesystem reads it."""
    return s3.client(storage_options) if s3.plain(url) else None


def join(base: str | os.PathLike, relpath: str) -> str:
    """The location of ``relpath`` inside the directory ``base``.

    Args:
        base: a directory path, URL or ``pipe:`` template.
        relpath: a ``/``-separated path inside it (``contract.check_relpath`` has vetted manifest paths).

    Returns:
        The path or URL; for a ``pipe:`` template, the command with ``{path}`` replaced by ``relpath``
        quoted for the shell, so that no path runs as a command (leave ``{path}`` unquoted in templates).
    """
    text = str(base)
    if text.startswith(PIPE_PREFIX):
        return text.replace("{path}", shlex.quote(relpath))
    if "://" in text:
        return text.rstrip("/") + "/" + relpath
    return str(Path(text, *relpath.split("/")))


def _run_pipe(command: str) -> bytes:
    result = subprocess.run(command, shell=True, capture_output=True, check=False)
    if result.returncode != 0:
        stderr = result.stderr.decode("utf-8", "replace").strip().splitlines()
        reason = f"exited with status {result.returncode} ({stderr[-1] if stderr else 'no output'})"
        raise StorageError(f"pipe:{command}: {reason}", reason)  # the command's failure: no skipped shard
    return result.stdout
