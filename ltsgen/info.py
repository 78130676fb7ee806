"""What a dataset directory holds, read from its manifest and shards: ``dataset_info(DIR)``.

Per split: records, tokens (when the shards are tokenized, or ids are stored beside the text by ``ltsgen
tokenizer --data``), shards, bytes, buckets, the percentiles of the record lengths (words, and tokens when
known) and the first record, its text cut short. With ``verify`` every shard's bytes, the stored ids'
shards' and the tokenizer's included, are hashed against the manifest's sha256.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from ltsgen.card import ordered_splits
from ltsgen.loaders.contract import Manifest, ShardInfo, bucket_order, read_manifest
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.formats import decode_shard
from ltsgen.loaders.storage import Storage, as_storage

PERCENTILES = (10, 50, 90, 99)
FIRST_RECORD_CHARS = 200


def dataset_info(
    directory: str | Path | Storage, *, verify: bool = False, progress: bool = False
) -> dict[str, Any]:
    """Everything ``ltsgen info`` shows, as a JSON-safe dict.

    Args:
        directory: a dataset directory (a path, URL or ``Storage``).
        verify: hash every shard (and the tokenizer) and compare with the manifest (``mismatched`` lists
            those that differ; their lengths are not read).
        progress: a progress bar (on stderr) over the files ``verify`` hashes.

    Returns:
        ``{"location", "source", "format", "builder", "tokenizer", "splits": {split: {...}}}``, with
        ``"tokenizer_found"`` where the manifest names a tokenizer file, and with ``verify`` also
        ``"verified"`` (shards hashed) and ``"mismatched"`` (their paths).
    """
    store = as_storage(directory)
    manifest = read_manifest(store)
    builder = manifest.builder
    info: dict[str, Any] = {
        "location": store.location(),
        "source": manifest.source,
        "format": manifest.format,
        "builder": f"{builder.get('name', '?')} {builder.get('version', '')}".strip(),
        "tokenizer": manifest.tokenizer,
    }
    tokenizer = manifest.tokenizer or {}
    if tokenizer.get("path"):  # the file a run trains with, and that reads stored ids
        info["tokenizer_found"] = store.exists(tokenizer["path"])
    mismatched: set[str] = set()
    stored = _stored_ids(manifest)
    if verify:
        shards = [
            (shard.path, shard.sha256)
            for _, split_shards in ordered_splits(manifest)
            for shard in split_shards
        ]
        shards += [(entry["path"], entry["sha256"]) for entry in stored.values()]
        if tokenizer.get("path") and tokenizer.get("sha256"):
            shards.append((tokenizer["path"], tokenizer["sha256"]))
        # the bar is closed before an error is raised, which then stands on a line of its own
        with tqdm(shards, desc="verify", unit="file", disable=not progress) as hashed:
            mismatched = {path for path, sha256 in hashed if store.sha256(path) != sha256}
        info["verified"] = len(shards)
        info["mismatched"] = [path for path, _ in shards if path in mismatched]
    info["splits"] = {
        split: _split(store, manifest, shards, mismatched) for split, shards in ordered_splits(manifest)
    }
    return info


def _split(store: Storage, manifest: Manifest, shards: list[ShardInfo], skip: set[str]) -> dict[str, Any]:
    tokenized = bool(shards) and all(shard.tokens is not None for shard in shards)
    stored = _stored_ids(manifest)
    token_shards = [stored.get(shard.path) for shard in shards] if not tokenized and stored else []
    attached = bool(token_shards) and all(token_shards)  # the split's ids, stored beside its text
    columns = ["num_words"] + (["num_tokens"] if tokenized else [])
    lengths: dict[str, list[int]] = {column: [] for column in [*columns, "num_tokens"]}
    first = None
    for shard in (shard for shard in shards if shard.path not in skip):
        wanted = columns + (["id", "text"] if first is None else [])
        decoded = decode_shard(
            store.read_bytes(shard.path), manifest.format, store.location(shard.path), wanted
        )
        if not decoded.num_rows:  # an empty shard: no lengths (a tar shard then names no column at all)
            continue
        missing = next((column for column in wanted if column not in decoded.fields), None)
        if missing is not None:  # a file that is not what the manifest says (its hash changed with it)
            raise LoaderError(f"{store.location(shard.path)}: no {missing!r} column, as every record has")
        for column in columns:
            lengths[column] += decoded.fields[column]
        if first is None and decoded.num_rows:
            text = decoded.fields["text"][0]
            cut = (
                text[:FIRST_RECORD_CHARS].rsplit(" ", 1)[0] + " ..."
                if len(text) > FIRST_RECORD_CHARS
                else text
            )
            first = {"id": decoded.fields["id"][0], "text": cut, "chars": len(text)}
    for entry in token_shards if attached else []:
        if entry["path"] not in skip:
            where = store.location(entry["path"])
            decoded = decode_shard(store.read_bytes(entry["path"]), "parquet", where, ["num_tokens"])
            lengths["num_tokens"] += decoded.fields["num_tokens"]
    tokens = sum(shard.tokens for shard in shards) if tokenized else None
    if attached:
        tokens = sum(entry["tokens"] for entry in token_shards)
    return {
        "records": sum(shard.samples for shard in shards),
        "tokens": tokens,
        "words": sum(shard.words for shard in shards),
        "shards": len(shards),
        "bytes": sum(shard.bytes for shard in shards),
        "buckets": sorted({shard.bucket for shard in shards if shard.bucket}, key=bucket_order),
        "words_per_record": _percentiles(lengths["num_words"]),
        "tokens_per_record": _percentiles(lengths["num_tokens"]) if tokenized or attached else None,
        "first_record": first,
    }


def _stored_ids(manifest: Manifest) -> dict[str, dict[str, Any]]:
    """The token shards ``ltsgen tokenizer --data`` stored beside the text: shard path -> entry."""
    return (manifest.tokenizer or {}).get("shards") or {}


def _percentiles(values: list[int]) -> dict[str, int] | None:
    if not values:
        return None
    found = np.percentile(np.asarray(values), PERCENTILES, method="inverted_cdf")  # nearest rank
    return {
        "min": int(min(values)),
        **{f"p{p}": int(v) for p, v in zip(PERCENTILES, found, strict=True)},
        "max": int(max(values)),
    }
