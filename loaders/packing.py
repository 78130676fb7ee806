"""Packing documents into fixed blocks of ``seq_len + 1`` token ids, vectorised with numpy.

How packing composes with exact resume: the packed token stream of an epoch is itself a pure function of
(seed, epoch). The epoch's document order (``order.EpochOrder``) is laid out as one stream, each document
followed by EOS, and block ``i`` is tokens ``[i * (seq_len + 1), (i + 1) * (seq_len + 1))`` of it. The
stream is built window by window (a window of shards is the unit of shuffling), and the offset of each
window in the stream comes from the manifest's token counts, so block ``i`` can be cut without reading
anything before its window. Blocks are then the items of the global batches, exactly as records are in
unpacked mode: the state stays (seed, epoch, blocks consumed), and resume costs one window read.

Position ids (optional) count from 0 at each document start and at each block start, so a model never
sees a position beyond ``seq_len`` in training.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ltsgen.errors import first_line

from .errors import LoaderError
from .formats import TokenColumn


class PackedWindow:
    """The documents of one shuffle window in epoch order, each followed by EOS, cut by token range on demand.

    Only the documents a range touches are gathered, and only their ids need to be decoded (columns that
    decode lazily load those rows first), so the first batch does not wait for a whole window to be
    decoded or packed. ``nominal`` longer than the documents (a skipped corrupt shard) repeats them
    cyclically.
    """

    def __init__(
        self,
        columns: Sequence[TokenColumn],
        column_of: np.ndarray,
        rows: np.ndarray,
        eos_id: int,
        nominal: int | None = None,
        background: Callable[..., Any] | None = None,
    ) -> None:
        """Document ``i`` of the window is row ``rows[i]`` of ``columns[column_of[i]]``; ``background(fn,
        *args)`` runs a call on another thread, to decode some columns' rows while this one decodes others."""
        self.columns = columns
        self.background = background
        self.values = [column.values for column in columns]
        self.column_of, self.rows = column_of, rows
        self.complete = all(column.complete for column in columns)
        none = np.zeros(0, dtype=np.int64)
        starts = np.concatenate([column.offsets[:-1] for column in columns] or [none])
        ends = np.concatenate([column.offsets[1:] for column in columns] or [none])
        first_row = np.cumsum([0] + [len(column) for column in columns], dtype=np.int64)[:-1]
        documents = first_row[column_of] + rows  # index into every column's documents, laid end to end
        self.sources = starts[documents]
        self.lengths = ends[documents] - self.sources + 1
        self.starts = np.zeros(len(rows) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=self.starts[1:])
        self.total = int(self.starts[-1])
        self.nominal = self.total if nominal is None else nominal
        dtype = self.values[0].dtype if columns else np.dtype(np.uint32)
        if not 0 <= eos_id <= np.iinfo(dtype).max:
            raise LoaderError(f"eos_id {eos_id} does not fit the token ids, stored as {dtype}")
        self.eos = np.asarray([eos_id], dtype=dtype)

    def slice(self, lo: int, hi: int, positions: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        """A range of the window's token stream.

        Args:
            lo, hi: the token range ``[lo, hi)``, cyclic beyond ``total`` (up to ``nominal``).
            positions: also give each token's offset in its document.

        Returns:
            ``(ids, offsets)``; ``offsets`` None unless asked.
        """
        ids, offsets = [], []
        while lo < hi:
            start = lo % self.total
            stop = min(self.total, start + hi - lo)
            piece = self._slice(start, stop, positions)
            ids.append(piece[0])
            offsets.append(piece[1])
            lo += stop - start
        return np.concatenate(ids), (np.concatenate(offsets) if positions else None)

    def _slice(self, lo: int, hi: int, positions: bool) -> tuple[np.ndarray, np.ndarray | None]:
        first = int(np.searchsorted(self.starts, lo, side="right")) - 1
        last = int(np.searchsorted(self.starts, hi, side="left"))
        if not self.complete:
            self._load(first, last)
        # the part [a, b) of each document (its ids, then EOS) inside [lo, hi): a long document is cut
        # where the range cuts it, never copied whole for each block it spans
        a = np.zeros(last - first, dtype=np.int64)
        a[0] = lo - int(self.starts[first])
        b = np.minimum(self.lengths[first:last], hi - self.starts[first:last])
        pieces = []
        for doc, start, stop in zip(range(first, last), a.tolist(), b.tolist(), strict=True):
            source, length = int(self.sources[doc]), int(self.lengths[doc])
            pieces.append(self.values[self.column_of[doc]][source + start : source + min(stop, length - 1)])
            if stop == length:
                pieces.append(self.eos)
        ids = np.concatenate(pieces)
        if not positions:
            return ids, None
        counts = b - a
        span = np.arange(int(counts.sum()), dtype=np.int64) + np.repeat(
            a - (np.cumsum(counts) - counts), counts
        )
        return ids, span

    def _load(self, first: int, last: int) -> None:
        """Load the ids of documents ``[first, last)`` in the columns that decode lazily."""
        column_of, rows = self.column_of[first:last], self.rows[first:last]
        indices = sorted(set(column_of.tolist()))  # a few documents (np.unique would import numpy.ma: ~40 ms)
        wanted = [(self.columns[index], rows[column_of == index]) for index in indices]
        if self.background is not None:
            for piece in wanted[1:]:  # the other columns on the reader's other threads meanwhile
                self.background(_decode, [piece])
        for column, its_rows in wanted:  # waits for a row group another thread is decoding, or decodes it
            column.load(its_rows)
        self.complete = all(column.complete for column in self.columns)


def _decode(wanted: list[tuple[TokenColumn, np.ndarray]]) -> None:
    for column, rows in wanted:
        column.decode(rows)


def block_positions(document_offsets: np.ndarray, block: int) -> np.ndarray:
    """Position ids of packed blocks.

    Args:
        document_offsets: each token's offset in its document, for whole blocks.
        block: tokens per block.

    Returns:
        [blocks, block] positions restarting at 0 at document starts and at block starts.
    """
    rows = document_offsets.reshape(-1, block)
    return np.minimum(rows, np.arange(block, dtype=rows.dtype))


def parse_tokenizer(raw: bytes | str, where: str):
    """A ``tokenizer.json``'s bytes (or text) as a ``tokenizers.Tokenizer``, ``without_truncation``;
    ``LoaderError`` naming ``where`` when they are not one (not UTF-8, not JSON, not a tokenizer)."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_str(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
    except Exception as error:  # tokenizers raises a bare Exception
        raise LoaderError(f"{where}: not a tokenizer.json ({first_line(error)})") from None
    return without_truncation(tokenizer)


def without_truncation(tokenizer):
    """``tokenizer`` as documents are tokenized here: whole and unpadded.

    A ``tokenizers.Tokenizer`` with truncation or padding set (a tokenizer.json saved so, as some on the Hub
    are, or a transformers tokenizer's backend after a call with ``truncation=True`` or ``padding=``) would
    cut or pad every document without a word; it is copied with both turned off, the caller's left as it is.
    """
    if getattr(tokenizer, "truncation", None) is None and getattr(tokenizer, "padding", None) is None:
        return tokenizer
    from tokenizers import Tokenizer

    whole = Tokenizer.from_str(tokenizer.to_str())
    whole.no_truncation()
    whole.no_padding()
    return whole


def tokenize_column(texts: Sequence[str], tokenizer, dtype: np.dtype) -> TokenColumn:
    """Token ids of texts, for packing untokenized data.

    Args:
        texts: the texts of a shard.
        tokenizer: a ``tokenizers.Tokenizer`` (no special tokens are added).
        dtype: the storage dtype of the ids.

    Returns:
        The shard's token column.
    """
    encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return TokenColumn.from_arrays([np.asarray(e.ids, dtype=dtype) for e in encodings])


class TextTokens(TokenColumn):
    """The token ids of a shard's texts, tokenized a few records at a time as they are first asked for.

    The records' token counts are known beforehand (counted when the stream was planned, or read from a
    ``token_counts`` file), so a window can be laid out and cut before any text is tokenized: a first batch
    tokenizes the dozen documents it reaches, not the window's shards. Each record's ids are checked against
    its count. Safe to use from several threads: ``decode`` (another thread, ahead) takes ``CHUNK`` records
    at a time, so ``load`` waits for one chunk at most.
    """

    CHUNK = 32

    def __init__(
        self,
        texts: Sequence[str],
        counts: np.ndarray,
        tokenizer,
        dtype: np.dtype,
        where: str,
        counted_by: str,
    ) -> None:
        """``counts[i]``: the number of ids of ``texts[i]``, as ``counted_by`` (named in a mismatch) says."""
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        super().__init__(np.empty(int(offsets[-1]), dtype=dtype), offsets)
        self._texts, self._tokenizer, self._where, self._counted_by = texts, tokenizer, where, counted_by
        self._done = np.zeros(len(counts), dtype=bool)
        self._lock = threading.Lock()
        self.complete = not len(counts)

    def load(self, rows: np.ndarray) -> None:
        if not self.complete:
            self._tokenize(np.asarray(rows, dtype=np.int64))

    def load_all(self) -> None:
        self.decode()

    def decode(self, rows: np.ndarray | None = None) -> None:
        todo = np.arange(len(self._done)) if rows is None else np.asarray(rows, dtype=np.int64)
        for start in range(0, len(todo), self.CHUNK):
            if self.complete:
                return
            self._tokenize(todo[start : start + self.CHUNK])

    def _tokenize(self, rows: np.ndarray) -> None:
        with self._lock:
            rows = sorted({row for row in rows.tolist() if not self._done[row]})
            if not rows:
                return
            texts = [self._texts[row] for row in rows]
            for row, encoding in zip(
                rows, self._tokenizer.encode_batch(texts, add_special_tokens=False), strict=True
            ):
                lo, hi = int(self.offsets[row]), int(self.offsets[row + 1])
                if len(encoding.ids) != hi - lo:
                    raise LoaderError(
                        f"{self._where}: record {row} tokenizes to {len(encoding.ids)} ids, "
                        f"{self._counted_by} counts {hi - lo}"
                    )
                self.values[lo:hi] = encoding.ids
            self._done[rows] = True
            if self._done.all():
                self.complete, self._texts = True, None
