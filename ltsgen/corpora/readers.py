"""Readers: one per corpus layout, each a stream of :class:`Document` in input order (never loaded whole).

Every reader goes through the same :class:`Screen`, which decides what happens to a bad line (malformed
or too deeply nested JSON, missing text field, truncated stream, unreadable parquet: one-line
:class:`BuildError`, or a counted skip with ``skip_bad``), to an unclean document (empty or invalid UTF-8:
a counted skip, or an error with ``strict``) and to a document longer than ``max_chars`` (a counted skip:
tokenizing one costs about 130 bytes of memory per character, so this bounds the memory per document).
The limit holds while reading too: a JSON line longer than ``Screen.line_limit`` bytes, or a text
document longer than ``4 * max_chars`` bytes (more characters than ``max_chars`` whatever they are), is
skipped as it streams by, never held whole; a parquet or Hugging Face text is measured in Arrow and
a long one skipped without being copied into Python.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltsgen.build import BuildError
from ltsgen.corpora.inputs import (
    DECOMPRESSORS,
    InputPath,
    UnreadableInput,
    expand_inputs,
    open_input,
    read_chunks,
    read_lines,
)
from ltsgen.errors import first_line, require
from ltsgen.loaders.contract import MAX_DOC_CHARS

_COMPRESSED = ("", *DECOMPRESSORS)  # a file of each kind, plain or compressed (``inputs.DECOMPRESSORS``)
JSON_SUFFIXES = tuple(f"{kind}{suffix}" for kind in (".json", ".jsonl", ".ndjson") for suffix in _COMPRESSED)
PARQUET_SUFFIXES = (".parquet",)
TEXT_SUFFIXES = (*(f".txt{suffix}" for suffix in _COMPRESSED), ".md")


@dataclass
class Document:
    """One input document: its text, the source's metadata, the record ``source`` and where it was read."""

    text: str
    meta: dict[str, Any]
    source: str
    where: str


@dataclass
class ReaderOptions:
    text_field: str | None = None  # None: the source's own field ("text", or "content" for the Stack)
    subset: str | None = None  # pile: keep only meta.pile_set_name == subset
    separator: str | None = None  # text: split each file into documents on this string
    hf_config: str | None = None
    hf_split: str = "train"
    # options for the filesystem of URL inputs (credentials): never part of a build's identity
    storage_options: dict[str, Any] | None = field(default=None, repr=False)

    def identity(self) -> dict[str, Any]:
        """The options that change what is read (``storage_options`` say only how to reach it)."""
        return {k: v for k, v in vars(self).items() if v is not None and k != "storage_options"}


@dataclass
class Screen:
    """The cleaning policy and its counters (``counts`` goes into the manifest statistics)."""

    skip_bad: bool = False
    strict: bool = False
    max_chars: int = MAX_DOC_CHARS  # 0: no limit
    counts: Counter = field(default_factory=Counter)

    def bad(self, where: str, problem: str, kind: str) -> None:
        if not self.skip_bad:
            raise BuildError(f"{where}: {problem} (use --skip-bad to count and skip such lines)")
        self.counts[f"skipped: {kind}"] += 1

    def nothing_kept(self, inputs: str, what: str) -> str:
        """The one line for inputs of which no document was kept: what was read, and why none of it."""
        skipped = ", ".join(f"{kind} {count:,}" for kind, count in sorted(self.counts.items()))
        return (
            f"{inputs}: no documents to {what}"
            + (f" ({skipped})" if skipped else "")
            + "; nothing was written"
        )

    def unclean(self, where: str, kind: str) -> None:
        if self.strict:
            raise BuildError(f"{where}: {kind} document (--strict)")
        self.counts[f"skipped: {kind}"] += 1

    @property
    def line_limit(self) -> int | None:
        """The longest JSON line read (None: no limit): room for ``max_chars`` characters each written as a
        ``\\uXXXX`` escape, and 1 MiB of other fields."""
        return 6 * self.max_chars + 2**20 if self.max_chars else None

    @property
    def text_limit(self) -> int | None:
        """The longest text document read, in bytes (UTF-8 takes at most 4 per character)."""
        return 4 * self.max_chars if self.max_chars else None

    def too_long(self) -> None:
        """Count a document skipped for its length."""
        self.counts[f"skipped: longer than {self.max_chars:,} characters"] += 1

    def long_line(self) -> None:
        """Count a JSON line skipped unread for its length."""
        self.counts[f"skipped: line longer than {self.line_limit:,} bytes"] += 1

    def clean(self, text: Any, where: str, text_field: str) -> str | None:
        """The text when it is a usable document, else None (after counting or raising)."""
        if text is None:
            self.bad(where, f"missing text field {text_field!r}", "missing text field")
            return None
        if not isinstance(text, str):  # a number, a list, or bytes (a parquet column of type binary)
            self.bad(
                where,
                f"text field {text_field!r} is {type(text).__name__}, not a string",
                "text not a string",
            )
            return None
        if self.max_chars and len(text) > self.max_chars:
            self.too_long()
            return None
        if not text.strip():
            self.unclean(where, "empty")
            return None
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates from JSON escapes: not valid UTF-8
            self.unclean(where, "invalid UTF-8")
            return None
        return text


