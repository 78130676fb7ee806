"""Faults of the loaders that cost memory or time: a 20 MB document among texts the loader tokenizes (refused
before tokenizing, or its shard skipped and counted, in a process whose peak memory is measured), and one
long tokenized document cut into blocks without being copied whole for each."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from loader_fixtures import EOS, subprocess_env

from ltsgen.errors import LtsgenError
from ltsgen.loaders import LoaderError, StreamingDataset
from ltsgen.loaders.contract import Manifest, write_manifest
from ltsgen.shards import ShardWriter

BUILDER = {"name": "test", "version": "0", "arguments": {}}
STORY = "the little cat saw the big dog and ran home "


def text_dataset(directory: Path, long_chars: int) -> Path:
    """Three shards of short stories, the last holding one more of ``long_chars`` characters, and a BPE."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"], show_progress=False)
    tokenizer.train_from_iterator([STORY * 3], trainer)
    directory.mkdir()
    tokenizer.save(str(directory / "tokenizer.json"))
    infos = []
    for shard in range(3):
        with ShardWriter(directory, f"train/shard-{shard:05d}.parquet", "parquet") as writer:
            for i in range(8):
                writer.write(
                    {"id": f"s{shard}-{i}", "text": f"story {i}: " + STORY * (i + 1), "source": "lts"}
                )
            if shard == 2 and long_chars:
                writer.write(
                    {
                        "id": "long",
                        "text": (STORY * (long_chars // len(STORY) + 1))[:long_chars],
                        "source": "lts",
                    }
                )
        infos.append(writer.info)
    write_manifest(
        directory, Manifest("lts", "parquet", {"train": infos}, BUILDER, {"path": "tokenizer.json"})
    )
    return directory


PROBE = """
import resource, sys, warnings
from ltsgen.errors import LtsgenError
from ltsgen.loaders import StreamingDataset
warnings.simplefilter("ignore")
for directory, on_error in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        dataset = StreamingDataset(directory, seq_len=31, on_error=on_error)
        print(f"blocks {sum(1 for _ in dataset)} skipped {len(dataset.skipped)}")
    except LtsgenError as error:
        print(f"error: {error}")
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def probe(*runs: tuple[Path, str]) -> list[tuple[str, float]]:
    """Pack each directory in turn in one fresh process: the one line of each outcome, and the process's
    peak memory in MiB after it."""
    run = subprocess.run(
        [sys.executable, "-c", PROBE, *(str(part) for pair in runs for part in pair)],
        env=subprocess_env(TOKENIZERS_PARALLELISM="false"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    return [(outcome, float(peak)) for outcome, peak in zip(lines[::2], lines[1::2], strict=True)]


def test_a_20_mb_document_to_tokenize_is_refused_or_skipped_in_bounded_memory(tmp_path):
    plain = text_dataset(tmp_path / "plain", 0)
    long = text_dataset(tmp_path / "long", 20_000_000)
    (baseline, baseline_peak), (refused, refused_peak), (skipped, peak) = probe(
        (plain, "raise"), (long, "raise"), (long, "skip")
    )
    assert baseline.startswith("blocks ") and baseline.endswith(" skipped 0")
    assert refused == (
        f"error: {long}/train/shard-00002.parquet: record 8 has 20,000,000 characters, over max_doc_chars="
        "1,000,000 (tokenizing it takes about 2.6 GB; raise max_doc_chars, 0 for no limit, or store token ids)"
    )
    assert skipped.endswith(" skipped 1") and skipped != baseline
    # the text itself is 20 MB; tokenized, it took GBs
    assert peak < baseline_peak + 200, (baseline_peak, refused_peak, peak)


def test_max_doc_chars_is_checked_and_bounds_only_what_is_tokenized(tmp_path):
    directory = text_dataset(tmp_path / "d", 5000)
    with pytest.raises(LoaderError, match=r"shard-00002.parquet: record 8 has 5,000 characters"):
        StreamingDataset(directory, seq_len=31, max_doc_chars=4999)
    assert len(StreamingDataset(directory, seq_len=31, max_doc_chars=5000)) > 0
    assert len(StreamingDataset(directory, seq_len=31, max_doc_chars=0)) > 0
    assert len(StreamingDataset(directory, max_doc_chars=10)) == 25  # records are not tokenized: no limit
    with pytest.raises(LtsgenError, match="max_doc_chars must be an integer from 0 to 2"):
        StreamingDataset(directory, max_doc_chars=-1)


def test_one_long_tokenized_document_is_cut_into_exact_blocks(tmp_path):
    lengths = [5, 300_007, 9, 2]
    ids = [(np.arange(n, dtype=np.int64) * 7 + k) % 60000 + 1 for k, n in enumerate(lengths)]
    with ShardWriter(tmp_path, "train/shard-00000.parquet", "parquet", token_dtype="uint16") as writer:
        for k, values in enumerate(ids):
            writer.write({"id": f"d{k}", "text": "", "source": "lts", "input_ids": values})
    tokenizer = {"path": "tokenizer.json", "sha256": "", "vocab_size": 60001, "eos_id": EOS}
    write_manifest(tmp_path, Manifest("lts", "parquet", {"train": [writer.info]}, BUILDER, tokenizer))
    dataset = StreamingDataset(tmp_path, seq_len=1023, shuffle=False, position_ids=True, batch_size=4)
    batches = list(dataset.loader())
    stream = np.concatenate([np.append(values, EOS) for values in ids])
    positions = np.concatenate([np.arange(len(values) + 1) for values in ids])
    blocks = len(stream) // 1024 // 4 * 4
    got = torch.cat([b["input_ids"] for b in batches]).numpy()
    assert got.shape == (blocks, 1024) and np.array_equal(got.ravel(), stream[: blocks * 1024])
    expected = np.minimum(positions[: blocks * 1024].reshape(-1, 1024), np.arange(1024))
    assert np.array_equal(torch.cat([b["position_ids"] for b in batches]).numpy(), expected)


def test_an_eos_id_that_does_not_fit_the_token_ids_is_one_line(tmp_path):
    with ShardWriter(tmp_path, "train/shard-00000.parquet", "parquet", token_dtype="uint16") as writer:
        for k in range(8):
            writer.write({"id": f"d{k}", "text": "", "source": "lts", "input_ids": np.arange(1, 40 + k)})
    tokenizer = {"path": "tokenizer.json", "sha256": "", "vocab_size": 60001, "eos_id": EOS}
    write_manifest(tmp_path, Manifest("lts", "parquet", {"train": [writer.info]}, BUILDER, tokenizer))
    with pytest.raises(LoaderError, match=r"^eos_id 70000 does not fit the token ids, stored as uint16$"):
        next(iter(StreamingDataset(tmp_path, seq_len=15, eos_id=70_000)))
    for bad in (-1, 2**32, "0"):
        with pytest.raises(LtsgenError, match=r"^eos_id must be an integer from 0 to 2\*\*32 - 1"):
            StreamingDataset(tmp_path, seq_len=15, eos_id=bad)


def test_an_error_in_a_loader_worker_is_raised_as_its_one_line_as_without_workers(tmp_path):
    directory = text_dataset(tmp_path / "d", 0)
    shard = directory / "train" / "shard-00001.parquet"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # changed in place, at the same size
    shard.write_bytes(bytes(data))
    errors = []
    for workers in (0, 2):
        with pytest.raises(LoaderError) as caught:
            list(StreamingDataset(directory, batch_size=4).loader(num_workers=workers))
        errors.append(str(caught.value))
    assert errors[1] == errors[0]  # not torch's "Caught LoaderError in DataLoader worker process 1 ..."
    assert errors[1].startswith(f"{shard}: ") and errors[1].endswith("(corrupt or changed shard)")
    assert "\n" not in errors[1]
