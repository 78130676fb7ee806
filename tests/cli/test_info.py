"""`ltsgen info DIR`: per split records, tokens, shards, bytes, length percentiles and the first record, from
the manifest and shards; --verify hashes every shard; --json says the same as JSON."""

from __future__ import annotations

import json

import numpy as np
from loader_fixtures import make_dataset

from ltsgen.cli import main as ltsgen
from ltsgen.info import dataset_info
from ltsgen.loaders.contract import Manifest, read_manifest, write_manifest


def test_info_counts_every_split_from_the_shards(tmp_path, capsys):
    lengths = [3 + (7 * i) % 40 for i in range(10)]
    data = make_dataset(tmp_path / "d", [4, 6], lengths=lengths, buckets=["64", "128"])
    info = dataset_info(data)
    train = info["splits"]["train"]
    manifest = read_manifest(data)
    assert train["records"] == 10 and train["tokens"] == sum(lengths) and train["shards"] == 2
    assert train["bytes"] == sum(shard.bytes for shard in manifest.splits["train"])
    assert train["buckets"] == ["64", "128"]  # in length order, not as text
    ranges = make_dataset(tmp_path / "r", [2, 2, 2], buckets=["1024-2048", "0-128", "128-256"])
    assert dataset_info(ranges)["splits"]["train"]["buckets"] == ["0-128", "128-256", "1024-2048"]
    expected = [sorted(lengths)[-(-p * len(lengths) // 100) - 1] for p in (10, 50, 90, 99)]  # nearest rank
    assert train["tokens_per_record"] == {
        "min": min(lengths), **dict(zip(["p10", "p50", "p90", "p99"], expected, strict=True)), "max": max(lengths),
    }  # fmt: skip
    assert train["words_per_record"]["max"] == 2  # "document <i>"
    assert train["first_record"] == {"id": "doc-000000", "text": "document 0", "chars": 10}
    assert info["tokenizer"]["vocab_size"] == 60000 and "verified" not in info

    assert ltsgen(["info", str(data)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert (
        lines[2]
        == f"train: 10 records, 20 words, {sum(lengths)} tokens, 2 shards, {train['bytes'] / 1000:.1f} KB"
    )
    assert lines[3] == "  buckets: 64, 128"
    assert lines[-1] == "  first record doc-000000 (10 characters): 'document 0'"
    assert ltsgen(["info", str(data), "--json", "--verify"]) == 0
    captured = capsys.readouterr()  # the JSON alone on stdout, the bar over the hashed shards on stderr
    assert json.loads(captured.out) == {**info, "verified": 2, "mismatched": []}
    assert "verify: 100%" in captured.err and "2/2" in captured.err


def test_verify_names_a_changed_shard_in_one_line(tmp_path, capsys):
    data = make_dataset(tmp_path / "d", [3, 3, 3], tokenized=False)
    shard = read_manifest(data).splits["train"][1].path
    raw = bytearray((data / shard).read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    (data / shard).write_bytes(bytes(raw))
    assert ltsgen(["info", str(data)]) == 2  # no --verify: the shard fails to decode, in one line
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(
        f"ltsgen info: error: {data / shard}: corrupt parquet shard"
    )
    assert ltsgen(["info", str(data), "--verify", "--no-progress"]) == 2  # its lengths are left out
    captured = capsys.readouterr()
    assert captured.out.splitlines()[-1] == "verified 3 files: 1 differ"
    assert "words per record: min 2, p10 2," in captured.out and "tokens" not in captured.out
    assert captured.err == (
        f"ltsgen info: error: 1 of 3 files differ from their sha256 in {data}/manifest.json: {shard}\n"
    )


def test_a_folder_without_manifest_is_one_line(tmp_path, capsys):
    assert ltsgen(["info", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "manifest.json" in err


def test_info_counts_and_verifies_the_token_ids_a_tokenizer_stored_beside_the_text(tmp_path, capsys):
    from loader_fixtures import bpe, write_text_dataset

    from ltsgen.attach import attach_tokenizer

    texts = [f"story {i}: " + "the cat sat on the mat " * (1 + i % 4) for i in range(30)]
    tokenizer = bpe(300, texts)
    data = write_text_dataset(tmp_path, tokenizer, texts)
    (data / "tokenizer.json").unlink()
    manifest = read_manifest(data)
    write_manifest(data, Manifest(manifest.source, manifest.format, manifest.splits, manifest.builder))
    attach_tokenizer(data, tokenizer)
    counts = [len(tokenizer.encode(text, add_special_tokens=False).ids) for text in texts]
    train = dataset_info(data)["splits"]["train"]
    assert train["tokens"] == sum(counts) and (train["tokens_per_record"]["min"], train["tokens_per_record"]["max"]) == (
        min(counts), max(counts),
    )  # fmt: skip
    stored = read_manifest(data).tokenizer["shards"]
    shard = data / next(iter(stored.values()))["path"]
    raw = bytearray(shard.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    shard.write_bytes(bytes(raw))
    info = dataset_info(data, verify=True)
    assert info["verified"] == 7 and info["mismatched"] == [str(shard.relative_to(data))]
    # and the tokenizer that reads them (before: a damaged tokenizer.json passed --verify)
    (data / "tokenizer.json").write_bytes((data / "tokenizer.json").read_bytes()[:2000])
    assert dataset_info(data, verify=True)["mismatched"] == [str(shard.relative_to(data)), "tokenizer.json"]
    assert dataset_info(data)["tokenizer_found"] is True


def test_info_says_when_the_tokenizer_the_manifest_names_is_gone(tmp_path, capsys):
    from loader_fixtures import bpe, write_text_dataset

    from ltsgen.attach import attach_tokenizer

    texts = [f"story {i}: the cat sat on the mat" for i in range(30)]
    tokenizer = bpe(300, texts)
    data = write_text_dataset(tmp_path, tokenizer, texts)
    (data / "tokenizer.json").unlink()
    manifest = read_manifest(data)
    write_manifest(data, Manifest(manifest.source, manifest.format, manifest.splits, manifest.builder))
    attach_tokenizer(data, tokenizer)  # recorded with its sha256, as `ltsgen tokenizer --data` does
    (data / "tokenizer.json").unlink()  # before: info showed it as attached, as if nothing had changed
    assert ltsgen(["info", str(data)]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert ltsgen(["info", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokenizer_found"] is False
    assert line.startswith("tokenizer: tokenizer.json (") and line.endswith(
        "), not found in the folder (the manifest names it)"
    )
    assert ltsgen(["info", str(data), "--verify"]) == 2  # the bar closed before the one-line error
    err = capsys.readouterr().err
    assert err.endswith(f"\nltsgen info: error: {data / 'tokenizer.json'}: not found\n")


def test_the_card_and_info_give_the_same_percentiles():
    from ltsgen.card import _spread
    from ltsgen.info import _percentiles

    rng = np.random.default_rng(0)
    for size in range(1, 40):
        values = rng.integers(1, 5000, size=size).tolist()
        spread, percentiles = _spread(values, "words"), _percentiles(values)
        assert (spread["p90 words"], spread["median words"]) == (percentiles["p90"], percentiles["p50"]), size


def test_a_shard_without_the_records_columns_is_one_line(tmp_path, capsys):
    """A shard replaced by another parquet file, its manifest entry (bytes, sha256) changed to match: before,
    a KeyError traceback from info."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from ltsgen.loaders.files import sha256_file

    data = make_dataset(tmp_path / "d", [3], tokenized=False)
    shard = read_manifest(data).splits["train"][0].path
    pq.write_table(pa.table({"content": ["x", "y", "z"]}), data / shard)
    manifest = json.loads((data / "manifest.json").read_text())
    entry = manifest["splits"]["train"][0]
    entry.update(bytes=(data / shard).stat().st_size, sha256=sha256_file(data / shard), footer_sha256=None)
    (data / "manifest.json").write_text(json.dumps(manifest))
    assert ltsgen(["info", str(data)]) == 2
    assert (
        capsys.readouterr().err
        == f"ltsgen info: error: {data / shard}: no 'num_words' column, as every record has\n"
    )


def test_an_empty_shard_of_any_format_is_counted_as_empty(tmp_path, capsys):
    for fmt in ("webdataset", "jsonl.zst", "parquet"):
        data = make_dataset(tmp_path / fmt, [2, 0], fmt, tokenized=False)
        assert ltsgen(["info", str(data)]) == 0, capsys.readouterr().err
        assert "2 records" in capsys.readouterr().out
