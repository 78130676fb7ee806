"""Input files: ``--input`` paths, URLs and globs, and their lines, decompressed as a stream.

A pattern is a local path or glob, or a URL of any ``ltsgen.loaders.storage`` scheme
(``s3://bucket/c4/*.json.gz``, ``gs://...``, ``hf://datasets/...``), whose files are streamed, never
downloaded whole. Compression is chosen by the file name (``.gz``, ``.zst``/``.zstd``, ``.bz2``, ``.xz``,
else plain; a plain name over compressed bytes is refused). A truncated or corrupt stream raises
:class:`UnreadableInput` (a ``BuildError``) naming the file and the line where it broke off, never a silent
end; so does a compressed file of 0 bytes (a failed download holds no stream at all).

Memory is bounded by the reader's limits, not by the input: a decompressor is fed a little compressed
data at a time (``FEED_SIZE``) and drained a read at a time (``_bounded``), so a small file that expands a
millionfold never expands at once, and lines (or documents) longer than a caller's byte limit are skipped
as they stream by, never joined.
A glob's ``**`` follows links to folders, each folder once (a link to itself or above ends there).
"""

from __future__ import annotations

import glob
import os
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ltsgen.build import BuildError
from ltsgen.loaders.storage import StorageError, filesystem, is_url, scheme_of

READ_SIZE = 1 << 20
# compressed bytes per decompressor call: gzip, bzip2 and xz are drained ``READ_SIZE`` at a time whatever
# one call would give; a zstd call gives ~32 MiB at most (a 4-byte block that repeats one byte 128 KiB times)
FEED_SIZE = 1 << 10


class UnreadableInput(BuildError):
    """A file that cannot be read on: a compressed stream that ends early or is corrupt, or compressed
    bytes under a plain name.

    The builders' one subclass, because its readers act on it: the line splitter catches it to name the
    line where the stream broke off, and the JSON and text readers to hand it to ``--skip-bad`` (counted
    under ``kind``) instead of stopping; ``where`` and ``problem`` are the two halves of its message."""

    def __init__(self, where: str, problem: str, kind: str = "truncated stream") -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem
        self.kind = kind


class _StreamError(Exception):
    """Raised inside the decompressors; turned into UnreadableInput with the file and line."""

    def __init__(self, problem: str, kind: str = "truncated stream") -> None:
        super().__init__(problem)
        self.kind = kind


@dataclass(frozen=True)
class RemoteFile:
    """An input file behind a URL: ``name``, ``open()`` and ``size()`` as a local ``Path`` has them."""

    url: str
    storage_options: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __str__(self) -> str:
        return self.url

    @property
    def name(self) -> str:
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    def _fs(self):
        return filesystem(self.url, self.storage_options)

    def open(self) -> BinaryIO:
        try:
            return self._fs().open(self.url, "rb")
        except FileNotFoundError:
            raise BuildError(f"{self.url}: no such file") from None
        except (OSError, ValueError) as error:
            raise BuildError(f"{self.url}: cannot be read ({error})") from None

    def size(self) -> int:
        return int(self._fs().size(self.url))


InputPath = Path | RemoteFile


def open_input(path: InputPath) -> BinaryIO:
    """A binary file object for a local or remote input file."""
    return path.open() if isinstance(path, RemoteFile) else open(path, "rb")


def input_size(path: InputPath) -> int:
    return path.size() if isinstance(path, RemoteFile) else path.stat().st_size


