"""Shard writers: one record stream -> one byte-deterministic shard file in any contract format.

A shard is written to a temporary file and published under its final name only when the ``with`` block
ends cleanly (renamed locally, uploaded in one piece to an object store: ``Storage.publish``), so a crash
never leaves a partial file under a shard name. The bytes depend only on the
records (and the library versions): tar members carry mtime 0, owner 0/0, no user or group names and mode
0644; JSON has sorted keys, compact separators and raw UTF-8.

    with ShardWriter(directory, "train/shard-00000.tar", "webdataset") as writer:
        writer.write({"id": "lts-0-00000001", "text": "...", "source": "lts", "num_words": 312, "meta": {}})
    writer.info  # ShardInfo(path=..., samples=1, words=312, bytes=..., sha256=...)
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import sys
import tarfile
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ltsgen.loaders.contract import (
    FORMATS,
    ROW_GROUP_INDEX_KEY,
    TAR_FIELDS_EXT,
    TAR_IDS_EXT,
    TAR_TEXT_EXT,
    ShardInfo,
    count_words,
)
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.files import sha256_file
from ltsgen.loaders.indexed import RowGroupIndex, row_group_span
from ltsgen.loaders.storage import Storage, as_storage

TOKEN_DTYPES = ("uint16", "uint32")
# Small row groups: a reader decodes only the row groups its next blocks need (a first batch of a few
# documents, or a resume in the middle of a shard, decodes ~14 groups of a 4-shard window, not the window).
# 128 rows cost 7-14% in file size (per-group dictionaries) against 4,096, and nothing measurable in write time.
PARQUET_ROW_GROUP_BYTES = 1 << 20  # flush a row group once this much payload is buffered (long documents)
PARQUET_ROW_GROUP_ROWS = 128
ZSTD_LEVEL = 3


def dump_json(value: Any) -> str:
    """The one JSON spelling used in shards: sorted keys, compact separators, raw UTF-8."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class ShardWriter:
    """Write the records of one shard to ``directory/relpath`` in format ``fmt`` (atomic, deterministic).

    ``directory`` is a local path or a ``Storage`` (any URL the build writes to).

    ``token_dtype`` ("uint16" or "uint32") says the records carry ``input_ids``; then every record must.
    ``row_group_rows``: records per parquet row group at most (default ``PARQUET_ROW_GROUP_ROWS``; fewer:
    a first batch decodes less).
    After the ``with`` block, ``info`` holds the manifest entry (samples, words, tokens, bytes, sha256).
    """

    def __init__(
        self,
        directory: str | os.PathLike | Storage,
        relpath: str,
        fmt: str,
        token_dtype: str | None = None,
        row_group_rows: int | None = None,
    ) -> None:
        if fmt not in FORMATS:
            raise LoaderError(f"{relpath}: unknown shard format {fmt!r} (choose from {', '.join(FORMATS)})")
        if not relpath.endswith("." + FORMATS[fmt]):
            raise LoaderError(f"{relpath}: a {fmt} shard must end in .{FORMATS[fmt]}")
        if token_dtype not in (None, *TOKEN_DTYPES):
            raise LoaderError(f"{relpath}: token dtype must be uint16 or uint32, not {token_dtype!r}")
        self.storage = as_storage(directory)
        self.relpath = relpath
        self.fmt = fmt
        self.token_dtype = token_dtype
        self.row_group_rows = row_group_rows or PARQUET_ROW_GROUP_ROWS
        parts = relpath.split("/")
        self.bucket = parts[1] if len(parts) == 3 else None
        self.samples = 0
        self.words = 0
        self.tokens = 0
        self.info: ShardInfo | None = None
        self._ids: set[str] = set()
        self._publish = None
        self._tmp: Path | None = None
        self._file: BinaryIO | None = None
        self._encoder: _Encoder | None = None

    def __enter__(self) -> ShardWriter:
        self._publish = self.storage.publish(self.relpath)
        self._tmp = self._publish.__enter__()
        self._file = open(self._tmp, "w+b")  # noqa: SIM115 - closed in __exit__; parquet reads back
        self._encoder = _ENCODERS[self.fmt](self._file, self.token_dtype)
        self._encoder.row_group_rows = self.row_group_rows
        return self

    def write(self, record: dict[str, Any]) -> None:
        """Append one contract record (``num_words``/``num_tokens`` are filled in when absent)."""
        record = self._checked(record)
        self._ids.add(record["id"])
        self.samples += 1
        self.words += record["num_words"]
        self.tokens += record.get("num_tokens", 0)
        self._encoder.write(record)

    def _finish_encoding(self, ok: bool) -> None:
        """Close the encoder and the file; an error in closing is raised only when the block ended cleanly."""
        try:
            self._encoder.close()
        except Exception:
            if ok:
                raise
        finally:
            self._file.close()

    def __exit__(self, exc_type, exc, tb) -> None:
        info = None
        try:
            self._finish_encoding(exc_type is None)
            if exc_type is None:  # measured on the finished temporary file: the bytes that get published
                info = ShardInfo(
                    path=self.relpath,
                    samples=self.samples,
                    words=self.words,
                    bytes=self._tmp.stat().st_size,
                    sha256=sha256_file(self._tmp),
                    tokens=self.tokens if self.token_dtype else None,
                    bucket=self.bucket,
                    footer_sha256=self._encoder.footer_sha256,
                )
        except BaseException:
            self._publish.__exit__(*sys.exc_info())
            raise
        self._publish.__exit__(exc_type, exc, tb)
        self.info = info

    def _checked(self, record: dict[str, Any]) -> dict[str, Any]:
        where = f"{self.relpath}: record {self.samples}"
        key = record.get("id")
        if not isinstance(key, str) or not key or "." in key or "/" in key:
            raise LoaderError(f"{where}: id must be a non-empty string without '.' or '/', got {key!r}")
        if key in self._ids:
            raise LoaderError(f"{where}: duplicate id {key!r} in one shard")
        if not isinstance(record.get("text"), str) or not isinstance(record.get("source"), str):
            raise LoaderError(f"{where} ({key}): 'text' and 'source' must be strings")
        unknown = set(record) - {"id", "text", "source", "num_words", "num_tokens", "input_ids", "meta"}
        if unknown:
            raise LoaderError(f"{where} ({key}): fields outside the contract: {sorted(unknown)}")
        record = dict(record)
        words = count_words(record["text"])
        if record.setdefault("num_words", words) != words:
            raise LoaderError(f"{where} ({key}): num_words={record['num_words']} but the text has {words}")
        record["meta"] = record.get("meta") or {}
        if not isinstance(record["meta"], dict):
            raise LoaderError(f"{where} ({key}): meta must be a dict")
        if self.token_dtype is None:
            if "input_ids" in record or "num_tokens" in record:
                raise LoaderError(f"{where} ({key}): token ids given but the writer has no token_dtype")
            return record
        if "input_ids" not in record:
            raise LoaderError(f"{where} ({key}): a tokenized shard needs input_ids in every record")
        ids = np.asarray(record["input_ids"])
        limit = np.iinfo(self.token_dtype).max
        if ids.ndim != 1 or (ids.size and (ids.min() < 0 or ids.max() > limit)):
            raise LoaderError(f"{where} ({key}): input_ids must be a 1-D array of ids in 0..{limit}")
        record["input_ids"] = ids.astype(self.token_dtype)
        if record.setdefault("num_tokens", ids.size) != ids.size:
            raise LoaderError(f"{where} ({key}): num_tokens={record['num_tokens']} but {ids.size} ids")
        return record


