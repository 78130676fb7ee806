"""Shard readers, one per format: decode a whole shard's bytes into columns, then records.

Decoding is columnar so that the training path touches no per-record Python: a parquet shard's
``input_ids`` come out of one pyarrow column read as a flat ``values`` array plus ``offsets`` (or, for a
shard whose bytes were verified, row group by row group as they are first needed: ``RowGroupTokens``,
each row group read and checked on its own where the footer lists their sha256: ``indexed.py``); a
webdataset tar is walked by a small header parser (no ``tarfile`` objects per member) and its ``.npy``
members are parsed from their fixed header; a jsonl.zst shard is decompressed as a stream, a line at a
time, and only the wanted fields of each record are kept. Every failure is a ``LoaderError`` that names the shard.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from .contract import FORMATS, TAR_FIELDS_EXT, TAR_IDS_EXT, TAR_TEXT_EXT
from .errors import LoaderError
from .sources import read_bytes

RECORD_ORDER = ("id", "text", "source", "num_words", "num_tokens", "input_ids", "meta")


@dataclass
class TokenColumn:
    """The token ids of every record of a shard: record ``i`` is ``values[offsets[i]:offsets[i + 1]]``."""

    values: np.ndarray
    offsets: np.ndarray  # int64, length rows + 1, starting at 0
    complete: ClassVar[bool] = True  # every record's ids are in ``values``

    def load(self, rows: np.ndarray) -> None:
        """Make the ids of ``rows`` readable in ``values`` (a decoded column holds them all already).

        Args:
            rows: record indices.
        """

    def load_all(self) -> None:
        """Make every record's ids readable in ``values``."""

    def decode(self, rows: np.ndarray | None = None) -> None:
        """Decode the ids of ``rows`` (None: all) ahead of ``load``, e.g. on another thread; this never
        waits, and ``load`` still makes them readable.

        Args:
            rows: record indices, or None.
        """

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        return self.values[self.offsets[index] : self.offsets[index + 1]]

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    @classmethod
    def from_arrays(cls, arrays: Sequence[np.ndarray]) -> TokenColumn:
        """One column from per-record arrays.

        Args:
            arrays: the token ids of each record, in order.

        Returns:
            The column (values concatenated, offsets from the lengths).
        """
        offsets = np.zeros(len(arrays) + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=offsets[1:])
        values = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.uint16)
        return cls(values, offsets)


class RowGroupTokens(TokenColumn):
    """The token ids of a parquet shard, decoded a row group at a time when first asked for.

    The offsets come from the token counts (the footer's ``RowGroupIndex``, or the ``num_tokens`` column),
    so a window can be laid out and cut before any ids are decoded; ``load`` decodes the row groups that
    hold the rows asked for, ``load_all`` the others. Each row group's decoded lengths are checked against
    the counts. Safe to use from several threads: other threads may ``decode`` row groups ahead while the
    reader loads the rows it needs first.

    ``check`` (optional) is called with a row group's number before it is decoded (``indexed.IndexedParquet``
    reads its bytes and checks them against their sha256 there), so that no id is decoded from bytes that
    were not checked; ``fetch`` (optional) with the row groups a ``decode`` is about to check, so that a
    remote shard's are requested at once rather than one after another.
    """

    def __init__(
        self,
        parquet,
        offsets: np.ndarray,
        dtype: np.dtype,
        where: str,
        check: Callable[[int], None] | None = None,
        fetch: Callable[[list[int]], None] | None = None,
    ) -> None:
        super().__init__(np.empty(int(offsets[-1]), dtype), offsets)
        self._group_starts = _row_group_starts(parquet)
        if self._group_starts[-1] != len(offsets) - 1:
            raise LoaderError(
                f"{where}: {len(offsets) - 1} token counts for {self._group_starts[-1]} records"
            )
        self._loaded = np.zeros(len(self._group_starts) - 1, dtype=bool)
        self._parquet = parquet
        self._check, self._fetch = check, fetch
        self._lock = threading.Lock()
        self._where = where
        self.complete = not len(self._loaded)  # every id decoded

    @property
    def decoded_groups(self) -> int:
        """Row groups decoded so far (of ``len(row_group_starts) - 1``)."""
        return int(self._loaded.sum())

    @property
    def row_group_starts(self) -> np.ndarray:
        """The first record of each row group, then the record count."""
        return self._group_starts

    def __getitem__(self, index: int) -> np.ndarray:
        self.load(np.asarray([index]))
        return super().__getitem__(index)

    def load(self, rows: np.ndarray) -> None:
        if not self.complete:
            self.decode(rows)

    def load_all(self) -> None:
        if not self.complete:
            self.decode()

    def decode(self, rows: np.ndarray | None = None) -> None:
        if rows is None:
            groups = range(len(self._loaded))
        else:
            groups = np.searchsorted(self._group_starts, rows, side="right") - 1
            groups = sorted(set(groups[~self._loaded[groups]].tolist()))
        if self._fetch is not None and len(groups) > 1:
            with self._lock:  # another thread decoding the same groups finds their bytes fetched
                self._fetch([group for group in groups if not self._loaded[group]])
        for group in groups:
            self._load_group(group)

    def _load_group(self, group: int) -> None:
        with self._lock:
            if self._loaded[group]:
                return
            where = f"{self._where}: row group {group}"
            if self._check is not None:
                self._check(group)
            decoded = _arrow_token_column(_read_row_group(self._parquet, group, "input_ids", where), where)
            lo, hi = int(self._group_starts[group]), int(self._group_starts[group + 1])
            start, stop = int(self.offsets[lo]), int(self.offsets[hi])
            if len(decoded) != hi - lo or not np.array_equal(
                decoded.offsets, self.offsets[lo : hi + 1] - start
            ):
                raise LoaderError(f"{where}: the lengths of input_ids differ from num_tokens")
            if decoded.values.dtype != self.values.dtype:
                raise LoaderError(
                    f"{where}: input_ids are {decoded.values.dtype}, the schema says {self.values.dtype}"
                )
            self.values[start:stop] = decoded.values
            self._loaded[group] = True
            if self._loaded.all():
                self._parquet = self._check = None  # and with them the shard's bytes
                self.complete = True


