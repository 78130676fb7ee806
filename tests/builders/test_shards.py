"""ShardWriter: byte-deterministic shards in the three contract formats, read back by each format's own tools."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import shutil
import subprocess
import tarfile

import numpy as np
import pyarrow.parquet as pq
import pytest
import webdataset as wds
import zstandard

import ltsgen.shards
from ltsgen.loaders import LoaderError
from ltsgen.loaders.contract import FORMATS, ROW_GROUP_INDEX_KEY
from ltsgen.loaders.formats import read_shard
from ltsgen.loaders.indexed import row_group_span
from ltsgen.shards import ShardWriter


def make_records(count: int, tokenized: bool) -> list[dict]:
    records = []
    for i in range(count):
        text = f"Once upon a time, Ümit and Zoë saw {i} red birds. “Hello!” said Zoë.\n\nThe end {i}."
        record = {"id": f"doc-{i:04d}", "text": text, "source": "lts", "meta": {"z": i, "a": ["é", i % 3]}}
        if tokenized:
            record["input_ids"] = np.arange(i * 7, i * 7 + 5 + i, dtype=np.int64) % 65536
        records.append(record)
    return records


def write(directory, relpath, fmt, records, token_dtype=None):
    with ShardWriter(directory, relpath, fmt, token_dtype=token_dtype) as writer:
        for record in records:
            writer.write(record)
    return writer.info


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("tokenized", [False, True])
def test_round_trip_info_and_determinism(tmp_path, fmt, tokenized):
    records = make_records(23, tokenized)
    dtype = "uint16" if tokenized else None
    relpath = f"train/shard-00000.{FORMATS[fmt]}"
    info = write(tmp_path / "a", relpath, fmt, records, dtype)
    again = write(tmp_path / "b", relpath, fmt, records, dtype)
    data = (tmp_path / "a" / relpath).read_bytes()
    assert data == (tmp_path / "b" / relpath).read_bytes()
    assert info == again
    assert info.path == relpath and info.bucket is None
    assert info.samples == 23
    assert info.words == sum(len(r["text"].split()) for r in records)
    assert info.tokens == (sum(len(r["input_ids"]) for r in records) if tokenized else None)
    assert info.bytes == len(data) and info.sha256 == hashlib.sha256(data).hexdigest()
    assert sorted(p.name for p in (tmp_path / "a" / "train").iterdir()) == [relpath.split("/")[1]]

    back = list(read_shard(tmp_path / "a" / relpath, fmt))
    assert [r["id"] for r in back] == [r["id"] for r in records]
    for got, want in zip(back, records, strict=True):
        assert got["text"] == want["text"] and got["meta"] == want["meta"] and got["source"] == "lts"
        assert got["num_words"] == len(want["text"].split())
        if tokenized:
            assert got["input_ids"].dtype == np.uint16
            np.testing.assert_array_equal(got["input_ids"], want["input_ids"])
            assert got["num_tokens"] == len(want["input_ids"])


def test_bucket_from_path(tmp_path):
    info = write(tmp_path, "train/512-1024/shard-00003.tar", "webdataset", make_records(2, False))
    assert info.bucket == "512-1024"


def test_tar_members_are_normalised_and_read_by_webdataset(tmp_path):
    records = make_records(5, True)
    write(tmp_path, "train/shard-00000.tar", "webdataset", records, "uint32")
    path = tmp_path / "train/shard-00000.tar"
    with tarfile.open(path) as tar:
        members = tar.getmembers()
        assert [m.name for m in members[:3]] == ["doc-0000.txt", "doc-0000.json", "doc-0000.input_ids.npy"]
        for member in members:
            assert (member.mtime, member.uid, member.gid, member.uname, member.gname) == (0, 0, 0, "", "")
            assert member.mode == 0o644 and member.isfile()
        fields = tar.extractfile("doc-0001.json").read().decode("utf-8")
    assert (
        fields
        == '{"id":"doc-0001","meta":"{\\"a\\":[\\"é\\",1],\\"z\\":1}","num_tokens":6,"num_words":17,"source":"lts"}'
    )

    samples = list(wds.WebDataset(str(path), shardshuffle=False))
    assert [s["__key__"] for s in samples] == [r["id"] for r in records]
    for sample, record in zip(samples, records, strict=True):
        assert sample["txt"].decode("utf-8") == record["text"]
        assert json.loads(json.loads(sample["json"])["meta"]) == record["meta"]
        ids = np.load(io.BytesIO(sample["input_ids.npy"]), allow_pickle=False)
        assert ids.dtype == np.uint32
        np.testing.assert_array_equal(ids, record["input_ids"])


def test_parquet_schema_and_pyarrow(tmp_path):
    records = make_records(7, True)
    write(tmp_path, "train/shard-00000.parquet", "parquet", records, "uint16")
    table = pq.read_table(tmp_path / "train/shard-00000.parquet")
    assert table.column_names == ["id", "text", "source", "num_words", "meta", "num_tokens", "input_ids"]
    assert str(table.schema.field("input_ids").type) == "list<element: uint16 not null>"
    assert pq.ParquetFile(tmp_path / "train/shard-00000.parquet").metadata.row_group(0).column(
        1
    ).compression == ("ZSTD")
    assert table.column("id").to_pylist() == [r["id"] for r in records]
    assert [json.loads(m) for m in table.column("meta").to_pylist()] == [r["meta"] for r in records]


def test_a_parquet_footer_lists_the_sha256_of_each_row_group_and_the_manifest_the_footers(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(ltsgen.shards, "PARQUET_ROW_GROUP_ROWS", 3)
    records = make_records(8, True)
    info = write(tmp_path, "train/shard-00000.parquet", "parquet", records, "uint16")
    data = (tmp_path / info.path).read_bytes()
    metadata = pq.ParquetFile(tmp_path / info.path).metadata
    footer = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    assert info.footer_sha256 == hashlib.sha256(data[footer:]).hexdigest()
    index = json.loads(metadata.metadata[ROW_GROUP_INDEX_KEY.encode()])
    spans = [row_group_span(metadata, group) for group in range(metadata.num_row_groups)]
    assert len(spans) == 3  # 3 + 3 + 2 records
    assert spans[0][0] == 4 and spans[-1][1] == footer  # the row groups tile the file up to the footer
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
    assert index["sha256"] == [hashlib.sha256(data[start:stop]).hexdigest() for start, stop in spans]
    counts = np.frombuffer(base64.b64decode(index["num_tokens"]), "<u4")
    assert counts.tolist() == [len(r["input_ids"]) for r in records]
    untokenized = write(tmp_path, "train/shard-00001.parquet", "parquet", make_records(4, False))
    plain = pq.ParquetFile(tmp_path / untokenized.path).metadata
    assert "num_tokens" not in json.loads(plain.metadata[ROW_GROUP_INDEX_KEY.encode()])
    assert (
        untokenized.footer_sha256
        and write(tmp_path, "a.tar", "webdataset", records[:1], "uint16").footer_sha256 is None
    )


@pytest.mark.skipif(
    not (shutil.which("zstd") and shutil.which("jq")), reason="needs the zstd and jq binaries"
)
def test_jsonl_zst_read_by_zstd_and_jq(tmp_path):
    records = make_records(9, True)
    info = write(tmp_path, "train/shard-00000.jsonl.zst", "jsonl.zst", records, "uint16")
    path = tmp_path / "train/shard-00000.jsonl.zst"
    raw = subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True, timeout=30).stdout
    lines = raw.decode("utf-8").splitlines()
    assert len(lines) == info.samples == 9
    assert lines[0].startswith(
        '{"id":"doc-0000","input_ids":[0,1,2,3,4],"meta":"{\\"a\\":[\\"é\\",0],\\"z\\":0}"'
    )
    ids = subprocess.run(["jq", "-r", ".id"], input=raw, capture_output=True, check=True, timeout=30).stdout
    assert ids.decode().split() == [r["id"] for r in records]
    total = subprocess.run(
        ["jq", "-s", "map(.num_tokens) | add"], input=raw, capture_output=True, check=True, timeout=30
    ).stdout
    assert int(total) == info.tokens


def test_failure_inside_block_leaves_no_file(tmp_path):
    with pytest.raises(RuntimeError), ShardWriter(tmp_path, "train/shard-00000.tar", "webdataset") as writer:
        writer.write(make_records(1, False)[0])
        raise RuntimeError("crash")
    assert writer.info is None
    assert list((tmp_path / "train").iterdir()) == []


@pytest.mark.parametrize(
    ("change", "dtype", "message"),
    [
        ({"id": "a.b"}, None, "without '.' or '/'"),
        ({"num_words": 3}, None, "num_words=3"),
        ({"input_ids": [1, 2]}, None, "no token_dtype"),
        ({"input_ids": [1, 70000]}, "uint16", "0..65535"),
        ({"color": "red"}, None, "outside the contract"),
        ({"meta": [1]}, None, "meta must be a dict"),
    ],
)
def test_bad_records_are_refused(tmp_path, change, dtype, message):
    record = {**make_records(1, False)[0], **change}
    with (
        pytest.raises(LoaderError, match=message),
        ShardWriter(tmp_path, "t/shard-00000.tar", "webdataset", dtype) as w,
    ):
        w.write(record)
    assert list((tmp_path / "t").iterdir()) == []


def test_duplicate_ids_and_missing_tokens_are_refused(tmp_path):
    record = make_records(1, False)[0]
    with (
        pytest.raises(LoaderError, match="duplicate id"),
        ShardWriter(tmp_path, "t/shard-00000.tar", "webdataset") as w,
    ):
        w.write(record)
        w.write(record)
    with pytest.raises(LoaderError, match="needs input_ids"):
        with ShardWriter(tmp_path, "t/shard-00000.parquet", "parquet", "uint16") as w:
            w.write(record)
    with pytest.raises(LoaderError, match="must end in .tar"):
        ShardWriter(tmp_path, "t/shard-00000.parquet", "webdataset")


def test_shards_of_earlier_versions_with_meta_as_an_object_still_read(tmp_path):
    records = make_records(3, False)
    with tarfile.open(tmp_path / "old.tar", "w", format=tarfile.PAX_FORMAT) as tar:
        for record in records:
            fields = {"id": record["id"], "meta": record["meta"], "num_words": 17, "source": "lts"}
            for ext, data in (("txt", record["text"].encode()), ("json", json.dumps(fields).encode())):
                info = tarfile.TarInfo(f"{record['id']}.{ext}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    lines = "".join(json.dumps({**r, "num_words": 17}) + "\n" for r in records).encode()
    (tmp_path / "old.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(lines))
    for name, fmt in (("old.tar", "webdataset"), ("old.jsonl.zst", "jsonl.zst")):
        assert [r["meta"] for r in read_shard(tmp_path / name, fmt)] == [r["meta"] for r in records]


def test_count_words_is_str_split():
    """The count of an ASCII text's bytes splits where str.split does (ASCII whitespace, the \\x1c-\\x1f
    separators included; not NUL or DEL), and a non-ASCII text is counted by str.split itself."""
    from ltsgen.loaders.contract import count_words

    texts = ["", " a  b ", "\x1cx\x1dy\x1ez\x1fw", "\x00a\x08 b\x7f", "\t\n\x0b\x0c\r", "one", "two  words\n"]
    assert [count_words(t) for t in texts] == [len(t.split()) for t in texts] == [0, 2, 4, 2, 0, 1, 2]
    unicode = ["a\u3000b\xa0c", "Zoë said “Hello!”"]
    assert [count_words(t) for t in unicode] == [len(t.split()) for t in unicode] == [3, 3]


def test_a_wrong_word_count_is_refused_naming_its_record(tmp_path):
    records = make_records(5, False)
    records[-2]["num_words"] = 1
    with (
        pytest.raises(LoaderError, match=rf"^t/shard-00000.parquet: record {len(records) - 2} \(doc-\d+\): "),
        ShardWriter(tmp_path, "t/shard-00000.parquet", "parquet") as w,
    ):
        for record in records:
            w.write(record)
    assert list((tmp_path / "t").iterdir()) == []
