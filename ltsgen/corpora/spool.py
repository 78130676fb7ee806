"""Tokenized chunks: the intermediate files between reading and bucketing (Arrow IPC files).

A chunk holds consecutive input documents with their ids, text hashes, metadata and token ids, so that the
bucketing step, which needs every document's length first, reads back only what each shard needs. The
spool is a ``Storage`` folder inside the build (``DIR/.ltsgen/chunks``): a local one is memory-mapped; on
an object store a chunk is published whole like a shard, and read back with only the columns asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from ltsgen.loaders.storage import Storage
from ltsgen.tokenizer import encode_arrays

SUMMARY_COLUMNS = ("id", "source", "num_tokens")


def chunk_name(index: int) -> str:
    """The file name of chunk ``index`` in the spool."""
    return f"chunk-{index:06d}.arrow"


def document_id(source: str, digest: str) -> str:
    """``<source>-<first 16 hex digits of sha1(text)>``: stable, and unique once exact duplicates are gone."""
    return f"{source}-{digest[:16]}"


def text_digest(text: str) -> str:
    """The hash that identifies a text: exact duplicates share it, ids are made from it."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


Chunk = Sequence[tuple[str, dict[str, Any], str, str]]  # (text, meta, source, digest) per document


def write_chunk(spool: Storage, index: int, tokenizer, documents: Chunk) -> tuple[int, int]:
    """Tokenize the documents and publish them as chunk ``index``; return (documents, tokens)."""
    texts = [document[0] for document in documents]
    digests = [document[3] for document in documents]
    values, offsets = encode_arrays(tokenizer, texts)
    table = pa.table(
        {
            "id": [document_id(source, digest) for _, _, source, digest in documents],
            "sha1": digests,
            "source": [document[2] for document in documents],
            "text": pa.array(texts, pa.large_string()),
            "meta": [json.dumps(meta, sort_keys=True, ensure_ascii=False) for _, meta, _, _ in documents],
            "num_tokens": np.diff(offsets),
            "input_ids": pa.LargeListArray.from_arrays(offsets, values),
        }
    )
    with spool.publish(chunk_name(index)) as tmp:
        with pa.OSFile(str(tmp), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
    return len(texts), int(offsets[-1])


def read_chunk(spool: Storage, index: int, columns: Sequence[str] | None = None) -> pa.Table:
    """Chunk ``index`` (or some of its columns): memory-mapped from a local spool (the map lives as long
    as the table), else read with only those columns' bytes."""
    name = chunk_name(index)
    if spool.is_local:
        table = pa.ipc.open_file(pa.memory_map(str(spool.local_path(name)))).read_all()
        return table if columns is None else table.select(list(columns))
    with spool.open(name) as handle:
        reader = pa.ipc.open_file(handle)
        if columns is not None:
            fields = [reader.schema.get_field_index(column) for column in columns]
            reader = pa.ipc.open_file(handle, options=pa.ipc.IpcReadOptions(included_fields=fields))
            return reader.read_all().select(list(columns))
        return reader.read_all()


def token_arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of the chunk's ``input_ids`` column without copying per document."""
    column = table.column("input_ids").combine_chunks()
    offsets = column.offsets.to_numpy()
    return column.flatten().to_numpy(), offsets - offsets[0]