class RowGroupTexts(Sequence[str]):
    """The ``text`` column of a parquet shard, decoded a row group at a time when one of its rows is read.

    A window's first batch of text tokenized on the fly decodes the row groups its few documents live in,
    not its shards whole. For bytes already checked against their sha256, or with ``check(group)`` (as in
    ``RowGroupTokens``), which reads a row group's bytes and checks them just before it is decoded.
    ``on_decode`` (optional) is called with each row group's texts and its first row as it is decoded,
    before any is returned. Safe to use from several threads.
    """

    def __init__(self, parquet, where: str, check: Callable[[int], None] | None = None) -> None:
        self._group_starts = _row_group_starts(parquet)
        self._groups: list[list[str | None] | None] = [None] * (len(self._group_starts) - 1)
        self._parquet, self._where, self._check = parquet, where, check
        self._lock = threading.Lock()
        self.on_decode: Callable[[list, int], None] | None = None

    @property
    def decoded_groups(self) -> int:
        """Row groups decoded so far (of ``len(self._groups)``)."""
        return sum(texts is not None for texts in self._groups)

    def __len__(self) -> int:
        return int(self._group_starts[-1])

    def __getitem__(self, row: int) -> str | None:  # type: ignore[override]
        if not 0 <= row < len(self):
            raise IndexError(row)
        group = int(np.searchsorted(self._group_starts, row, side="right")) - 1
        return self._group(group)[row - int(self._group_starts[group])]

    def __iter__(self) -> Iterator[str | None]:
        for group in range(len(self._groups)):
            yield from self._group(group)

    def _group(self, group: int) -> list[str | None]:
        texts = self._groups[group]
        if texts is not None:
            return texts
        with self._lock:
            if self._groups[group] is None:
                where = f"{self._where}: row group {group}"
                if self._check is not None:
                    self._check(group)
                decoded = _read_row_group(self._parquet, group, "text", where).to_pylist()
                if self.on_decode is not None:
                    self.on_decode(decoded, int(self._group_starts[group]))
                self._groups[group] = decoded
                if all(texts is not None for texts in self._groups):
                    self._parquet = self._check = None  # and with them the shard's bytes
            return self._groups[group]


def _row_group_starts(parquet) -> np.ndarray:
    """The first record of each row group of a ``pyarrow.parquet.ParquetFile``, then its record count."""
    metadata = parquet.metadata
    counts = [metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)]
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)


