"""Input files: ``--input`` paths and globs, and their lines, decompressed as a stream.

Compression is chosen by the file name (``.gz``, ``.zst``/``.zstd``, else plain). A truncated or corrupt
stream raises :class:`InputError` naming the file and the line where it broke off, never a silent end; so
does a compressed file of 0 bytes (a failed download holds no stream at all).
"""

from __future__ import annotations

import glob
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from ltsgen.errors import LtsgenError

READ_SIZE = 1 << 20


class InputError(LtsgenError, ValueError):
    """Bad input: the message is one line that names the file (and line) and the problem."""


class TruncatedInput(InputError):
    """A compressed stream that ends early or is corrupt; nothing after it can be read."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class _StreamError(Exception):
    """Raised inside the decompressors; turned into TruncatedInput with the file and line."""


def expand_inputs(patterns: Iterable[str], suffixes: tuple[str, ...] | None = None) -> list[Path]:
    """Files named by paths, folders (recursively) and globs, each pattern's matches sorted, no repeats.

    ``suffixes`` filters the files found inside folders (files named directly are always taken).
    """
    files: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern, recursive=True)) if glob.has_magic(pattern) else [pattern]
        if not matches:
            raise InputError(f"{pattern}: no file matches this pattern")
        for match in matches:
            path = Path(match)
            if path.is_dir():
                found = sorted(
                    p
                    for p in path.rglob("*")
                    if p.is_file()
                    and not any(part.startswith(".") for part in p.relative_to(path).parts)
                    and (suffixes is None or p.name.endswith(suffixes))
                )
                files.extend(found)
            elif path.is_file():
                files.append(path)
            else:
                raise InputError(f"{match}: no such file or folder")
    unique = list(dict.fromkeys(files))
    if not unique:
        raise InputError(f"{', '.join(patterns)}: no input files found")
    return unique


def _frame_chunks(
    path: Path, new_stream, error_type: type[Exception], codec: str, cut: str
) -> Iterator[bytes]:
    """Decompressed bytes of a file of concatenated frames (gzip members, zstd frames); raises on corrupt
    data, and when the file ends inside the last frame (``cut`` says how)."""
    stream = new_stream()
    fed = False
    with open(path, "rb") as handle:
        if not handle.read(1):  # a failed download, not an empty corpus
            raise _StreamError(f"truncated {codec} stream (the file is empty)")
        handle.seek(0)
        while raw := handle.read(READ_SIZE):
            while raw:
                try:
                    out = stream.decompress(raw)
                except error_type as error:
                    raise _StreamError(f"corrupt {codec} stream ({error})") from None
                fed = True
                if out:
                    yield out
                if stream.eof:
                    raw = stream.unused_data
                    stream, fed = new_stream(), False
                else:
                    raw = b""
    if fed and not stream.eof:
        raise _StreamError(f"truncated {codec} stream ({cut})")


def _zstd_chunks(path: Path) -> Iterator[bytes]:
    import zstandard

    decompressor = zstandard.ZstdDecompressor(max_window_size=2**31)
    return _frame_chunks(
        path, decompressor.decompressobj, zstandard.ZstdError, "zstd", "the file ends inside a frame"
    )


def _gzip_chunks(path: Path) -> Iterator[bytes]:
    return _frame_chunks(
        path,
        lambda: zlib.decompressobj(wbits=31),
        zlib.error,
        "gzip",
        "the file ends before the end marker",
    )


def _plain_chunks(path: Path) -> Iterator[bytes]:
    with open(path, "rb") as handle:
        while raw := handle.read(READ_SIZE):
            yield raw


def read_chunks(path: Path) -> Iterator[bytes]:
    """The file's decompressed bytes in pieces; a broken stream raises :class:`TruncatedInput`."""
    name = path.name
    if name.endswith(".gz"):
        chunks = _gzip_chunks(path)
    elif name.endswith((".zst", ".zstd")):
        chunks = _zstd_chunks(path)
    else:
        chunks = _plain_chunks(path)
    try:
        yield from chunks
    except _StreamError as error:
        raise TruncatedInput(str(path), str(error)) from None


def read_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """``(line number from 1, line without its newline)`` for each line of the (decompressed) file.

    A compressed stream that breaks off raises :class:`TruncatedInput` naming the file and the line.
    """
    number = 0
    pending: list[bytes] = []  # the pieces of a line that spans chunks (joined once: linear in its length)
    try:
        for chunk in read_chunks(path):
            lines = chunk.split(b"\n")
            if len(lines) == 1:
                pending.append(chunk)
                continue
            pending.append(lines[0])
            lines[0] = b"".join(pending)
            pending = [lines.pop()]
            for line in lines:
                number += 1
                yield number, line
    except TruncatedInput as error:
        raise TruncatedInput(f"{path}:{number + 1}", error.problem) from None
    if any(pending):
        yield number + 1, b"".join(pending)
