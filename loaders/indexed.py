"""Parquet shards checked a row group at a time: a first batch reads and hashes only what it decodes.

The shard writer hashes each row group as it writes it and lists the digests, with each record's token
count, in the footer (``RowGroupIndex``); the manifest holds the footer's sha256 (``footer_sha256``). A
reader then checks the footer against the manifest, lays a window out from the counts, and reads and checks
each row group just before it decodes it (``IndexedParquet``), instead of hashing the whole shard first.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .contract import ROW_GROUP_INDEX_KEY
from .errors import LoaderError
from .formats import RowGroupTexts, RowGroupTokens, ids_dtype

# A request to an object store costs about as long as a few MiB take to arrive, so a remote shard is read
# in few requests: its last TAIL_READ bytes at once (the footer, and a whole shard up to this size), then
# the row groups a decode needs, ranges less than RANGE_GAP apart read as one (the gap read too).
TAIL_READ = 4 << 20
RANGE_GAP = 1 << 20


@dataclass
class RowGroupIndex:
    """What a parquet shard's footer says of its row groups (entry ``contract.ROW_GROUP_INDEX_KEY``).

    The sha256 of each row group's bytes (``row_group_span``), and each record's token count when the shard
    is tokenized. The manifest holds the footer's own sha256, so a reader that has checked the footer
    checks each row group when it decodes it, and lays a window out from the counts without decoding any.
    """

    sha256: list[str]
    num_tokens: np.ndarray | None = None  # int64, one per record

    def to_json(self) -> str:
        """The footer entry: JSON, the counts as base64 of little-endian uint32."""
        data: dict = {"sha256": self.sha256}
        if self.num_tokens is not None:
            data["num_tokens"] = base64.b64encode(self.num_tokens.astype("<u4").tobytes()).decode("ascii")
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: bytes | None, where: str, groups: int, rows: int) -> RowGroupIndex:
        """Parse a footer entry (``LoaderError`` naming the shard when it is missing or does not fit).

        Args:
            raw: the entry, None when the footer has none.
            where: the shard, for the messages.
            groups, rows: the shard's row groups and records, as its footer says.

        Returns:
            The index.
        """
        if raw is None:
            raise LoaderError(
                f"{where}: the footer has no row group index, though the manifest lists its sha256"
            )
        try:
            data = json.loads(raw)
            sha256, counts = data["sha256"], data.get("num_tokens")
            num_tokens = None if counts is None else np.frombuffer(base64.b64decode(counts), "<u4")
        except (ValueError, KeyError, TypeError) as error:
            raise LoaderError(
                f"{where}: unreadable row group index ({type(error).__name__}: {error})"
            ) from None
        if (
            not isinstance(sha256, list)
            or len(sha256) != groups
            or (num_tokens is not None and len(num_tokens) != rows)
        ):
            raise LoaderError(f"{where}: the row group index does not fit the footer's {groups} row groups")
        return cls(sha256, None if num_tokens is None else num_tokens.astype(np.int64))


def row_group_span(metadata, group: int) -> tuple[int, int]:
    """The bytes ``[start, stop)`` of a row group: its column chunks, which are contiguous.

    Args:
        metadata: a pyarrow ``FileMetaData``.
        group: the row group.

    Returns:
        The byte range in the file.
    """
    row_group = metadata.row_group(group)
    start, stop = None, 0
    for number in range(row_group.num_columns):
        chunk = row_group.column(number)
        first = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
        start = first if start is None else min(start, first)
        stop = max(stop, first + chunk.total_compressed_size)
    return start or 0, stop


class ShardBytes:
    """A shard's bytes in memory (``data``), or read a range at a time from a local file (``path``) or a
    remote one (``ranges(spans)``: the bytes of each ``(start, stop)``, requested at once; ``size`` bytes).

    ``buffer`` has the shard's size; for a file it starts as zeros (pages the reads have not touched cost
    no memory) and ``read`` fills the ranges asked for, so a reader can check and decode a few row groups
    without reading the rest. The bytes decoded are those read and checked, whatever happens to the file.
    """

    def __init__(
        self,
        where: str,
        *,
        data: bytes | None = None,
        path: str | os.PathLike | None = None,
        ranges: Callable[[list[tuple[int, int]]], list[bytes]] | None = None,
        size: int | None = None,
    ) -> None:
        self.where, self.path, self.ranges = where, path, ranges
        self._held: list[tuple[int, int]] = []  # remote ranges read already
        if data is not None:
            self.buffer, self.size = data, len(data)
        elif ranges is not None:
            self.buffer, self.size = np.zeros(size, np.uint8), size
        else:
            try:
                self.size = os.stat(path).st_size
            except FileNotFoundError:
                raise LoaderError(f"{where}: not found") from None
            self.buffer = np.zeros(self.size, np.uint8)

    def read(self, start: int, stop: int) -> memoryview:
        """Bytes ``[start, stop)`` (read first, for a file or a remote shard).

        Args:
            start, stop: the range, within ``size``.

        Returns:
            A view of them in ``buffer``.
        """
        view = memoryview(self.buffer)[start:stop]
        if self.ranges is not None:
            self.fetch([(start, stop)])
            return view
        if self.path is None:
            return view
        try:
            with open(self.path, "rb", buffering=0) as handle:
                done = 0
                while done < len(view):
                    got = os.preadv(handle.fileno(), [view[done:]], start + done)
                    if not got:
                        raise LoaderError(
                            f"{self.where}: ends at byte {start + done}, not {self.size} (truncated)"
                        )
                    done += got
        except OSError as error:
            raise LoaderError(f"{self.where}: cannot be read ({type(error).__name__}: {error})") from None
        return view

    def fetch(self, spans: list[tuple[int, int]]) -> None:
        """Read the ranges of a remote shard not read yet, all in one call (concurrent requests; ranges
        less than ``RANGE_GAP`` apart as one), so that later ``read`` calls of them need none; nothing for a
        shard in memory or in a local file.

        Args:
            spans: ``(start, stop)`` ranges within ``size``.
        """
        ranges = self.ranges
        if ranges is None:
            return
        missing = [(start, stop) for start, stop in spans if not self._holds(start, stop)]
        if missing:
            from fsspec.utils import merge_offset_ranges

            _, starts, stops = merge_offset_ranges(
                [""] * len(missing), *map(list, zip(*missing, strict=True)), max_gap=RANGE_GAP
            )
            merged = list(zip(starts, stops, strict=True))
            for (start, stop), data in zip(merged, ranges(merged), strict=True):
                self.buffer[start:stop] = np.frombuffer(data, np.uint8)
            self._held += merged

    def fill(self, data: bytes) -> None:
        """Hold the whole shard (fetched and checked whole meanwhile): later reads need no request.

        Args:
            data: the shard's bytes, of ``size``.
        """
        self.buffer[:] = np.frombuffer(data, np.uint8)
        self.ranges = None

    def _holds(self, start: int, stop: int) -> bool:
        return any(lo <= start and stop <= hi for lo, hi in self._held)


class IndexedParquet:
    """The lazily decoded ``input_ids`` or ``text`` of a parquet shard whose footer lists its row groups'
    sha256.

    Opening reads the footer and checks it against the manifest's ``footer_sha256``; each row group's bytes
    are then read and checked against the footer's sha256 for it just before they are decoded. A first
    batch checks the few row groups it decodes, not the whole shard.
    """

    def __init__(self, source: ShardBytes, footer_sha256: str) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.source, self.where = source, source.where
        size = source.size
        source.fetch([(size - min(size, TAIL_READ), size)])  # the footer (a small shard whole), at once
        tail = bytes(source.read(size - 8, size)) if size >= 12 else b""
        if tail[-4:] != b"PAR1":
            raise LoaderError(f"{self.where}: not a parquet file (no footer)")
        start = size - 8 - int.from_bytes(tail[:4], "little")
        if start < 4:
            raise LoaderError(f"{self.where}: corrupt parquet footer length")
        digest = hashlib.sha256(source.read(start, size)).hexdigest()
        if digest != footer_sha256:
            raise LoaderError(
                f"{self.where}: footer sha256 {digest[:16]}... does not match the manifest's "
                f"{footer_sha256[:16]}... (corrupt or changed shard)"
            )
        try:
            self.parquet = pq.ParquetFile(pa.BufferReader(pa.py_buffer(source.buffer)))
        except Exception as error:
            raise LoaderError(f"{self.where}: corrupt parquet ({type(error).__name__}: {error})") from None
        metadata = self.parquet.metadata
        self.num_rows = metadata.num_rows
        entry = (metadata.metadata or {}).get(ROW_GROUP_INDEX_KEY.encode())
        self.index = RowGroupIndex.from_json(entry, self.where, metadata.num_row_groups, self.num_rows)

    def tokens(self) -> RowGroupTokens:
        """The ``input_ids`` column, each row group checked when it is decoded."""
        if self.index.num_tokens is None or "input_ids" not in self.parquet.schema_arrow.names:
            raise LoaderError(f"{self.where}: not tokenized (no input_ids and token counts)")
        dtype = ids_dtype(self.parquet.schema_arrow.field("input_ids").type, self.where)
        offsets = np.zeros(self.num_rows + 1, dtype=np.int64)
        np.cumsum(self.index.num_tokens, out=offsets[1:])
        return RowGroupTokens(self.parquet, offsets, dtype, self.where, self._check, self.fetch)

    def texts(self) -> RowGroupTexts:
        """The ``text`` column, each row group checked when it is decoded."""
        if "text" not in self.parquet.schema_arrow.names:
            raise LoaderError(f"{self.where}: no text column")
        return RowGroupTexts(self.parquet, self.where, self._check)

    def fetch(self, groups: list[int]) -> None:
        """Read the bytes of row groups ``groups`` of a remote shard at once (``ShardBytes.fetch``), ahead
        of their checks.

        Args:
            groups: row group numbers.
        """
        self.source.fetch([row_group_span(self.parquet.metadata, group) for group in groups])

    def check_row_groups(self) -> None:
        """Read every row group and refuse the shard unless each has the footer's sha256 for it."""
        for group in range(self.parquet.metadata.num_row_groups):
            self._check(group)

    def _check(self, group: int) -> None:
        """Read row group ``group`` and refuse it unless its bytes have the footer's sha256 for them."""
        start, stop = row_group_span(self.parquet.metadata, group)
        digest = hashlib.sha256(self.source.read(start, stop)).hexdigest()
        if digest != self.index.sha256[group]:
            raise LoaderError(
                f"{self.where}: row group {group}: sha256 {digest[:16]}... does not match the footer's "
                f"(corrupt or changed shard)"
            )