def _read_row_group(parquet, group: int, column: str, where: str):
    """One column of one row group (a chunked array); one line naming ``where`` on corrupt bytes."""
    try:
        return parquet.read_row_group(group, columns=[column], use_threads=False).column(0)
    except Exception as error:  # pyarrow's own error on corrupt bytes
        raise LoaderError(f"{where}: corrupt parquet ({type(error).__name__}: {error})") from None


@dataclass
class ShardColumns:
    """A decoded shard: ``fields`` maps a record field to one value per row (``None`` where absent)."""

    num_rows: int
    fields: dict[str, list] = field(default_factory=dict)
    tokens: TokenColumn | None = None

    def record(self, index: int) -> dict:
        """Record ``index`` as a dict, fields in ``RECORD_ORDER`` then any others.

        Args:
            index: the row.

        Returns:
            The record (absent fields left out; ``input_ids`` a numpy view).
        """
        out = {}
        for name in RECORD_ORDER:
            if name == "input_ids":
                if self.tokens is not None:
                    out[name] = self.tokens[index]
            elif name in self.fields and self.fields[name][index] is not None:
                out[name] = self.fields[name][index]
        for name, values in self.fields.items():
            if name not in out and name not in RECORD_ORDER and values[index] is not None:
                out[name] = values[index]
        return out

    def records(self) -> Iterator[dict]:
        """Every record, in stored order (see ``record``)."""
        for index in range(self.num_rows):
            yield self.record(index)


def read_shard(
    path_or_url: str | os.PathLike,
    fmt: str,
    columns: Sequence[str] | None = None,
    *,
    allow_pipe: bool = False,
) -> Iterator[dict]:
    """The records of one shard in stored order.

    Args:
        path_or_url: the shard file (any source ``sources.read_bytes`` reads).
        fmt: its format, a key of ``contract.FORMATS``.
        columns: the fields to read (None: all; ``id`` is always kept where the format stores it as the key).
        allow_pipe: run a ``pipe:`` command.

    Returns:
        An iterator of records (``input_ids`` as a numpy array when present); ``LoaderError`` names the
        shard when it is corrupt or cannot be read.
    """
    data = read_bytes(path_or_url, allow_pipe=allow_pipe)
    yield from decode_shard(data, fmt, str(path_or_url), columns).records()


DECODER_MODULES = {"parquet": ("pyarrow.parquet",), "webdataset": (), "jsonl.zst": ("zstandard",)}


def import_decoders(formats: Iterable[str]) -> None:
    """Import the modules that decode shards of ``formats`` (keys of ``contract.FORMATS``) in this process.

    A loader does so before it forks its workers, which then share them: otherwise each worker imports
    them itself, at every epoch (pyarrow: ~0.14 s of CPU, and pages of the parent's memory copied).
    """
    for fmt in formats:
        for name in DECODER_MODULES[fmt]:
            importlib.import_module(name)


def decode_shard(
    data: bytes,
    fmt: str,
    where: str,
    columns: Sequence[str] | None = None,
    *,
    lazy_tokens: bool = False,
    lazy_text: bool = False,
) -> ShardColumns:
    """Decode a whole shard held in memory, column by column.

    Args:
        data: the shard's bytes.
        fmt: its format, a key of ``contract.FORMATS``.
        where: its path or URL, for the messages.
        columns: the fields to decode (None: all).
        lazy_tokens: decode a parquet shard's ``input_ids`` a row group at a time as they are asked for
            (``RowGroupTokens``, when the shard has ``num_tokens``); for bytes checked against the
            manifest, since a row group that fails to decode is then found only when it is reached.
        lazy_text: likewise a parquet shard's ``text``, a row group at a time as its rows are read
            (``RowGroupTexts``).

    Returns:
        The decoded columns; ``LoaderError`` naming the shard when the bytes are corrupt.
    """
    if fmt not in FORMATS:
        raise LoaderError(f"{where}: unknown shard format {fmt!r} (one of {', '.join(FORMATS)})")
    wanted = None if columns is None else set(columns)
    try:
        if fmt == "parquet":
            shard = _decode_parquet(data, where, wanted, lazy_tokens, lazy_text)
        elif fmt == "webdataset":
            shard = _decode_tar(data, where, wanted)
        else:
            shard = _decode_jsonl_zst(data, where, wanted)
        if "meta" in shard.fields:
            shard.fields["meta"] = [_meta(value, where) for value in shard.fields["meta"]]
        return shard
    except LoaderError:
        raise
    except Exception as error:  # a decoder's own error on corrupt bytes
        raise LoaderError(f"{where}: corrupt {fmt} shard ({type(error).__name__}: {error})") from None


