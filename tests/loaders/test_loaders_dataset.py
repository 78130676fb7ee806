"""StreamingDataset in one process: order, packing, on-the-fly tokenizing, buckets, eval sets, corrupt shards,
and the dataset's own state."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import warnings
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch
from http_server import served_folder
from loader_fixtures import EOS, bpe, document, make_dataset, write_text_dataset

from ltsgen.errors import UsageError
from ltsgen.loaders import LoaderError, PadCollate, StreamingDataset, load_eval_set
from ltsgen.loaders.contract import Manifest, read_manifest, write_manifest
from ltsgen.loaders.indexed import row_group_span
from ltsgen.loaders.order import EpochOrder
from ltsgen.shards import ShardWriter

SIZES = [9, 4, 1, 12, 6, 8, 3]


@pytest.fixture(scope="module")
def lengths() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 40, size=sum(SIZES))


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory, lengths) -> Path:
    return make_dataset(
        tmp_path_factory.mktemp("parquet"), SIZES, "parquet", lengths=lengths, row_group_rows=4
    )


def index_of(record_id: str) -> int:
    return int(record_id.split("-")[1])


def reference_stream(
    directory: Path, seed: int, epoch: int, window: int, lengths
) -> tuple[list[int], list[int]]:
    """The packed epoch as plain Python: documents in epoch order, each followed by EOS."""
    order = EpochOrder(tuple(SIZES), seed, epoch, True, window)
    firsts = np.cumsum([0] + SIZES[:-1])
    tokens, positions = [], []
    for w in range(order.num_windows):
        for shard, row in zip(*order.window_items(w), strict=True):
            index = int(firsts[shard] + row)
            ids = document(index, int(lengths[index]))["input_ids"].tolist() + [EOS]
            tokens += ids
            positions += list(range(len(ids)))
    return tokens, positions


@pytest.mark.parametrize("fmt", ["parquet", "webdataset", "jsonl.zst"])
def test_every_format_gives_the_same_order_each_record_once(tmp_path, fmt, lengths):
    directory = make_dataset(tmp_path, SIZES, fmt, lengths=lengths)
    dataset = StreamingDataset(directory, seed=7, batch_size=5, remainder="wrap")
    records = list(dataset)
    ids = [r["id"] for r in records]
    assert len(ids) == len(dataset) == 45 and sorted(set(ids)) == [f"doc-{i:06d}" for i in range(43)]
    assert ids[43:] == ids[:2]  # "wrap" fills the last global batch from the start of the epoch
    reference = StreamingDataset(
        make_dataset(tmp_path / "p", SIZES, "parquet", lengths=lengths), seed=7, batch_size=5
    )
    assert ids[:40] == [r["id"] for r in reference]
    record = next(r for r in records if r["id"] == "doc-000005")
    assert record["input_ids"].tolist() == document(5, int(lengths[5]))["input_ids"].tolist()


def test_epochs_and_seeds_change_the_order_and_set_epoch_restarts(parquet_dir):
    dataset = StreamingDataset(parquet_dir, seed=1)
    first = [r["id"] for r in dataset]
    assert [r["id"] for r in dataset] == []  # the epoch is consumed until set_epoch
    dataset.set_epoch(1)
    second = [r["id"] for r in dataset]
    assert sorted(first) == sorted(second) and first != second
    assert [r["id"] for r in StreamingDataset(parquet_dir, seed=1, epoch=1)] == second
    assert [r["id"] for r in StreamingDataset(parquet_dir, seed=2)] != first
    assert [r["id"] for r in StreamingDataset(parquet_dir, shuffle=False)] == [
        f"doc-{i:06d}" for i in range(43)
    ]


def without_footer_sha256(source: Path, target: Path) -> Path:
    """A copy whose manifest lists no footer_sha256, as written before the footers listed row groups."""
    shutil.copytree(source, target)
    manifest = read_manifest(target)
    for split, shards in manifest.splits.items():
        manifest.splits[split] = [dataclasses.replace(s, footer_sha256=None) for s in shards]
    write_manifest(target, manifest)
    return target


@pytest.mark.parametrize("window", [1, 3])
@pytest.mark.parametrize("footer", [True, False], ids=["row-groups-checked", "shards-hashed-whole"])
def test_packed_blocks_are_the_epoch_stream_cut_in_blocks(parquet_dir, lengths, window, footer, tmp_path):
    seq_len = 9
    directory = parquet_dir if footer else without_footer_sha256(parquet_dir, tmp_path / "d")
    dataset = StreamingDataset(directory, seed=3, seq_len=seq_len, position_ids=True, shuffle_window=window)
    blocks = list(dataset)
    tokens, positions = reference_stream(parquet_dir, 3, 0, window, lengths)
    count = len(tokens) // (seq_len + 1)
    assert len(blocks) == len(dataset) == count
    assert all(b["input_ids"].dtype == torch.long and b["input_ids"].shape == (seq_len + 1,) for b in blocks)
    assert torch.cat([b["input_ids"] for b in blocks]).tolist() == tokens[: count * (seq_len + 1)]
    for number, block in enumerate(blocks):
        start = number * (seq_len + 1)
        expected = [min(p, k) for k, p in enumerate(positions[start : start + seq_len + 1])]
        assert block["position_ids"].tolist() == expected


def test_packed_ranks_take_slices_of_the_same_global_batches(parquet_dir):
    single = [b["input_ids"] for b in StreamingDataset(parquet_dir, seq_len=7, batch_size=6)]
    ranks = [
        list(StreamingDataset(parquet_dir, seq_len=7, batch_size=2, rank=r, world_size=3)) for r in range(3)
    ]
    assert {len(r) for r in ranks} == {len(single) // 3}
    merged = [
        ranks[r][2 * t + i]["input_ids"] for t in range(len(single) // 6) for r in range(3) for i in range(2)
    ]
    assert torch.equal(torch.stack(merged), torch.stack(single))


def test_untokenized_data_is_tokenized_on_the_fly_with_the_directorys_tokenizer(tmp_path):
    texts = [
        f"story {i}: " + " ".join(["the cat sat on the mat", "a dog ran"][i % 2] for _ in range(i % 4 + 1))
        for i in range(30)
    ]
    tokenizer = bpe(300, texts)
    write_text_dataset(tmp_path, tokenizer, texts)
    eos = tokenizer.token_to_id("<|endoftext|>")
    dataset = StreamingDataset(tmp_path, seq_len=15, shuffle=False)
    stream = [t for text in texts for t in tokenizer.encode(text, add_special_tokens=False).ids + [eos]]
    count = len(stream) // 16
    assert dataset.eos_id == eos and len(dataset) == count
    assert torch.cat([b["input_ids"] for b in dataset]).tolist() == stream[: count * 16]


def test_a_tokenizer_that_cannot_be_read_or_used_is_one_line(tmp_path):
    from transformers import PreTrainedTokenizerFast

    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)
    expected = torch.stack(
        [b["input_ids"] for b in StreamingDataset(directory, seq_len=15, tokenizer=tokenizer)]
    )
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer)  # its backend_tokenizer is used
    assert torch.equal(
        torch.stack([b["input_ids"] for b in StreamingDataset(directory, seq_len=15, tokenizer=wrapped)]),
        expected,
    )
    for content in (b"", b"not json", b'{"a": 1}', b"\xff\xfe\x00b"):
        path = tmp_path / "bad.json"
        path.write_bytes(content)
        with pytest.raises(LoaderError, match=rf"^{path}: not a tokenizer.json \(.+\)$"):
            StreamingDataset(directory, seq_len=15, tokenizer=str(path))
    with pytest.raises(LoaderError, match=rf"^{tmp_path / 'none.json'}: not found$"):
        StreamingDataset(directory, seq_len=15, tokenizer=tmp_path / "none.json")
    with pytest.raises(UsageError, match=r"^tokenizer must be .* not a dict \(it has no encode_batch\(\)\)$"):
        StreamingDataset(directory, seq_len=15, tokenizer={"vocab": {}})


def test_a_tokenizer_set_to_truncate_or_pad_still_packs_whole_documents(tmp_path):
    """A tokenizer saved with truncation or padding, or a transformers tokenizer after a call that set them
    on its backend, packs the same blocks as the plain one (before: every document cut to 4 ids, or padded
    with pad ids, without a word); the caller's tokenizer keeps its settings."""
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)

    def blocks(given) -> torch.Tensor:
        return torch.stack([b["input_ids"] for b in StreamingDataset(directory, seq_len=15, tokenizer=given)])

    expected = blocks(tokenizer)
    truncating = Tokenizer.from_str(tokenizer.to_str())
    truncating.enable_truncation(4)
    padding = Tokenizer.from_str(tokenizer.to_str())
    padding.enable_padding(pad_id=0, length=64)
    saved = tmp_path / "truncating.json"
    truncating.save(str(saved))
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_str(tokenizer.to_str()), pad_token="<|endoftext|>"
    )
    wrapped(["the cat sat on the mat"], truncation=True, max_length=4)  # leaves truncation set on its backend
    for given in (truncating, padding, str(saved), wrapped):
        assert torch.equal(blocks(given), expected)
    assert truncating.truncation["max_length"] == 4 and padding.padding["length"] == 64
    assert wrapped.backend_tokenizer.truncation is not None