def utf8_text(raw: bytes, first: bool) -> tuple[str, None] | tuple[None, str]:
    """``(text, None)`` for UTF-8 bytes (a file's first piece may start with a BOM, which is no text), else
    ``(None, the kind of unclean document)``: UTF-16 decodes as UTF-8 when it holds ASCII alone, with a NUL
    byte beside every character, so NUL bytes (which no JSON line or text document holds) say so."""
    if first and raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None, "UTF-16 (its byte-order mark), not UTF-8"
    try:
        text = raw.decode("utf-8-sig" if first else "utf-8")
    except UnicodeDecodeError:
        return None, "invalid UTF-8"
    if "\x00" in text:
        return None, "NUL bytes (UTF-16 or binary), not UTF-8 text"
    return text, None


def slug(name: str) -> str:
    """A record ``source`` from a free name: lower case, runs of other characters as '-'."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "unnamed"


def json_safe(value: Any) -> Any:
    """Metadata as plain JSON values (dates and other objects as their string form)."""
    return json.loads(json.dumps(value, default=str, ensure_ascii=False))


def _json_objects(path: InputPath, screen: Screen) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, object)`` for each JSON line of a file, plain or compressed; blank lines are ignored."""
    try:
        for number, line in read_lines(path, screen.line_limit):
            where = f"{path}:{number}"
            if line is None:
                screen.long_line()
                continue
            if not line.strip():
                continue
            decoded, problem = utf8_text(line, number == 1)
            if decoded is None:
                screen.unclean(where, problem)
                continue
            try:
                obj = json.loads(decoded)
            except json.JSONDecodeError as error:
                screen.bad(where, f"malformed JSON ({error.msg} at column {error.colno})", "malformed JSON")
                continue
            except RecursionError:
                screen.bad(where, "JSON nested too deeply to read", "JSON nested too deeply")
                continue
            except ValueError as error:  # an integer of more digits than Python converts
                screen.bad(where, f"malformed JSON ({str(error).split(':')[0]})", "malformed JSON")
                continue
            if not isinstance(obj, dict):
                screen.bad(where, "malformed JSON (a line must hold one JSON object)", "malformed JSON")
                continue
            yield where, obj
    except UnreadableInput as error:
        screen.bad(error.where, error.problem, error.kind)


def _meta_of(obj: dict[str, Any], text_field: str) -> dict[str, Any]:
    """Every field but the text; a nested ``meta`` object is flattened into it."""
    meta = {k: v for k, v in obj.items() if k not in (text_field, "meta")}
    if isinstance(obj.get("meta"), dict):
        meta.update(obj["meta"])
    elif "meta" in obj:
        meta["meta"] = obj["meta"]
    return meta


def _json_reader(record_source: Callable[[dict[str, Any]], str], default_field: str = "text"):
    def read(inputs: list[str], options: ReaderOptions, screen: Screen) -> Iterator[Document]:
        text_field = options.text_field or default_field
        for path in expand_inputs(inputs, JSON_SUFFIXES, options.storage_options):
            for where, obj in _json_objects(path, screen):
                meta = _meta_of(obj, text_field)
                if options.subset is not None and meta.get("pile_set_name") != options.subset:
                    screen.counts["other subsets"] += 1
                    continue
                text = screen.clean(obj.get(text_field), where, text_field)
                if text is not None:
                    yield Document(text, meta, record_source(meta), where)

    return read