def _meta(value: str | dict | None, where: str) -> dict | None:
    """``meta`` as a dict: shards store it as a JSON string (earlier tar and jsonl.zst shards as an object)."""
    if not isinstance(value, str):
        return value
    meta = json.loads(value)
    if not isinstance(meta, dict):
        raise LoaderError(f"{where}: meta must be a JSON object, not {type(meta).__name__}")
    return meta


# ---------------------------------------------------------------- parquet


def _decode_parquet(
    data: bytes, where: str, wanted: set[str] | None, lazy_tokens: bool, lazy_text: bool
) -> ShardColumns:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(pa.BufferReader(data))
    schema = parquet.schema_arrow
    selected = [n for n in schema.names if wanted is None or n in wanted]
    lazy = lazy_tokens and "input_ids" in selected and "num_tokens" in schema.names
    eager = [n for n in selected if not (lazy and n == "input_ids") and not (lazy_text and n == "text")]
    table = parquet.read(columns=sorted(set(eager) | {"num_tokens"}) if lazy else eager, use_threads=False)
    shard = ShardColumns(parquet.metadata.num_rows)
    for name in selected:
        if name == "input_ids":
            shard.tokens = (
                _row_group_tokens(parquet, table.column("num_tokens"), schema.field(name).type, where)
                if lazy
                else _arrow_token_column(table.column(name), where)
            )
        elif name == "text" and lazy_text:
            shard.fields[name] = RowGroupTexts(parquet, where)
        else:
            shard.fields[name] = table.column(name).to_pylist()
    return shard


def _row_group_tokens(parquet, num_tokens, ids_type, where: str) -> RowGroupTokens:
    """The lazily decoded ``input_ids`` of a parquet shard, laid out by its ``num_tokens`` column."""
    counts = num_tokens.combine_chunks() if num_tokens.num_chunks != 1 else num_tokens.chunk(0)
    if counts.null_count or str(counts.type) != "int64":
        raise LoaderError(f"{where}: num_tokens must be int64 without nulls, not {counts.type}")
    lengths = np.frombuffer(counts.buffers()[1], np.int64, len(counts), counts.offset * 8)
    if (lengths < 0).any():
        raise LoaderError(f"{where}: num_tokens has negative counts")
    offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    return RowGroupTokens(parquet, offsets, ids_dtype(ids_type, where), where)


def ids_dtype(ids_type, where: str) -> np.dtype:
    """The numpy dtype of an ``input_ids`` column's arrow type (``LoaderError`` unless a list of integers).

    Args:
        ids_type: the column's pyarrow type.
        where: the shard, for the message.

    Returns:
        The dtype of the ids.
    """
    import pyarrow as pa

    if not (pa.types.is_list(ids_type) or pa.types.is_large_list(ids_type)) or not pa.types.is_integer(
        ids_type.value_type
    ):
        raise LoaderError(f"{where}: input_ids must be a list of integers, not {ids_type}")
    return np.dtype(str(ids_type.value_type))


def _arrow_token_column(column, where: str) -> TokenColumn:
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if array.null_count:
        raise LoaderError(f"{where}: input_ids has {array.null_count} null rows")
    # straight from the Arrow buffers: pyarrow's to_numpy() imports pandas, which costs ~0.5 s once
    offsets_dtype = np.int64 if str(array.type).startswith("large_list") else np.int32
    buffers = array.buffers()
    offsets = np.frombuffer(
        buffers[1], offsets_dtype, len(array) + 1, array.offset * offsets_dtype().itemsize
    )
    child = array.values
    dtype = np.dtype(str(child.type))
    if dtype.kind not in "ui":
        raise LoaderError(f"{where}: input_ids must hold integers, not {child.type}")
    values = np.frombuffer(child.buffers()[1], dtype, len(child) + child.offset)[child.offset :]
    offsets = offsets.astype(np.int64)
    return TokenColumn(values[offsets[0] : offsets[-1]], offsets - offsets[0])


# ---------------------------------------------------------------- webdataset tar