def _expand_url(pattern: str, suffixes: tuple[str, ...] | None, options: dict[str, Any]) -> list[RemoteFile]:
    """The files of a URL pattern: a file, a folder (recursively, ``suffixes`` filtering) or a glob."""
    try:
        fs = filesystem(pattern, options)
        if glob.has_magic(pattern):
            names = sorted(fs.glob(pattern))
            if not names:
                raise BuildError(f"{pattern}: no file matches this pattern")
        elif fs.isdir(pattern):
            base = fs._strip_protocol(pattern).rstrip("/") + "/"
            names = [
                name
                for name in sorted(fs.find(pattern))
                if not any(part.startswith(".") for part in name[len(base) :].split("/"))
                and (suffixes is None or name.endswith(suffixes))
            ]
        elif fs.isfile(pattern):
            names = [pattern]
        else:
            raise BuildError(f"{pattern}: no such file or folder")
    except (StorageError, BuildError):
        raise
    except Exception as error:  # network clients raise their own types
        raise BuildError(f"{pattern}: cannot be listed ({type(error).__name__}: {error})") from None
    return [RemoteFile(fs.unstrip_protocol(name) if not is_url(name) else name, options) for name in names]


def expand_inputs(
    patterns: Iterable[str],
    suffixes: tuple[str, ...] | None = None,
    storage_options: dict[str, Any] | None = None,
) -> list[InputPath]:
    """Files named by paths, URLs, folders (recursively) and globs, each pattern's matches sorted, each
    file once (a local file reached by several paths or links is read at its first).

    ``suffixes`` filters the files found inside folders (files named directly are always taken);
    ``storage_options`` go to the filesystem of URL patterns.
    """
    files: list[InputPath] = []
    for pattern in patterns:
        if is_url(pattern) and scheme_of(pattern) != "file":
            files.extend(_expand_url(pattern, suffixes, storage_options or {}))
            continue
        pattern = pattern[len("file://") :] if pattern.startswith("file://") else pattern
        matches = _local_glob(pattern) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise BuildError(f"{pattern}: no file matches this pattern")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                try:
                    found = sorted(
                        p
                        for p in path.rglob("*")
                        if p.is_file()
                        and not any(part.startswith(".") for part in p.relative_to(path).parts)
                        and (suffixes is None or p.name.endswith(suffixes))
                    )
                except OSError as error:  # a folder inside that cannot be listed
                    raise BuildError(f"{error.filename or path}: {error.strerror or error}") from None
                files.extend(found)
            elif path.is_file():
                files.append(path)
            else:
                raise BuildError(f"{match}: no such file or folder")
    first: dict[object, InputPath] = {}
    for path in files:  # each file once, however many paths or links lead to it
        first.setdefault(_file_key(path), path)
    unique = list(first.values())
    if not unique:
        raise BuildError(f"{', '.join(patterns)}: no input files found")
    return unique


def _local_glob(pattern: str) -> list[str]:
    """``glob.glob(pattern, recursive=True)``, sorted, where ``**`` enters each folder once (by device and
    inode): a link to a folder itself, or to one above it, is not followed round (glob would go on until
    the path is too long). Hidden folders are skipped, as glob does."""
    parts = pattern.split("/")
    if "**" not in parts:  # "**" inside a name is "*", as for glob
        return sorted(glob.glob(pattern))
    at = parts.index("**")
    head, tail = "/".join(parts[:at]) + ("/" if at else ""), "/".join(parts[at + 1 :])
    matches: set[str] = set()
    for root in glob.glob(head) if glob.has_magic(head) else [head]:
        seen: set[tuple[int, int]] = set()
        for folder, subfolders, _ in os.walk(root or os.curdir, followlinks=True):
            try:
                stat = os.stat(folder)
            except OSError:
                subfolders.clear()
                continue
            if (stat.st_dev, stat.st_ino) in seen:
                subfolders.clear()
                continue
            seen.add((stat.st_dev, stat.st_ino))
            subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
            shown = folder if root else os.path.relpath(folder)
            prefix = "" if shown == os.curdir else glob.escape(shown.rstrip("/") + "/")
            rest = tail.lstrip("/")
            matches.update(glob.glob(prefix + rest) if rest else [prefix or os.curdir])
    return sorted(match for match in matches if match)


def _file_key(path: InputPath) -> object:
    """What makes two input paths one file: the device and inode of a local file, else its URL."""
    if isinstance(path, RemoteFile):
        return path
    try:
        stat = path.stat()
    except OSError:
        return path
    return stat.st_dev, stat.st_ino