def _pile_source(meta: dict[str, Any]) -> str:
    name = meta.get("pile_set_name")
    return slug(name) if isinstance(name, str) else "pile"


def _arrow_rows(
    batch: Any, text_field: str, screen: Screen, name: str, first: int
) -> Iterator[tuple[str, Any, dict[str, Any]]]:
    """``(where, text, other columns)`` for the rows of a pyarrow batch or table, numbered from ``first``.

    A text over ``screen.max_chars`` characters is measured in Arrow (``utf8_length``) and skipped, counted,
    without being copied into Python; only the other rows are converted.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    lengths: list[int | None] = [None] * batch.num_rows
    if screen.max_chars and text_field in batch.schema.names:
        column = batch.column(text_field)
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            lengths = pc.utf8_length(column).to_pylist()
    kept = []
    for index, length in enumerate(lengths):
        if length is not None and length > screen.max_chars:
            screen.too_long()
        else:
            kept.append(index)
    for index, values in zip(kept, batch.take(kept).to_pylist(), strict=True):
        yield f"{name}:row {first + index}", values.pop(text_field, None), values


def read_stack(inputs: list[str], options: ReaderOptions, screen: Screen) -> Iterator[Document]:
    """The Stack's parquet files: ``content`` plus every other column as metadata, in batches of 1,024 rows.

    Arrow decodes a batch before it can be measured (a parquet page is read whole), so a text over
    ``--max-doc-chars`` is held once, as UTF-8 bytes in Arrow memory, and never as a Python string.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    text_field = options.text_field or "content"
    for path in expand_inputs(inputs, PARQUET_SUFFIXES, options.storage_options):
        try:
            parquet = pq.ParquetFile(open_input(path))
            if text_field not in parquet.schema_arrow.names:
                screen.bad(
                    str(path), f"missing text field {text_field!r} (no such column)", "missing text field"
                )
                continue
            row = 1
            for batch in parquet.iter_batches(batch_size=1024):
                for where, text, values in _arrow_rows(batch, text_field, screen, str(path), row):
                    text = screen.clean(text, where, text_field)
                    if text is not None:
                        yield Document(text, json_safe(values), "stack", where)
                row += batch.num_rows
        except (pa.ArrowException, OSError) as error:
            screen.bad(str(path), f"not a readable parquet file ({first_line(error)})", "unreadable parquet")


def read_hf(inputs: list[str], options: ReaderOptions, screen: Screen) -> Iterator[Document]:
    """Any Hugging Face dataset, by Hub name or local folder, streamed with ``datasets.load_dataset`` as
    Arrow tables of 256 rows: a text over ``--max-doc-chars`` is skipped without being copied into Python
    (``datasets`` still reads it in its builder's own blocks: a parquet row group's batch, a JSON block)."""
    datasets = require("datasets", "corpora", "Hugging Face dataset inputs (--source hf)")

    text_field = options.text_field or "text"
    for name in inputs:
        try:
            stream = datasets.load_dataset(name, options.hf_config, split=options.hf_split, streaming=True)
            source = slug(Path(name.rstrip("/")).name)
            row = 1
            for table in stream.with_format("arrow").iter(batch_size=256):
                for where, text, values in _arrow_rows(table, text_field, screen, name, row):
                    text = screen.clean(text, where, text_field)
                    if text is not None:
                        yield Document(text, json_safe(values), source, where)
                row += table.num_rows
        except BuildError:
            raise
        except Exception as error:  # datasets raises many types (network, config, file errors)
            raise BuildError(f"{name}: cannot stream this dataset ({first_line(error)})") from None