class CountingTokenizer:
    """A tokenizer that counts the texts it encodes in batches (the loader tokenizes a shard at a time)."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.encoded = tokenizer, 0

    def encode_batch(self, texts, **options):
        self.encoded += len(texts)
        return self.tokenizer.encode_batch(texts, **options)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def story_texts(count: int) -> list[str]:
    return [f"story {i}: " + " ".join(["the cat sat on the mat", "a dog ran"][i % 2] for _ in range(i % 4 + 1))
            for i in range(count)]  # fmt: skip


def test_token_counts_plan_a_later_construction_and_its_first_batch_tokenizes_what_it_reaches(tmp_path):
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)
    counts = tmp_path / "run" / "token_counts.json"
    first = StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=CountingTokenizer(tokenizer),
                             token_counts=counts)  # fmt: skip
    assert first.tokenizer.encoded == 30  # the 3 shards tokenized to plan the stream
    ids = [len(tokenizer.encode(text, add_special_tokens=False).ids) for text in texts]
    shards = read_manifest(directory).shards("train")
    assert json.loads(counts.read_text()) == {
        "format": "ltsgen.token_counts/1",
        "tokenizer_sha256": first.state_dict()["identity"]["tokenizer_sha256"],
        "counts": {
            s.sha256: ids[10 * i : 10 * i + 10]
            for i, s in sorted(enumerate(shards), key=lambda x: x[1].sha256)
        },
    }
    expected = [b["input_ids"] for b in first]
    written = counts.stat().st_mtime_ns
    ends = np.cumsum([n + 1 for n in ids])  # where each document (and its EOS) ends in the unshuffled stream

    def reached(
        block: int,
    ) -> int:  # the documents block ``block`` (tokens 16 * block to 16 * block + 15) touches
        first_document, last_document = np.searchsorted(ends, [16 * block, 16 * block + 15], side="right")
        return int(last_document - first_document) + 1

    later = StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=CountingTokenizer(tokenizer),
                             token_counts=counts)  # fmt: skip
    assert later.tokenizer.encoded == 0 and len(later) == len(first) == int(ends[-1]) // 16
    assert counts.stat().st_mtime_ns == written  # nothing new to record
    assert torch.equal(next(iter(later))["input_ids"], expected[0])
    assert later.tokenizer.encoded == reached(0) < 10  # not a whole shard
    stepper = StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=tokenizer, token_counts=counts)
    stream = iter(stepper)
    for _ in range(7):
        next(stream)
    resumed = StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=CountingTokenizer(tokenizer),
                               token_counts=counts)  # fmt: skip
    resumed.load_state_dict(stepper.state_dict())
    assert torch.equal(next(iter(resumed))["input_ids"], expected[7])
    assert resumed.tokenizer.encoded == reached(7)  # a resume too tokenizes only what its batch reaches
    again = StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=tokenizer, token_counts=counts)
    assert torch.equal(torch.stack([b["input_ids"] for b in again]), torch.stack(expected))


def test_a_first_batch_of_text_reads_and_checks_only_the_row_groups_it_reaches(tmp_path):
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts, row_group_rows=2)
    counts = tmp_path / "token_counts.json"
    options = dict(seq_len=15, shuffle=False, tokenizer=tokenizer, token_counts=counts)
    expected = [b["input_ids"] for b in StreamingDataset(directory, **options)]
    last = directory / "train" / "shard-00002.parquet"  # in the first window, which holds all 3 shards
    data = bytearray(last.read_bytes())
    start, stop = row_group_span(pq.ParquetFile(last).metadata, 4)
    data[stop - 3] ^= 0xFF  # its last row group (documents 28 and 29), same size
    last.write_bytes(bytes(data))
    stream = iter(StreamingDataset(directory, **options))
    assert torch.equal(next(stream)["input_ids"], expected[0])  # its documents 0-1 only: shard 0's group 0
    with pytest.raises(LoaderError, match=r"shard-00002.parquet: row group 4: sha256 .* does not match"):
        list(stream)


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning")
def test_text_over_http_counted_or_planned_from_counts_packs_as_the_local_copy(tmp_path):
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    (tmp_path / "data").mkdir()
    directory = write_text_dataset(tmp_path / "data", tokenizer, texts, row_group_rows=2)
    counts = tmp_path / "token_counts.json"
    options = dict(seq_len=15, seed=3, tokenizer=tokenizer)
    expected = torch.stack(
        [b["input_ids"] for b in StreamingDataset(directory, **options, token_counts=counts)]
    )
    with served_folder(directory) as url:
        for known in (None, counts):  # the shards counted whole, or read by range for the first batch
            remote = StreamingDataset(url, **options, token_counts=known)
            assert torch.equal(torch.stack([b["input_ids"] for b in remote]), expected)


def test_text_tokenized_on_the_fly_packs_the_same_with_workers_and_token_counts(tmp_path):
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)
    counts = tmp_path / "token_counts.json"

    def epoch(workers: int, **options) -> torch.Tensor:  # windows of one shard: each worker serves its own
        dataset = StreamingDataset(directory, seq_len=15, batch_size=2, shuffle_window=1, tokenizer=tokenizer,
                                   **options)  # fmt: skip
        return torch.cat([batch["input_ids"] for batch in dataset.loader(num_workers=workers)])

    reference = epoch(0)
    assert torch.equal(epoch(2), reference)
    assert torch.equal(epoch(2, token_counts=counts), reference) and counts.exists()  # counted, written
    assert torch.equal(epoch(2, token_counts=counts), reference)  # read: the workers tokenize as they reach


def test_token_counts_of_another_tokenizer_or_unreadable_are_counted_again(tmp_path):
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)
    counts = tmp_path / "token_counts.json"
    StreamingDataset(
        directory, seq_len=15, tokenizer=bpe(300, ["story of a dog and a cat"]), token_counts=counts
    )
    other = json.loads(counts.read_text())
    fresh = CountingTokenizer(tokenizer)
    dataset = StreamingDataset(directory, seq_len=15, tokenizer=fresh, token_counts=counts)
    assert fresh.encoded == 30  # the other tokenizer's counts are not this one's
    mine = json.loads(counts.read_text())
    assert mine["tokenizer_sha256"] == dataset.state_dict()["identity"]["tokenizer_sha256"]
    assert mine["tokenizer_sha256"] != other["tokenizer_sha256"] and mine["counts"] != other["counts"]
    damaged = [
        '{"format": "ltsgen.token_counts/1", "tokeni',
        "[1, 2]",
        '{"counts": {"a": [1]}}',
        json.dumps({**mine, "counts": {key: [*value[:-1], -1] for key, value in mine["counts"].items()}}),
        # beyond the int32 the counts are held in (before: an OverflowError from the constructor)
        json.dumps({**mine, "counts": {key: [*value[:-1], 2**40] for key, value in mine["counts"].items()}}),
    ]
    for content in damaged:
        counts.write_text(content)
        fresh = CountingTokenizer(tokenizer)
        with pytest.warns(UserWarning, match=f"^{re.escape(str(counts))}: "):
            StreamingDataset(directory, seq_len=15, tokenizer=fresh, token_counts=counts)
        assert fresh.encoded == 30 and json.loads(counts.read_text()) == mine
    blocked = tmp_path / "a file" / "token_counts.json"  # its folder cannot be made
    blocked.parent.write_text("")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = StreamingDataset(directory, seq_len=15, tokenizer=tokenizer, token_counts=blocked)
    said = [str(warning.message).removeprefix(f"{blocked}: ").split(" (")[0] for warning in caught]
    assert said == ["token counts unreadable, counting again", "token counts not kept"]
    assert len(kept) == len(dataset)
    with pytest.raises(UsageError, match="^token_counts is a local file, not s3://"):
        StreamingDataset(directory, seq_len=15, tokenizer=tokenizer, token_counts="s3://bucket/counts.json")
    swapped = {key: value[::-1] for key, value in mine["counts"].items()}  # each shard's total still right
    counts.write_text(json.dumps({**mine, "counts": swapped}))
    with pytest.raises(
        LoaderError, match=rf"record \d+ tokenizes to \d+ ids, {re.escape(str(counts))} counts \d+$"
    ):
        list(StreamingDataset(directory, seq_len=15, shuffle=False, tokenizer=tokenizer, token_counts=counts))


@pytest.mark.parametrize(
    ("texts", "message"),
    [
        ([None, "a dog ran"], "record 0 has no text to tokenize"),
        ([7, 8], "record 0's text is int, not a string"),
        (None, r"no text to tokenize \(the shard has no text field\)"),
    ],
)
def test_text_that_cannot_be_tokenized_is_one_line_or_skipped(tmp_path, texts, message):
    """Shards another writer made (ltsgen's own refuses such records): the text tokenized on the fly is
    checked before it is tokenized, a row group at a time as it is decoded."""
    import pyarrow as pa

    good = story_texts(20)
    tokenizer = bpe(300, good)
    directory = write_text_dataset(tmp_path, tokenizer, good + ["x"] * 10)
    manifest = read_manifest(directory)
    bad = manifest.splits["train"][2]
    columns = {"id": [f"b{i}" for i in range(10)], "source": ["lts"] * 10, "num_words": [1] * 10}
    if texts is not None:
        columns["text"] = texts * 5
    pq.write_table(pa.table(columns), directory / bad.path)
    data = (directory / bad.path).read_bytes()
    manifest.splits["train"][2] = dataclasses.replace(
        bad, sha256=hashlib.sha256(data).hexdigest(), bytes=len(data), footer_sha256=None
    )
    write_manifest(directory, manifest)
    with pytest.raises(LoaderError, match=rf"^{directory / bad.path}: {message}$"):
        list(StreamingDataset(directory, seq_len=15, tokenizer=tokenizer))
    with pytest.warns(UserWarning, match=message):  # the shards are counted at construction
        skipping = StreamingDataset(
            directory, seq_len=15, tokenizer=tokenizer, on_error="skip", shuffle=False
        )
    eos = tokenizer.token_to_id("<|endoftext|>")
    stream = [t for text in good for t in tokenizer.encode(text, add_special_tokens=False).ids + [eos]]
    assert torch.cat([b["input_ids"] for b in skipping]).tolist() == stream[: len(stream) // 16 * 16]


def test_length_buckets_fill_each_batch_from_one_bucket(tmp_path):
    buckets = ["0-8", "0-8", "8-16", "8-16", "16-inf"]
    lengths = [3] * 12 + [10] * 20 + [20] * 9
    directory = make_dataset(tmp_path, [5, 7, 10, 10, 9], "webdataset", lengths=lengths, buckets=buckets)
    dataset = StreamingDataset(directory, by_bucket=True, batch_size=4, seed=5)
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, collate_fn=PadCollate(pad_id=EOS))
    batches = list(loader)
    assert len(batches) == len(dataset) // 4 == 3 + 5 + 2
    for batch in batches:
        assert batch["input_ids"].shape[0] == 4 and len(set(batch["lengths"].tolist())) == 1
    ids = [i for b in batches for i in b["id"]]
    assert len(set(ids)) == len(ids) == 40
    assert [len(StreamingDataset(directory, bucket=b)) for b in ("0-8", "8-16", "16-inf")] == [12, 20, 9]


@pytest.mark.parametrize("fmt", ["webdataset", "parquet"])
def test_eval_sets_have_exact_lengths(tmp_path, fmt):
    from ltsgen.loaders.contract import FORMATS

    infos = []
    for length in (4, 8, 5):
        with ShardWriter(
            tmp_path, f"eval/{length}/shard-00000.{FORMATS[fmt]}", fmt, token_dtype="uint16"
        ) as writer:
            for i in range(3):
                size = length + (i == 2 and length == 5)  # eval/5 holds a sequence of 6 tokens
                writer.write(
                    {"id": f"e{length}-{i}", "text": "x", "source": "c4", "input_ids": np.arange(size) + i}
                )
        infos.append(writer.info)
    builder = {"name": "test", "version": "0", "arguments": {}}
    write_manifest(tmp_path, Manifest("c4", fmt, {"eval": infos}, builder))
    block = load_eval_set(tmp_path, 8)
    assert block.dtype == torch.long and block.tolist() == [list(range(i, i + 8)) for i in range(3)]
    assert load_eval_set(tmp_path, 4).shape == (3, 4)
    with pytest.raises(LoaderError, match="split 'eval' bucket '16' .* has no shards"):
        load_eval_set(tmp_path, 16)
    with pytest.raises(LoaderError, match=r": eval/5 sequence 2 \(e5-2\) has 6 tokens, not 5$"):
        load_eval_set(tmp_path, 5)


def corrupt_copy(source: Path, target: Path, shard: int) -> tuple[Path, str]:
    shutil.copytree(source, target)
    info = read_manifest(target).shards("train")[shard]
    path = target / info.path
    data = bytearray(path.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    path.write_bytes(bytes(data))
    return target, info.path


@pytest.mark.parametrize(
    ("option", "value"),
    [("batch_size", 2.5), ("batch_size", "4"), ("batch_size", True), ("seq_len", 7.5), ("seq_len", True),
     ("shuffle_window", 2.5), ("world_size", 2.0), ("rank", "0"), ("rank", True)],
)  # fmt: skip
def test_a_count_that_is_not_an_integer_is_one_line(parquet_dir, option, value):
    """Before: accepted, then a TypeError at the first batch; a TypeError in the constructor; or True as 1.
    numpy's integers are integers, held as Python's (a state saved with them loads with weights_only)."""
    numpy_given = StreamingDataset(parquet_dir, batch_size=np.int64(2), seq_len=np.int32(7), seed=np.int64(3))
    assert json.loads(json.dumps(numpy_given.state_dict()))["seed"] == 3
    with pytest.raises(
        UsageError, match=rf"^{option} must be a(n| positive) integer.* not {re.escape(repr(value))}$"
    ):
        StreamingDataset(parquet_dir, **{"rank": 0, "world_size": 2, option: value})


def test_corrupt_shard_raises_naming_it(parquet_dir, tmp_path):
    directory, relpath = corrupt_copy(parquet_dir, tmp_path / "d", shard=3)
    with pytest.raises(LoaderError, match=rf"{relpath}: (footer |row group \d+: )?sha256 .* does not match"):
        list(StreamingDataset(directory))
    path = directory / relpath
    path.write_bytes(path.read_bytes()[:-100])  # structural damage, found without the checksum
    with pytest.raises(LoaderError, match=f"{relpath}: corrupt parquet shard"):
        list(StreamingDataset(directory, verify=False))


def blocks_until_error(directory: Path, match: str) -> set[int]:
    """The documents of the packed blocks yielded before the LoaderError ``match`` stopped the epoch."""
    blocks = []
    with pytest.raises(LoaderError, match=match):
        for batch in StreamingDataset(directory, seq_len=5, batch_size=2, shuffle_window=2).loader():
            blocks.append(batch["input_ids"])
    return {(int(i) - 1) // 100 for block in blocks for i in block.flatten() if i != EOS}


def test_packed_blocks_never_carry_a_shard_whose_sha256_fails(parquet_dir, tmp_path):
    # intact bytes under wrong checksums (the shard's and its footer's): every row group decodes, only
    # the check refuses the shard, before any block holding one of its documents is yielded
    shutil.copytree(parquet_dir, tmp_path / "d")
    manifest = read_manifest(tmp_path / "d")
    bad = manifest.splits["train"][3]
    manifest.splits["train"][3] = dataclasses.replace(bad, sha256="0" * 64, footer_sha256="0" * 64)
    write_manifest(tmp_path / "d", manifest)
    firsts = np.cumsum([0] + SIZES)
    documents = blocks_until_error(tmp_path / "d", f"{bad.path}: footer sha256 .* does not match")
    assert not documents & set(range(firsts[3], firsts[4]))
    directory, relpath = corrupt_copy(parquet_dir, tmp_path / "damaged", shard=3)
    (directory / relpath).write_bytes((directory / relpath).read_bytes()[:-100])
    blocks_until_error(directory, f"{relpath}: holds .* bytes, the manifest says")


def test_a_parquet_shard_is_checked_by_its_footer_in_every_window_and_mode(parquet_dir, tmp_path, lengths):
    # the loader checks a parquet shard with a footer_sha256 by its footer and row groups wherever the
    # order puts it (first window, read by row group; later windows and records, read whole), so a wrong
    # sha256 of the whole shard (what a cache checks at download) changes nothing, and a changed row
    # group is refused in records mode too
    shutil.copytree(parquet_dir, tmp_path / "d")
    manifest = read_manifest(tmp_path / "d")
    manifest.splits["train"] = [dataclasses.replace(s, sha256="0" * 64) for s in manifest.splits["train"]]
    write_manifest(tmp_path / "d", manifest)
    for window in (1, 3):
        blocks = list(StreamingDataset(tmp_path / "d", seed=3, seq_len=9, shuffle_window=window))
        tokens, _ = reference_stream(parquet_dir, 3, 0, window, lengths)
        assert torch.cat([b["input_ids"] for b in blocks]).tolist() == tokens[: len(blocks) * 10]
    assert len(list(StreamingDataset(tmp_path / "d"))) == sum(SIZES)
    info = manifest.splits["train"][0]
    path = tmp_path / "d" / info.path
    data = bytearray(path.read_bytes())
    data[row_group_span(pq.read_metadata(path), 1)[1] - 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(LoaderError, match=f"{info.path}: row group 1: sha256 .* does not match the footer's"):
        list(StreamingDataset(tmp_path / "d"))


def test_packed_blocks_never_carry_a_row_group_whose_sha256_fails(parquet_dir, tmp_path):
    # one row group damaged in place: the shard's other row groups are served, that one's never
    shutil.copytree(parquet_dir, tmp_path / "d")
    firsts = np.cumsum([0] + SIZES)
    for shard in [i for i, size in enumerate(SIZES) if size > 4]:  # wherever the order puts it
        info = read_manifest(tmp_path / "d").shards("train")[shard]
        path = tmp_path / "d" / info.path
        original = path.read_bytes()
        data = bytearray(original)
        data[row_group_span(pq.read_metadata(path), 1)[1] - 2] ^= 0xFF  # in row group 1's input_ids
        path.write_bytes(bytes(data))
        documents = blocks_until_error(tmp_path / "d", f"{info.path}: row group 1: sha256 .* does not match")
        assert not documents & set(range(firsts[shard] + 4, firsts[shard] + 8))  # row group 1: rows 4-7
        path.write_bytes(original)


@pytest.mark.parametrize("seq_len", [None, 5])
def test_corrupt_shard_is_skipped_and_counted(parquet_dir, tmp_path, seq_len):
    directory, relpath = corrupt_copy(parquet_dir, tmp_path / "d", shard=3)
    dataset = StreamingDataset(directory, on_error="skip", batch_size=2, seq_len=seq_len, shuffle_window=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        items = list(dataset)
    assert len(items) == len(dataset)  # counts stay exact: slots are refilled from the same window
    assert list(dataset.skipped) == [str(directory / relpath)]
    assert any(relpath in str(w.message) for w in caught)
    corrupt = set(range(sum(SIZES[:3]), sum(SIZES[:4])))
    if seq_len is None:
        ids = {index_of(r["id"]) for r in items}
        assert not ids & corrupt and len(set(range(43)) - corrupt - ids) <= 43 % 2  # "drop" loses one slot
    # a window of the corrupt shard alone is filled from the nearest later window, in every epoch, the same
    # with DataLoader workers (each serving its own windows)
    key = "id" if seq_len is None else "input_ids"
    for epoch in range(2):
        epochs = []
        for workers in (0, 2):
            alone = StreamingDataset(
                directory, on_error="skip", batch_size=2, seq_len=seq_len, shuffle_window=1
            )
            alone.set_epoch(epoch)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                epochs.append([batch[key] for batch in alone.loader(num_workers=workers)])
        assert len(epochs[0]) == alone.num_batches
        if seq_len is None:
            assert epochs[0] == epochs[1] and not {index_of(i) for ids in epochs[0] for i in ids} & corrupt
        else:
            assert torch.equal(torch.stack(epochs[0]), torch.stack(epochs[1]))


@pytest.mark.parametrize("counted", ["at construction", "in a counts file"])
def test_text_with_a_whole_window_skipped_packs_the_other_windows(tmp_path, counted):
    """Counted at construction, a skipped shard adds no tokens: its window is empty, and blocks run from
    the window before it into the one after (before: a ValueError from an empty slice). With the counts of
    an earlier read, the window keeps its size and is filled from the next window, as for token ids."""
    texts = story_texts(30)
    tokenizer = bpe(300, texts)
    directory = write_text_dataset(tmp_path, tokenizer, texts)
    counts = tmp_path / "token_counts.json"
    options = dict(seq_len=15, batch_size=2, shuffle=False, shuffle_window=1, tokenizer=tokenizer)
    if counted == "in a counts file":
        StreamingDataset(directory, token_counts=counts, **options)
    middle = directory / read_manifest(directory).shards("train")[1].path
    data = bytearray(middle.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    middle.write_bytes(bytes(data))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = StreamingDataset(directory, on_error="skip", token_counts=counts, **options)
        blocks = torch.stack([item["input_ids"] for item in dataset])
        again = StreamingDataset(directory, on_error="skip", token_counts=counts, **options)
        by_workers = torch.cat([batch["input_ids"] for batch in again.loader(num_workers=2)])
    assert torch.equal(by_workers, blocks)
    eos = tokenizer.token_to_id("<|endoftext|>")
    shards = [
        [
            t
            for text in texts[i : i + 10]
            for t in tokenizer.encode(text, add_special_tokens=False).ids + [eos]
        ]
        for i in (0, 10, 20)
    ]
    filled = (shards[2] * 2)[: len(shards[1])] if counted == "in a counts file" else []
    stream = shards[0] + filled + shards[2]
    assert len(blocks) == dataset.num_batches * 2 == len(stream) // 16 // 2 * 2
    assert blocks.flatten().tolist() == stream[: len(blocks) * 16]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl.zst", "webdataset"])
def test_an_empty_shard_of_text_adds_nothing_in_every_format(tmp_path, fmt):
    """Before, an empty jsonl.zst shard was refused when packing: "no text to tokenize (the shard has no
    text field)" (a KeyError before that); the other formats read it as no records."""
    from ltsgen.loaders.contract import FORMATS

    texts = story_texts(20)
    tokenizer = bpe(300, texts)
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    infos = []
    for shard, rows in enumerate([range(10), range(0), range(10, 20)]):
        with ShardWriter(tmp_path, f"train/shard-{shard:05d}.{FORMATS[fmt]}", fmt) as writer:
            for i in rows:
                writer.write({"id": f"s{i}", "text": texts[i], "source": "lts"})
        infos.append(writer.info)
    builder = {"name": "test", "version": "0", "arguments": {}}
    write_manifest(tmp_path, Manifest("lts", fmt, {"train": infos}, builder, {"path": "tokenizer.json"}))
    eos = tokenizer.token_to_id("<|endoftext|>")
    stream = [t for text in texts for t in tokenizer.encode(text, add_special_tokens=False).ids + [eos]]
    packed = StreamingDataset(tmp_path, seq_len=15, shuffle=False)
    assert torch.cat([b["input_ids"] for b in packed]).tolist() == stream[: len(stream) // 16 * 16]
    assert [r["text"] for r in StreamingDataset(tmp_path, shuffle=False)] == texts


def test_state_refuses_another_global_batch_or_dataset(parquet_dir, tmp_path):
    dataset = StreamingDataset(parquet_dir, batch_size=2)
    next(iter(dataset))
    state = dataset.state_dict()
    assert state["samples_consumed"] == 0 and state["partial"] == 1
    with pytest.raises(LoaderError, match="global batch size changed from 2 to 3"):
        StreamingDataset(parquet_dir, batch_size=3).load_state_dict(state)
    other = make_dataset(tmp_path, [3, 3], "parquet")
    with pytest.raises(LoaderError, match="another dataset"):
        StreamingDataset(other, batch_size=2).load_state_dict(state)
    resumed = StreamingDataset(parquet_dir, batch_size=2)
    resumed.load_state_dict(state)
    assert [r["id"] for r in dataset] == [r["id"] for r in resumed]


def test_bad_arguments_are_one_line_errors(parquet_dir):
    with pytest.raises(
        LoaderError, match=r"split 'train' has \d+ items, too few for one global batch of 50$"
    ):
        StreamingDataset(parquet_dir, batch_size=50)
    with pytest.raises(
        LoaderError, match=r"has 0 blocks of seq_len \+ 1 = 100,001 tokens, too few for one global"
    ):
        StreamingDataset(parquet_dir, batch_size=2, seq_len=100_000)  # before: "too few items", which?
    with pytest.raises(LoaderError, match="no split 'valid'"):
        StreamingDataset(parquet_dir, split="valid")
    with pytest.raises(UsageError, match="remainder"):
        StreamingDataset(parquet_dir, remainder="pad")
    with pytest.raises(UsageError, match="rank 2 is outside world size 2"):
        StreamingDataset(parquet_dir, rank=2, world_size=2)


@pytest.mark.parametrize("fmt", ["parquet", "webdataset"])
def test_a_shard_replaced_between_epochs_is_caught_when_read_again(tmp_path, fmt):
    """Before, a shard was checked on its first read in a process only: read again in a later epoch (no
    longer held decoded) another shard's bytes with as many records were served without a word."""
    directory = make_dataset(tmp_path, [5] * 12, fmt)
    dataset = StreamingDataset(directory, shuffle_window=1)  # two shards held decoded at a time
    assert sorted(index_of(record["id"]) for record in dataset) == list(range(60))
    shards = sorted((directory / "train").iterdir())
    originals = [path.read_bytes() for path in shards]
    for path, other in zip(shards, originals[1:] + originals[:1], strict=True):
        path.write_bytes(other)  # each shard now holds the next one's 5 records
    dataset.set_epoch(1)
    with pytest.raises(
        LoaderError, match=r"train/shard-000\d\d\.\w+: (.*sha256|holds \d+ bytes, the manifest)"
    ):
        list(dataset)


def test_a_store_that_fails_is_no_corrupt_shard_and_the_same_dataset_reads_again_once_it_is_back(tmp_path):
    """A server gone mid-training: before, ``on_error="skip"`` took each shard it failed to give for a
    corrupt one (another shard in each process, so ranks lost exactly-once), and the same dataset iterated
    again replayed the failed reads without asking the server, even once it was back."""
    import functools
    import http.server

    from http_server import serving_thread

    from ltsgen.loaders.storage import StorageError

    directory = make_dataset(tmp_path / "data", [5] * 6, "parquet")

    def serve(port: int = 0):
        handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=directory)
        handler.log_message = lambda *args: None
        server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
        serving_thread(server).start()
        return server

    server = serve()
    port = server.server_address[1]
    dataset = StreamingDataset(f"http://127.0.0.1:{port}", shuffle_window=1, on_error="skip")
    server.shutdown()
    server.server_close()
    with pytest.raises(StorageError, match=r"shard-0000\d\.parquet: cannot be read \("):
        list(dataset)
    assert dataset.skipped == {}
    server = serve(port)
    try:
        assert sorted(index_of(record["id"]) for record in dataset) == list(range(30))
    finally:
        server.shutdown()
        server.server_close()


def test_a_pipe_command_that_fails_is_no_corrupt_shard(tmp_path):
    """A `pipe:` command that fails (a network outage under `aws s3 cp`) is the store's failure, as for any
    other store: before, `on_error="skip"` skipped the shard as corrupt, on the rank that saw it only."""
    from ltsgen.loaders.storage import StorageError

    directory = make_dataset(tmp_path / "data", [5] * 3, "parquet")
    template = f"pipe:case {{path}} in *.parquet) echo gone >&2; exit 3;; *) cat {directory}/{{path}};; esac"
    dataset = StreamingDataset(template, on_error="skip", allow_pipe=True)  # the manifest reads
    with pytest.raises(StorageError, match=r"exited with status 3 \(gone\)$"):
        list(dataset)
    assert dataset.skipped == {}
