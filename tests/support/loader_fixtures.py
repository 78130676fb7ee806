"""Dataset directories for the loader tests, written through the real shard writer and manifest."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

import ltsgen.shards
from ltsgen.loaders.contract import FORMATS, Manifest, shard_relpath, write_manifest
from ltsgen.shards import ShardWriter

EOS = 0


def document(index: int, length: int) -> dict:
    """Record ``index``: its token ids encode the record index, so any output can be traced back."""
    ids = (np.arange(length, dtype=np.int64) % 97) + 1 + 100 * (index % 600)
    return {"id": f"doc-{index:06d}", "text": f"document {index}", "source": "lts", "input_ids": ids}


def make_dataset(
    directory: Path,
    shard_sizes: list[int],
    fmt: str = "parquet",
    *,
    lengths=None,
    split: str = "train",
    buckets: list[str] | None = None,
    tokenized: bool = True,
    row_group_rows: int | None = None,
    first_index: int = 0,
    tokenizer_sha256: str = "",
) -> Path:
    """Write a dataset with ``shard_sizes[i]`` records in shard ``i`` (in bucket ``buckets[i]`` if given),
    parquet shards in row groups of ``row_group_rows`` records (default: the writer's), the records
    numbered from ``first_index``, the manifest naming a tokenizer of sha256 ``tokenizer_sha256``."""
    infos = []
    index = first_index
    default_rows = ltsgen.shards.PARQUET_ROW_GROUP_ROWS
    ltsgen.shards.PARQUET_ROW_GROUP_ROWS = row_group_rows or default_rows
    try:
        for number, size in enumerate(shard_sizes):
            bucket = buckets[number] if buckets else None
            relpath = shard_relpath(split, number, fmt, bucket)
            with ShardWriter(directory, relpath, fmt, token_dtype="uint16" if tokenized else None) as writer:
                for _ in range(size):
                    record = document(
                        index, 3 + index % 5 if lengths is None else int(lengths[index - first_index])
                    )
                    if not tokenized:
                        record.pop("input_ids")
                    writer.write(record)
                    index += 1
            infos.append(writer.info)
    finally:
        ltsgen.shards.PARQUET_ROW_GROUP_ROWS = default_rows
    manifest = Manifest(
        source="lts",
        format=fmt,
        splits={split: infos},
        builder={"name": "test", "version": "0", "arguments": {}},
        tokenizer={"path": "tokenizer.json", "sha256": tokenizer_sha256, "vocab_size": 60000, "eos_id": EOS}
        if tokenized
        else None,
        buckets=sorted(set(buckets)) if buckets else None,
    )
    write_manifest(directory, manifest)
    return directory


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment of a fresh Python child that runs loader code: one torch thread, this folder on the
    path (and no empty entry: the repository's ``encodings/`` would shadow the package)."""
    here = str(Path(__file__).resolve().parent)
    paths = [here] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(paths), **extra)


__all__ = ["EOS", "FORMATS", "document", "make_dataset", "subprocess_env"]


def bpe(vocab_size: int, texts: list[str]):
    """A byte-level BPE with ``<|endoftext|>``, trained on ``texts``."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def write_text_dataset(
    directory: Path, tokenizer, texts: list[str], row_group_rows: int | None = None
) -> Path:
    """An untokenized dataset of ``texts`` in 3 parquet shards of 10 records, with ``tokenizer`` attached."""
    tokenizer.save(str(directory / "tokenizer.json"))
    infos = []
    for shard in range(3):
        relpath = f"train/shard-{shard:05d}.parquet"
        with ShardWriter(directory, relpath, "parquet", row_group_rows=row_group_rows) as writer:
            for i in range(shard * 10, shard * 10 + 10):
                writer.write({"id": f"s{i}", "text": texts[i], "source": "lts"})
        infos.append(writer.info)
    builder = {"name": "test", "version": "0", "arguments": {}}
    write_manifest(
        directory, Manifest("lts", "parquet", {"train": infos}, builder, {"path": "tokenizer.json"})
    )
    return directory