def _frame_chunks(
    path: InputPath, new_stream, error_type: type[Exception], codec: str, cut: str
) -> Iterator[bytes]:
    """Decompressed bytes of a file of concatenated frames (gzip members, zstd frames, bzip2 and xz streams,
    zero bytes of padding between them skipped), in pieces of about ``READ_SIZE``; raises on corrupt data,
    and when the file ends inside the last frame (``cut`` says how)."""
    stream = new_stream()
    fed = started = False  # the current frame has had bytes; any frame has
    parts: list[bytes] = []
    size = 0
    with open_input(path) as handle:
        if not handle.read(1):  # a failed download, not an empty corpus
            raise _StreamError(f"truncated {codec} stream (the file is empty)")
        handle.seek(0)
        while raw := handle.read(READ_SIZE):
            for start in range(0, len(raw), FEED_SIZE):
                piece = raw[start : start + FEED_SIZE]
                while piece:
                    if not fed:  # no frame starts with a zero byte: zeros between or after are padding (xz's)
                        piece = piece.lstrip(b"\0")
                        if not piece:
                            break
                    try:
                        for out in _bounded(stream, piece):
                            parts.append(out)
                            size += len(out)
                            if size >= READ_SIZE:  # a bomb expands a piece a million times: yield as it goes
                                yield b"".join(parts)
                                parts, size = [], 0
                    except error_type as error:
                        if _TOO_MUCH_MEMORY.search(str(error)):
                            raise _StreamError(f"{codec} data that needs {_MEMORY_NEEDED[codec]}") from None
                        raise _StreamError(f"corrupt {codec} stream ({error})") from None
                    fed = started = True
                    if stream.eof:
                        piece = stream.unused_data
                        stream, fed = new_stream(), False
                    else:
                        piece = b""
    if parts:
        yield b"".join(parts)
    if not started:
        raise _StreamError(f"corrupt {codec} stream (zero bytes only)")
    if fed and not stream.eof:
        raise _StreamError(f"truncated {codec} stream ({cut})")


def _bounded(stream, piece: bytes) -> Iterator[bytes]:
    """The output of one piece of compressed input, at most ``READ_SIZE`` bytes at a time: gzip, bzip2 and xz
    streams are drained in steps (a bzip2 bomb expands a kilobyte to a gigabyte in one call); a zstd frame's
    output per call is bounded by its blocks and its window (``ZSTD_WINDOW``)."""
    if hasattr(stream, "needs_input"):  # bz2, lzma
        yield stream.decompress(piece, READ_SIZE)
        while not stream.eof and not stream.needs_input:
            yield stream.decompress(b"", READ_SIZE)
    elif isinstance(stream, _ZLIB_STREAM):
        yield stream.decompress(piece, READ_SIZE)
        while stream.unconsumed_tail and not stream.eof:
            yield stream.decompress(stream.unconsumed_tail, READ_SIZE)
    else:
        yield stream.decompress(piece)


_ZLIB_STREAM = type(zlib.decompressobj())
# the most memory a compressed input may ask for: a file that declares more is refused, not given gigabytes
# (zstd's own tool refuses windows over 128 MiB unless told --long=N; xz's has no limit by default)
ZSTD_WINDOW = 1 << 27
XZ_MEMORY = 1 << 28
_TOO_MUCH_MEMORY = re.compile(r"too much memory|Memory usage limit", re.IGNORECASE)
_MEMORY_NEEDED = {
    "zstd": "a window over 128 MiB (made with zstd --long=28 or more): decompress it first (zstd -d --long=31)",
    "xz": "over 256 MiB of memory (a dictionary of 256 MiB or more): decompress it first (xz -d)",
}


def _zstd_chunks(path: InputPath) -> Iterator[bytes]:
    import zstandard

    decompressor = zstandard.ZstdDecompressor(max_window_size=ZSTD_WINDOW)
    return _frame_chunks(
        path, decompressor.decompressobj, zstandard.ZstdError, "zstd", "the file ends inside a frame"
    )