_BLOCK = 512
_REGULAR = (b"0", b"\0", b"7")


def _tar_members(view: memoryview, where: str) -> Iterator[tuple[str, int, int]]:
    """``(name, start, size)`` of each regular member: offsets, so that no view outlives the walk (a
    memoryview per member kept alive is a GC-tracked object, and thousands of them trigger a full
    collection of the whole interpreter's objects in the middle of the first batch)."""
    size_total = len(view)
    pos = 0
    pending_name: str | None = None
    pending_size: int | None = None
    while True:
        if pos + _BLOCK > size_total:
            raise LoaderError(f"{where}: truncated tar (no end-of-archive marker)")
        header = view[pos : pos + _BLOCK]
        if header[0] == 0 and not any(header):
            return
        if header[257:262] != b"ustar":
            raise LoaderError(f"{where}: corrupt tar header at byte {pos}")
        size = pending_size if pending_size is not None else _tar_number(header[124:136], where, pos)
        start = pos + _BLOCK
        pos = start + -(-size // _BLOCK) * _BLOCK
        if pos > size_total:
            raise LoaderError(f"{where}: truncated tar (member at byte {start - _BLOCK} runs past the end)")
        kind = bytes(header[156:157])
        if kind in (b"x", b"L", b"g"):
            content = view[start : start + size]
            if kind == b"x":
                pax = _pax_records(bytes(content), where)
                pending_name = pax.get("path", pending_name)
                pending_size = _pax_size(pax["size"], where, pos) if "size" in pax else None
            elif kind == b"L":
                pending_name = bytes(content).rstrip(b"\0").decode("utf-8")
            continue
        name = pending_name or _tar_name(header)
        pending_name = pending_size = None
        if kind == b"5":
            continue
        _check_member_name(name, where)
        if kind not in _REGULAR:
            raise LoaderError(f"{where}: tar member {name!r} is a link or special file; refused")
        yield name, start, size


def _tar_number(field: memoryview, where: str, pos: int) -> int:
    raw = bytes(field)
    if raw[0] & 0x80:  # base-256 (GNU) for large sizes
        return int.from_bytes(raw[1:], "big")
    try:
        return int(raw.rstrip(b"\0 ").strip() or b"0", 8)
    except ValueError:
        raise LoaderError(f"{where}: corrupt tar header at byte {pos} (size field {raw!r})") from None


def _tar_name(header: memoryview) -> str:
    name = bytes(header[0:100]).split(b"\0", 1)[0]
    if bytes(header[257:263]) == b"ustar\0":  # POSIX: a prefix field extends the name
        prefix = bytes(header[345:500]).split(b"\0", 1)[0]
        if prefix:
            name = prefix + b"/" + name
    return name.decode("utf-8")


def _pax_records(raw: bytes, where: str) -> dict[str, str]:
    """The ``key=value`` records of a pax header: each ``"<length> key=value\n"``, its length in bytes."""
    records = {}
    pos = 0
    while pos < len(raw) and raw[pos]:  # the rest of the block after the last record is NUL
        length_text, _, _ = raw[pos:].partition(b" ")
        length = int(length_text) if length_text.isdigit() else 0
        if length < len(length_text) + 2 or pos + length > len(raw) or raw[pos + length - 1] != 0x0A:
            raise LoaderError(
                f"{where}: corrupt tar pax header (record at byte {pos}: {raw[pos : pos + 20]!r})"
            )
        key, _, value = raw[pos + len(length_text) + 1 : pos + length - 1].partition(b"=")
        records[key.decode("utf-8")] = value.decode("utf-8")
        pos += length
    return records


def _pax_size(value: str, where: str, pos: int) -> int:
    """A pax header's ``size``: a member's byte count."""
    if not (value.isascii() and value.isdigit()):
        raise LoaderError(f"{where}: corrupt tar pax header before byte {pos} (size {value!r})")
    return int(value)


def _check_member_name(name: str, where: str) -> None:
    parts = name.split("/")
    if name.startswith("/") or ".." in parts or "\\" in name:
        raise LoaderError(f"{where}: tar member {name!r} escapes the archive; refused")


def _decode_tar(data: bytes, where: str, wanted: set[str] | None) -> ShardColumns:
    keys: list[str] = []
    texts: list[str | None] = []
    extras: list[dict | None] = []
    arrays: list[np.ndarray | None] = []
    want_text = wanted is None or "text" in wanted
    want_ids = wanted is None or "input_ids" in wanted
    want_fields = wanted is None or bool(wanted - {"id", "text", "input_ids"})
    view = memoryview(data)
    octets = np.frombuffer(data, np.uint8) if want_ids else None
    for name, start, size in _tar_members(view, where):
        slash = name.rfind("/")
        dot = name.find(".", slash + 1)
        if dot < 0:
            raise LoaderError(f"{where}: tar member {name!r} has no extension")
        key, ext = name[:dot], name[dot + 1 :]
        if not keys or keys[-1] != key:
            keys.append(key)
            texts.append(None)
            extras.append(None)
            arrays.append(None)
        if ext == TAR_TEXT_EXT:
            if want_text:
                texts[-1] = str(view[start : start + size], "utf-8")
        elif ext == TAR_IDS_EXT:
            if want_ids:
                arrays[-1] = _npy_at(octets, view, start, size, f"{where}: {name}")
        elif ext == TAR_FIELDS_EXT:
            if want_fields:
                extras[-1] = json.loads(view[start : start + size].tobytes())
    shard = ShardColumns(len(keys), {"id": keys})
    if want_text:
        shard.fields["text"] = texts
    if want_fields:
        names = sorted({k for e in extras if e for k in e} - {"id", "text", "input_ids"})
        for name in names:
            if wanted is None or name in wanted:
                shard.fields[name] = [e.get(name) if e else None for e in extras]
    if want_ids and any(a is not None for a in arrays):
        missing = [keys[i] for i, a in enumerate(arrays) if a is None]
        if missing:
            raise LoaderError(f"{where}: record {missing[0]!r} has no .{TAR_IDS_EXT} member")
        shard.tokens = TokenColumn.from_arrays(arrays)
    return shard


_NPY_HEADER = re.compile(
    rb"\{'descr': '([<|][ui][1248])', 'fortran_order': False, 'shape': \((\d+),\), \}\s*\n?$"
)


def _npy_at(octets: np.ndarray, view: memoryview, start: int, size: int, where: str) -> np.ndarray:
    """The 1-D integer ``.npy`` member at ``[start, start + size)`` of a tar, parsed from its header (never
    unpickled), as a view of the tar's bytes
    (a numpy view is not GC-tracked, where an array over a memoryview keeps a tracked object alive)."""
    layout = _npy_layout(view[start : start + size], where)
    if layout is None:
        return _load_npy(view[start : start + size], where)
    dtype, count, body = layout
    return octets[start + body : start + body + count * dtype.itemsize].view(dtype)


def _load_npy(raw: memoryview, where: str) -> np.ndarray:
    array = np.load(io.BytesIO(bytes(raw)), allow_pickle=False)
    if array.ndim != 1 or array.dtype.kind not in "ui":
        raise LoaderError(f"{where}: token ids must be a 1-D integer array, got {array.dtype}{array.shape}")
    return array


def _npy_layout(raw: memoryview, where: str) -> tuple[np.dtype, int, int] | None:
    """``(dtype, count, body offset)`` of a 1-D ``.npy`` whose header has the usual fixed form, else None."""
    if bytes(raw[:6]) != b"\x93NUMPY":
        raise LoaderError(f"{where}: not a .npy array")
    major = raw[6]
    if major == 1:
        header_len, start = int.from_bytes(raw[8:10], "little"), 10
    else:
        header_len, start = int.from_bytes(raw[8:12], "little"), 12
    match = _NPY_HEADER.match(bytes(raw[start : start + header_len]))
    if match is None:
        return None
    dtype = np.dtype(match.group(1).decode())
    count = int(match.group(2))
    body = start + header_len
    if len(raw) - body != count * dtype.itemsize:
        raise LoaderError(f"{where}: .npy body holds {len(raw) - body} bytes, header says {count} x {dtype}")
    return dtype, count, body


# ---------------------------------------------------------------- jsonl.zst


# compressed bytes per decompressor call: its output stays below ~32 MiB (a 4-byte block repeats one byte
# 128 KiB times), whatever the shard expands to
ZSTD_FEED = 1 << 10
# a decompression bomb ends in one line instead of the memory: no record of a shard is longer than this, and a
# shard's text is at most this many times its compressed size (text and JSON compress a few times, not 1,000)
MAX_LINE_BYTES = 1 << 26
MAX_ZSTD_RATIO = 1_000


def _zstd_lines(data: bytes, where: str) -> Iterator[bytes]:
    """The lines of concatenated zstd frames, decompressed a little at a time (``ZSTD_FEED``): memory holds
    a line and one call's output, never the whole text; a corrupt or cut stream is a ``LoaderError``."""
    import zstandard

    decompressor = zstandard.ZstdDecompressor()
    frame, fed = decompressor.decompressobj(), False
    parts: list[bytes] = []  # the pieces of a line that spans calls (joined once: linear in its length)
    pending = total = 0  # bytes in ``parts``, and decompressed in all
    budget = max(MAX_ZSTD_RATIO * len(data), MAX_LINE_BYTES)
    view = memoryview(data)
    try:
        for start in range(0, len(data), ZSTD_FEED):
            piece = view[start : start + ZSTD_FEED]
            while piece:
                out = frame.decompress(piece)
                fed = True
                total += len(out)
                if b"\n" in out:
                    lines = b"".join([*parts, out]).split(b"\n")
                    parts = [lines.pop()]
                    pending = len(parts[0])
                    yield from lines
                elif out:
                    parts.append(out)
                    pending += len(out)
                if pending > MAX_LINE_BYTES or total > budget:
                    raise LoaderError(
                        f"{where}: a zstd stream that decompresses to more than "
                        + (f"{MAX_LINE_BYTES:,} bytes in one line" if pending > MAX_LINE_BYTES
                           else f"{MAX_ZSTD_RATIO:,} times its size")
                        + " (a decompression bomb, not a shard)"
                    )  # fmt: skip
                piece = frame.unused_data if frame.eof else b""
                if frame.eof:
                    frame, fed = decompressor.decompressobj(), False
    except zstandard.ZstdError as error:
        raise LoaderError(f"{where}: corrupt zstd stream ({error})") from None
    if fed:
        raise LoaderError(f"{where}: truncated zstd stream")
    yield b"".join(parts)


def _json_ids(value: Any, where: str, number: int) -> np.ndarray:
    """A JSON line's ``input_ids``: a list of integer ids below 2**32 (no float, string or bool passes)."""
    refused = LoaderError(
        f"{where}: line {number}: input_ids must be a list of integer ids in 0..{2**32 - 1}"
    )
    if isinstance(value, list) and bool in map(type, value):  # numpy reads [1, True] as [1, 1]
        raise refused
    try:
        ids = np.asarray(value)
    except ValueError:  # a ragged list of lists
        raise refused from None
    if ids.ndim == 1 and not ids.size:
        return np.zeros(0, dtype=np.uint32)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or ids.min() < 0 or ids.max() >= 2**32:
        raise refused
    return ids.astype(np.uint32)


def _decode_jsonl_zst(data: bytes, where: str, wanted: set[str] | None) -> ShardColumns:
    """A jsonl.zst shard, line by line: only the ``wanted`` fields of each record are kept."""
    fields: dict[str, list] = {}
    ids: list[np.ndarray | None] = []
    keep_ids = wanted is None or "input_ids" in wanted
    rows = 0
    for number, line in enumerate(_zstd_lines(data, where), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as error:
            raise LoaderError(f"{where}: line {number}: malformed JSON ({error})") from None
        for name in row.keys() - fields.keys() - {"input_ids"}:
            if wanted is None or name in wanted:
                fields[name] = [None] * rows
        for name, values in fields.items():
            values.append(row.get(name))
        if keep_ids:
            ids.append(None if row.get("input_ids") is None else _json_ids(row["input_ids"], where, number))
        rows += 1
    if not rows:  # an empty shard has every field asked for, with no values
        fields = {name: [] for name in wanted or () if name != "input_ids"}
    shard = ShardColumns(rows)
    shard.fields = {name: fields[name] for name in sorted(fields)}
    if any(array is not None for array in ids):
        if any(array is None for array in ids):
            raise LoaderError(f"{where}: some records have input_ids and some do not")
        top = max((int(array.max()) for array in ids if array.size), default=0)
        dtype = np.uint16 if top < 2**16 else np.uint32
        shard.tokens = TokenColumn.from_arrays([array.astype(dtype, copy=False) for array in ids])
    return shard