def _split_stream(path: InputPath, separator: str, limit: int | None = None) -> Iterator[bytes | None]:
    """The documents of one text file, split on ``separator`` while streaming (linear in the file size: a
    long document's pieces are joined once); one longer than ``limit`` bytes is None, never held whole."""
    mark = separator.encode("utf-8")
    pending: list[bytes] = []
    size = 0
    dropping = False  # the current document is already longer than limit
    tail = b""  # the last len(mark) - 1 bytes read, where a separator cut by a chunk boundary starts
    for chunk in read_chunks(path):
        if mark not in tail + chunk:
            tail = (tail + chunk)[-(len(mark) - 1) :] if len(mark) > 1 else b""
            if not dropping:
                pending.append(chunk)
                size += len(chunk)
                if limit is not None and size > limit + len(mark):  # the mark may end in the next chunk
                    pending, size, dropping = [], 0, True
            continue
        joined = tail + chunk if dropping else b"".join([*pending, chunk])  # tail: where a mark may start
        parts = joined.split(mark)
        last = parts.pop()
        for number, part in enumerate(parts):
            yield None if (dropping and number == 0) or (limit is not None and len(part) > limit) else part
        pending, size, dropping = [last], len(last), False
        tail = last[-(len(mark) - 1) :] if len(mark) > 1 else b""
    if not dropping:
        joined = b"".join(pending)
        yield None if limit is not None and len(joined) > limit else joined
    else:
        yield None


def _whole_file(path: InputPath, limit: int | None) -> Iterator[bytes | None]:
    """The file as one document, or None once it is longer than ``limit`` bytes (read no further)."""
    pieces, size = [], 0
    for chunk in read_chunks(path):
        pieces.append(chunk)
        size += len(chunk)
        if limit is not None and size > limit:
            yield None
            return
    yield b"".join(pieces)


def read_text(inputs: list[str], options: ReaderOptions, screen: Screen) -> Iterator[Document]:
    """Plain text files or folders: one document per file, or per ``separator``-delimited piece."""
    for path in expand_inputs(inputs, TEXT_SUFFIXES, options.storage_options):
        try:
            pieces = (
                _split_stream(path, options.separator, screen.text_limit)
                if options.separator
                else _whole_file(path, screen.text_limit)
            )
            for number, raw in enumerate(pieces, 1):
                where = f"{path}:document {number}"
                if raw is None:
                    screen.too_long()
                    continue
                text, problem = utf8_text(raw, number == 1)
                if text is None:
                    screen.unclean(where, problem)
                    continue
                text = screen.clean(text.strip() if options.separator else text, where, "text")
                if text is not None:
                    yield Document(text, {"file": path.name, "document": number}, "text", where)
        except UnreadableInput as error:
            screen.bad(error.where, error.problem, error.kind)


Reader = Callable[[list[str], ReaderOptions, Screen], Iterator[Document]]

SOURCES: dict[str, Reader] = {
    "c4": _json_reader(lambda meta: "c4"),
    "pile": _json_reader(_pile_source),
    "redpajama-arxiv": _json_reader(lambda meta: "arxiv"),
    "stack": read_stack,
    "hf": read_hf,
    "text": read_text,
}


def input_files(source: str, inputs: list[str], options: ReaderOptions | None = None) -> list[InputPath]:
    """The files a file-based source reads for ``inputs`` (folders filtered by the source's suffixes)."""
    suffixes = {"stack": PARQUET_SUFFIXES, "text": TEXT_SUFFIXES}.get(source, JSON_SUFFIXES)
    return expand_inputs(inputs, suffixes, options.storage_options if options else None)


def dataset_source(source: str, options: ReaderOptions, inputs: list[str]) -> str:
    """The manifest's ``source`` for a build: what its records are (c4, arxiv, github, ...)."""
    if source == "pile":
        return slug(options.subset) if options.subset else "pile"
    if source == "hf":
        return slug(Path(inputs[0].rstrip("/")).name)
    return {"redpajama-arxiv": "arxiv"}.get(source, source)


def read_documents(
    source: str, inputs: list[str], options: ReaderOptions, screen: Screen
) -> Iterator[Document]:
    """The documents of ``inputs`` read as ``source`` (one of :data:`SOURCES`)."""
    if source not in SOURCES:
        raise BuildError(f"unknown source {source!r} (choose from {', '.join(SOURCES)})")
    return SOURCES[source](inputs, options, screen)
