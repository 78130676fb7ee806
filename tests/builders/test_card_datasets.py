"""``datasets.load_dataset(DIR)`` reads every card configuration the builders write, in every format:
LongTinyStories, and a bucketed corpus with its evaluation and concatenated evaluation splits. The rows
are the manifest's, ``meta`` is one type (a JSON string) everywhere, and earlier builds still read."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
import yaml
from faults import corpus_and_tokenizer

from ltsgen.cli import main
from ltsgen.loaders.contract import EVAL_CONCAT_SPLIT, EVAL_SPLIT, FORMATS, read_manifest
from ltsgen.loaders.formats import read_shard


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    return corpus_and_tokenizer(tmp_path_factory.mktemp("corpus"))


def configurations(directory: Path) -> list[dict]:
    return yaml.safe_load((directory / "README.md").read_text().split("---\n")[1])["configs"]


def expected_rows(directory: Path, config: dict) -> dict[str, list[str]]:
    """split -> record ids, in shard order, of the shards the configuration names."""
    manifest = read_manifest(directory)
    bucket = config["config_name"].removeprefix("bucket-") if config["config_name"] != "default" else None
    rows: dict[str, list[str]] = {}
    for split, shards in manifest.splits.items():
        for shard in shards:
            if bucket is None or shard.bucket == bucket:
                records = read_shard(str(directory / shard.path), manifest.format, columns=["id", "meta"])
                rows.setdefault(split, []).extend(r["id"] for r in records)
    return rows


def check_every_configuration(directory: Path, cache: Path) -> set[str]:
    """Load each configuration of the card with ``datasets`` and hold it against the shards; return the
    splits seen."""
    seen: set[str] = set()
    for config in configurations(directory):
        loaded = datasets.load_dataset(str(directory), config["config_name"], cache_dir=str(cache))
        expected = expected_rows(directory, config)
        assert set(loaded) == set(expected), config["config_name"]
        for split, table in loaded.items():
            fields = table.features["json"] if "json" in table.features else table.features
            assert fields["meta"] == datasets.Value("string")
            ids = table["__key__"] if "__key__" in table.column_names else table["id"]
            assert sorted(ids) == sorted(expected[split])
            metas = table["json"] if "json" in table.column_names else table
            assert isinstance(json.loads(metas[0]["meta"]), dict)
        seen |= set(loaded)
    return seen


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_load_dataset_reads_every_configuration(tmp_path, corpus, fmt):
    datasets.disable_progress_bars()
    stories = tmp_path / "stories"
    argv = ["stories", "--out", str(stories), "--num-stories", "12", "--max-words", "300", "--format", fmt]
    argv += ["--splits", "train=0.5,validation=0.25,test=0.25"]
    assert main([*argv, "--quiet"]) == 0
    assert check_every_configuration(stories, tmp_path / "cache") == {"train", "validation", "test"}

    path, tokenizer = corpus
    bucketed = tmp_path / "buckets"
    argv = ["buckets", "--source", "c4", "--input", str(path), "--tokenizer", str(tokenizer)]
    argv += [
        "--out",
        str(bucketed),
        "--bucket-lengths",
        "512",
        "--eval-lengths",
        "128,512",
        "--eval-sequences",
        "3",
    ]
    assert main([*argv, "--eval-concat", "--format", fmt, "--no-progress"]) == 0
    assert [c["config_name"] for c in configurations(bucketed)] == [
        "default",
        "bucket-0-512",
        "bucket-512-inf",
    ]
    seen = check_every_configuration(bucketed, tmp_path / "cache")
    assert {EVAL_SPLIT, EVAL_CONCAT_SPLIT} <= seen


def test_a_build_with_the_earlier_split_name_still_reads(tmp_path, corpus):
    path, tokenizer = corpus
    out = tmp_path / "buckets"
    argv = [
        "buckets",
        "--source",
        "c4",
        "--input",
        str(path),
        "--tokenizer",
        str(tokenizer),
        "--out",
        str(out),
    ]
    argv += ["--bucket-lengths", "512", "--eval-lengths", "128", "--eval-sequences", "2", "--eval-concat"]
    assert main([*argv, "--no-progress"]) == 0
    # as the earlier version wrote it: split and folder "eval-concat"
    (out / EVAL_CONCAT_SPLIT).rename(out / "eval-concat")
    raw = json.loads((out / "manifest.json").read_text())
    raw["splits"]["eval-concat"] = raw["splits"].pop(EVAL_CONCAT_SPLIT)
    for shard in raw["splits"]["eval-concat"]:
        shard["path"] = shard["path"].replace(EVAL_CONCAT_SPLIT, "eval-concat")
    (out / "manifest.json").write_text(json.dumps(raw))
    manifest = read_manifest(out)
    [shard] = manifest.shards(EVAL_CONCAT_SPLIT)
    assert shard.path.startswith("eval-concat/")
    assert main(["card", str(out)]) == 0
    files = {f["split"]: f["path"] for f in configurations(out)[0]["data_files"]}
    assert files[EVAL_CONCAT_SPLIT] == "eval-concat/*/shard-*.parquet"