def _gzip_chunks(path: InputPath) -> Iterator[bytes]:
    return _frame_chunks(
        path,
        lambda: zlib.decompressobj(wbits=31),
        zlib.error,
        "gzip",
        "the file ends before the end marker",
    )


def _checked_plain_chunks(path: InputPath) -> Iterator[bytes]:
    with open_input(path) as handle:
        raw = handle.read(READ_SIZE)
        named = next((named for magic, named in _MAGIC.items() if raw.startswith(magic)), None)
        if named:
            raise _StreamError(
                f"{named[0]}-compressed, but its name does not end in {named[1]}", "compressed, misnamed"
            )
        while raw:
            yield raw
            raw = handle.read(READ_SIZE)


def _bz2_chunks(path: InputPath) -> Iterator[bytes]:
    import bz2

    return _frame_chunks(path, bz2.BZ2Decompressor, OSError, "bzip2", "the file ends inside a stream")


def _xz_chunks(path: InputPath) -> Iterator[bytes]:
    import lzma

    def new_stream():
        return lzma.LZMADecompressor(memlimit=XZ_MEMORY)  # xz, or the legacy .lzma format as xz reads it

    return _frame_chunks(path, new_stream, lzma.LZMAError, "xz", "the file ends inside a stream")


# compressed files by name, and the first bytes of each compression (a plain file that starts so is refused)
DECOMPRESSORS = {".gz": _gzip_chunks, ".zst": _zstd_chunks, ".zstd": _zstd_chunks, ".bz2": _bz2_chunks,
                 ".xz": _xz_chunks}  # fmt: skip
_MAGIC = {b"\x1f\x8b\x08": ("gzip", ".gz"), b"\x28\xb5\x2f\xfd": ("zstd", ".zst"), b"\xfd7zXZ\x00": ("xz", ".xz"),
          **{b"BZh%d1AY&SY" % level: ("bzip2", ".bz2") for level in range(1, 10)}}  # fmt: skip


def read_chunks(path: InputPath) -> Iterator[bytes]:
    """The file's decompressed bytes in pieces, by its name (``DECOMPRESSORS``); a broken stream raises
    :class:`UnreadableInput`, and so does a file compressed under a name that does not say so (its first
    bytes, ``_MAGIC``)."""
    suffix = next((suffix for suffix in DECOMPRESSORS if path.name.endswith(suffix)), None)
    chunks = DECOMPRESSORS[suffix](path) if suffix else _checked_plain_chunks(path)
    try:
        yield from chunks
    except _StreamError as error:
        raise UnreadableInput(str(path), str(error), error.kind) from None


def read_lines(path: InputPath, limit: int | None = None) -> Iterator[tuple[int, bytes | None]]:
    """``(line number from 1, line without its newline)`` for each line of the (decompressed) file.

    A line longer than ``limit`` bytes is given as None, read past without being kept (memory stays
    within ``limit`` plus a chunk). A compressed stream that breaks off raises :class:`UnreadableInput`
    naming the file and the line.
    """
    number = 0
    pending: list[bytes] = []  # the pieces of a line that spans chunks (joined once: linear in its length)
    size = 0
    dropping = False  # the current line is already longer than limit
    try:
        for chunk in read_chunks(path):
            lines = chunk.split(b"\n")
            if len(lines) > 1:
                number += 1
                if dropping or (limit is not None and size + len(lines[0]) > limit):
                    yield number, None
                else:
                    pending.append(lines[0])
                    yield number, b"".join(pending)
                for line in lines[1:-1]:
                    number += 1
                    yield number, None if limit is not None and len(line) > limit else line
                pending, size, dropping = [], 0, False
            if not dropping:
                pending.append(lines[-1])
                size += len(lines[-1])
                if limit is not None and size > limit:
                    pending, size, dropping = [], 0, True
    except UnreadableInput as error:
        raise UnreadableInput(f"{path}:{number + 1}", error.problem, error.kind) from None
    if dropping:
        yield number + 1, None
    elif any(pending):
        yield number + 1, b"".join(pending)