def _fields(record: dict[str, Any]) -> dict[str, Any]:
    """The scalar fields and meta (everything but text and token ids), meta as its JSON string."""
    fields = {k: v for k, v in record.items() if k not in ("text", "input_ids")}
    fields["meta"] = dump_json(record["meta"])
    return fields


class _Encoder:
    footer_sha256: str | None = None  # parquet's: the manifest's footer_sha256
    row_group_rows: int  # parquet's: records per row group at most (set by the writer)

    def __init__(self, file: BinaryIO, token_dtype: str | None) -> None:
        self.file = file
        self.token_dtype = token_dtype

    def write(self, record: dict[str, Any]) -> None:
        """Encode one checked record."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class _TarEncoder(_Encoder):
    """webdataset: ``<id>.txt``, ``<id>.json`` and, when tokenized, ``<id>.input_ids.npy``."""

    def __init__(self, file: BinaryIO, token_dtype: str | None) -> None:
        super().__init__(file, token_dtype)
        self.tar = tarfile.open(fileobj=file, mode="w", format=tarfile.PAX_FORMAT)

    def write(self, record: dict[str, Any]) -> None:
        key = record["id"]
        members = [
            (TAR_TEXT_EXT, record["text"].encode("utf-8")),
            (TAR_FIELDS_EXT, dump_json(_fields(record)).encode("utf-8")),
        ]
        if self.token_dtype:
            buffer = io.BytesIO()
            np.save(buffer, record["input_ids"], allow_pickle=False)
            members.append((TAR_IDS_EXT, buffer.getvalue()))
        for ext, data in members:
            info = tarfile.TarInfo(f"{key}.{ext}")
            info.size = len(data)
            info.mtime = 0
            info.mode = 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            self.tar.addfile(info, io.BytesIO(data))

    def close(self) -> None:
        self.tar.close()


class _JsonlZstEncoder(_Encoder):
    """jsonl.zst: one JSON object per line with every field (meta as its JSON string, token ids as a list
    of ints)."""

    def __init__(self, file: BinaryIO, token_dtype: str | None) -> None:
        super().__init__(file, token_dtype)
        import zstandard

        compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_checksum=True, threads=0)
        self.stream = compressor.stream_writer(file, closefd=False)

    def write(self, record: dict[str, Any]) -> None:
        record = {**record, "meta": dump_json(record["meta"])}
        if self.token_dtype:
            record["input_ids"] = record["input_ids"].tolist()
        line = (dump_json(record) + "\n").encode("utf-8")
        self.stream.write(line)

    def close(self) -> None:
        self.stream.close()


class _ParquetEncoder(_Encoder):
    """parquet (zstd): columns id, text, source, num_words, meta (JSON string) [, num_tokens, input_ids].

    The footer lists each row group's sha256 and each record's token count (``indexed.RowGroupIndex``),
    and ``footer_sha256`` is the footer's own, for the manifest: a reader then checks only the row groups
    it decodes. ``input_ids`` elements are non-nullable, which pyarrow decodes a quarter faster.
    """

    def __init__(self, file: BinaryIO, token_dtype: str | None) -> None:
        super().__init__(file, token_dtype)
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.pa, self.pq = pa, pq
        columns = [
            pa.field("id", pa.string()),
            pa.field("text", pa.string()),
            pa.field("source", pa.string()),
            pa.field("num_words", pa.int64()),
            pa.field("meta", pa.string()),
        ]
        if token_dtype:
            element = pa.field("element", pa.from_numpy_dtype(token_dtype), nullable=False)
            columns += [
                pa.field("num_tokens", pa.int64()),
                pa.field("input_ids", pa.list_(element), nullable=False),
            ]
        self.schema = pa.schema(columns)
        self.writer = pq.ParquetWriter(file, self.schema, compression="zstd")
        self.columns: dict[str, list[Any]] = {field.name: [] for field in columns}
        self.buffered = 0
        self.spans: list[tuple[int, int]] = []  # each row group's bytes, as written
        self.sha256: list[str] = []
        self.num_tokens: list[int] = []

    def write(self, record: dict[str, Any]) -> None:
        meta = dump_json(record["meta"])
        for name, values in self.columns.items():
            values.append(meta if name == "meta" else record[name])
        size = len(record["text"].encode("utf-8")) + len(meta.encode("utf-8"))
        if self.token_dtype:
            size += record["input_ids"].nbytes
        self.buffered += size
        if self.buffered >= PARQUET_ROW_GROUP_BYTES or len(self.columns["id"]) >= self.row_group_rows:
            self._flush()

    def _flush(self) -> None:
        pa = self.pa
        if not self.columns["id"]:
            return
        arrays = []
        for field in self.schema:
            values = self.columns[field.name]
            if field.name == "input_ids":
                offsets = np.concatenate([[0], np.cumsum([len(ids) for ids in values])]).astype(np.int32)
                flat = np.concatenate(values) if values else np.zeros(0, self.token_dtype)
                arrays.append(
                    pa.ListArray.from_arrays(
                        _numeric_array(offsets),
                        _numeric_array(flat.astype(self.token_dtype)),
                        type=field.type,
                    )
                )
            elif field.type == pa.string():
                encoded = [value.encode("utf-8") for value in values]
                offsets = np.concatenate([[0], np.cumsum([len(data) for data in encoded])]).astype(np.int32)
                data = b"".join(encoded)
                arrays.append(
                    pa.StringArray.from_buffers(len(values), pa.py_buffer(offsets), pa.py_buffer(data))
                )
            else:
                arrays.append(_numeric_array(np.asarray(values, dtype=field.type.to_pandas_dtype())))
        start = self.file.tell()
        self.writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self.spans.append((start, self.file.tell()))  # one call, one row group (at most 128 records)
        self.sha256.append(hashlib.sha256(self._written(*self.spans[-1])).hexdigest())
        self.num_tokens += self.columns.get("num_tokens", [])
        self.columns = {name: [] for name in self.columns}
        self.buffered = 0

    def close(self) -> None:
        self._flush()
        counts = np.asarray(self.num_tokens, dtype=np.int64) if self.token_dtype else None
        self.writer.add_key_value_metadata(
            {ROW_GROUP_INDEX_KEY: RowGroupIndex(self.sha256, counts).to_json()}
        )
        self.writer.close()
        size = self.file.tell()
        tail = self._written(size - 8, size)
        footer = self._written(size - 8 - int.from_bytes(tail[:4], "little"), size)
        self.footer_sha256 = hashlib.sha256(footer).hexdigest()
        metadata = self.pq.read_metadata(self.pa.BufferReader(b"PAR1" + footer))
        found = [row_group_span(metadata, group) for group in range(metadata.num_row_groups)]
        if found != self.spans:  # the index hashed other bytes than the footer points at
            raise LoaderError(f"pyarrow wrote row groups at {found[:3]}..., not where they were hashed")

    def _written(self, start: int, stop: int) -> bytes:
        self.file.flush()
        return os.pread(self.file.fileno(), stop - start, start)


def _numeric_array(values: np.ndarray):
    """An arrow array over a 1-D numpy array's buffer. The columns are built from their buffers:
    ``pyarrow.array`` imports pandas (0.3 s of CPU in every process that writes a shard) to look for its
    types, even in a list of strings."""
    import pyarrow as pa

    values = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(values.dtype), len(values), [None, pa.py_buffer(values)])


_ENCODERS: dict[str, type[_Encoder]] = {
    "webdataset": _TarEncoder,
    "parquet": _ParquetEncoder,
    "jsonl.zst": _JsonlZstEncoder,
}
