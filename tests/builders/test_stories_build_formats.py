"""Every format of a story build, read back by the ecosystem's own tools (no ltsgen), with exact counts and
checksums of the text against the manifest and across formats."""

from __future__ import annotations

import glob
import hashlib
import json
import shutil
import subprocess

import datasets
import pytest
import webdataset as wds

from ltsgen.cli import main
from ltsgen.loaders.contract import FORMATS, read_manifest

ARGS = ["--num-stories", "25", "--min-words", "100", "--max-words", "700", "--seed", "7"]
ARGS += ["--splits", "train=0.8,validation=0.2", "--samples-per-shard", "6", "--quiet"]


def digest(pairs) -> str:
    """One checksum over (id, text) pairs, in id order."""
    h = hashlib.sha256()
    for key, text in sorted(pairs):
        h.update(f"{key}\0{text}\0".encode())
    return h.hexdigest()


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("formats")
    out = {}
    for fmt in FORMATS:
        directory = root / fmt.replace(".", "_")
        assert main(["stories", "--out", str(directory), "--format", fmt, *ARGS]) == 0
        out[fmt] = directory
    return out


def expected(directory) -> dict:
    manifest = read_manifest(directory)
    return {
        split: (sum(s.samples for s in shards), sum(s.words for s in shards), [s.path for s in shards])
        for split, shards in manifest.splits.items()
    }


def test_same_stories_in_every_format(builds):
    counts = [{k: v[:2] for k, v in expected(d).items()} for d in builds.values()]
    assert counts[0] == counts[1] == counts[2]
    assert sum(v[0] for v in counts[0].values()) == 25


def webdataset_pairs(directory, split):
    urls = sorted(glob.glob(str(directory / split / "shard-*.tar")))
    samples = list(wds.WebDataset(urls, shardshuffle=False))
    fields = [json.loads(s["json"]) for s in samples]
    assert [f["id"] for f in fields] == [s["__key__"] for s in samples]
    words = sum(f["num_words"] for f in fields)
    return [(s["__key__"], s["txt"].decode("utf-8")) for s in samples], words


def test_webdataset_read_by_webdataset_and_datasets(builds, tmp_path):
    directory = builds["webdataset"]
    reference = {}
    for split, (samples, words, paths) in expected(directory).items():
        pairs, got_words = webdataset_pairs(directory, split)
        assert len(pairs) == samples and got_words == words
        hf = datasets.load_dataset(
            "webdataset",
            data_files={split: [str(directory / p) for p in paths]},
            split=split,
            cache_dir=str(tmp_path / "hf"),
        )
        assert hf.num_rows == samples
        assert digest(zip(hf["__key__"], hf["txt"], strict=True)) == digest(pairs)
        assert sum(j["num_words"] for j in hf["json"]) == words
        reference[split] = digest(pairs)
    # jsonl.zst read by the zstd and jq command-line tools, where the machine has them
    others = ("parquet", "jsonl.zst") if shutil.which("zstd") and shutil.which("jq") else ("parquet",)
    for fmt in others:
        assert other_format_digests(builds[fmt], fmt, tmp_path) == reference


def other_format_digests(directory, fmt, tmp_path) -> dict[str, str]:
    digests = {}
    for split, (samples, words, paths) in expected(directory).items():
        files = [str(directory / p) for p in paths]
        if fmt == "parquet":
            hf = datasets.load_dataset(
                "parquet", data_files={split: files}, split=split, cache_dir=str(tmp_path / "hf")
            )
            assert hf.num_rows == samples and sum(hf["num_words"]) == words
            digests[split] = digest(zip(hf["id"], hf["text"], strict=True))
        else:
            digests[split] = zstd_jq_digest(files, samples, words)
    return digests


def zstd_jq_digest(files, samples, words) -> str:
    raw = subprocess.run(["zstd", "-dc", *files], capture_output=True, check=True, timeout=60).stdout
    rows = subprocess.run(
        ["jq", "-c", "[.id, .text, .num_words]"], input=raw, capture_output=True, check=True, timeout=60
    ).stdout
    rows = [json.loads(line) for line in rows.decode("utf-8").splitlines()]
    assert len(rows) == samples and sum(r[2] for r in rows) == words
    return digest((r[0], r[1]) for r in rows)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_datasets_loads_the_directory_through_its_card(builds, fmt, tmp_path):
    directory = builds[fmt]
    for split, (samples, _, _) in expected(directory).items():
        hf = datasets.load_dataset(str(directory), split=split, cache_dir=str(tmp_path / "hf"))
        assert hf.num_rows == samples
