"""The data card: Hugging Face YAML (parsed by huggingface_hub), datasheet sections and statistics tables,
for a story build and for a tokenized, length-bucketed build of another builder."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from faults import hold_lock
from huggingface_hub import DatasetCard

from ltsgen import __version__
from ltsgen.build import BuildSpec, Job, run_build
from ltsgen.cli import main
from ltsgen.stories.variety import reference_reuse, reference_stats
from ltsgen.tinystories_reference import (
    REFERENCE_FILE,
    REFERENCE_SHA256,
    TINYSTORIES_NGRAMS,
    TINYSTORIES_REUSE,
    TINYSTORIES_VARIETY,
    comparison_stories,
    comparison_words,
)

LTSGEN = str(Path(sys.executable).parent / "ltsgen")
BUCKETS = ["0-64", "64-inf"]


def test_reference_constants_match_the_real_text(real_data):
    path = real_data / "tinystories" / REFERENCE_FILE
    assert hashlib.sha256(path.read_bytes()).hexdigest() == REFERENCE_SHA256
    for words, values in TINYSTORIES_NGRAMS.items():
        stats = reference_stats(path, max_words=words)
        assert stats["words"] == words
        assert (stats["distinct_2"], stats["distinct_3"], stats["top_4gram_share"]) == values
        assert {key: stats[key] for key in TINYSTORIES_VARIETY} == TINYSTORIES_VARIETY
    for stories, share in TINYSTORIES_REUSE.items():
        reuse = reference_reuse(path, stories=stories)
        assert (reuse["stories"], reuse["share"]) == (stories, share)
    assert (
        comparison_words(5_000) == 5_000
        and comparison_words(60_000) == 50_000
        and comparison_words(99) is None
    )
    assert comparison_stories(1_000) == 789 and comparison_stories(30) == 20


@pytest.mark.parametrize("words", [99, 150, 700, 12_345])
def test_variety_compares_equal_numbers_of_words(words):
    """The build's side of the variety table is measured on exactly as many words as the reference's."""
    from ltsgen.stories.statistics import variety_table

    text = " ".join(f"word{i % 97} and then." for i in range(words // 3 + 1))
    texts = [" ".join(text.split()[:words])]
    total = {"words": words, "sentences": 10, "repeated_sentences": 0, "max_repeats_6plus": 1}
    build, reference = variety_table(texts, total, "build")["rows"]
    assert build[1] == reference[1] == comparison_words(words) or (reference[1] == "-" and words < 100)


@pytest.fixture(scope="module")
def story_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("card") / "lts"
    args = ["--num-stories", "30", "--max-words", "600", "--samples-per-shard", "10", "--format", "parquet"]
    assert main(["stories", "--out", str(out), *args, "--no-progress"]) == 0
    return out


def test_story_card_yaml_and_datasheet(story_build):
    card = DatasetCard.load(story_build / "README.md")
    data = card.data.to_dict()
    assert data["license"] == "apache-2.0" and data["language"] == ["en"]
    assert data["pretty_name"] == "LongTinyStories" and data["size_categories"] == ["n<1K"]
    assert data["task_categories"] == ["text-generation"]
    assert data["annotations_creators"] == data["language_creators"] == ["machine-generated"]
    info = data["dataset_info"]
    manifest_counts = {s["name"]: s["num_examples"] for s in info["splits"]}
    assert sum(manifest_counts.values()) == 30
    files = {f["split"]: f["path"] for f in data["configs"][0]["data_files"]}
    assert files["train"] == "train/shard-*.parquet" and set(files) == set(manifest_counts)
    assert [f["name"] for f in info["features"]] == ["id", "text", "source", "num_words", "meta"]
    text = card.text
    for section in ("## Motivation", "## Composition", "## Collection process", "## Uses", "## Limitations"):
        assert section in text
    assert f"version `{__version__}`" in text and '"num_stories": 30' in text
    assert "ltsgen stories --out DIR --format parquet --max-words 600" in text
    # 30 stories of 100-600 words: about 9,000 words, compared at 5,000 words and 20 stories
    assert (
        "| TinyStories (real, validation split) | 5,000 | 0.5806 | 0.8403 | 0.2738 | 20 | 1.41% | 0.95% | 8 |"
        in text
    )
    assert "| LongTinyStories (this build) | 5,000 |" in text and "| 30 |" in text
    assert "### Long-range facts" in text and "![length histogram](length_histogram.png)" in text
    assert (
        "### Recalls of planted facts: distance in words to the previous occurrence, per story length" in text
    )


def test_card_command_copies_card_and_plot(story_build, tmp_path):
    result = subprocess.run(
        [LTSGEN, "card", str(story_build), "--out", str(tmp_path / "cards" / "lts.md")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    copied = (tmp_path / "cards" / "lts.md").read_text()
    assert "![length histogram](lts_length_histogram.png)" in copied
    assert (tmp_path / "cards" / "lts_length_histogram.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert copied.replace("lts_length_histogram.png", "length_histogram.png") == (
        (story_build / "README.md").read_text()
    )


def test_card_command_is_refused_while_a_build_holds_the_directory(story_build, tmp_path, capsys):
    """A build there (a rerun of the finished build, say) removes the temporary files it finds: before, the
    card's own were among them, and the command failed half-way ("cannot be written")."""
    before = (story_build / "README.md").read_bytes()
    with hold_lock(story_build):
        assert main(["card", str(story_build)]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith(f"ltsgen card: error: {story_build}: another build is running there (")
        and err.count("\n") == 1
    )
    assert (story_build / "README.md").read_bytes() == before
    assert main(["card", str(story_build)]) == 0
    first = tmp_path / "first"  # a first build that has not written its manifest yet: still a build running
    first.mkdir()
    with hold_lock(first):
        assert main(["card", str(first)]) == 2
    assert capsys.readouterr().err.startswith(
        f"ltsgen card: error: {first}: another build is running there ("
    )


def test_card_command_without_manifest_is_one_line(tmp_path):
    result = subprocess.run([LTSGEN, "card", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1 and "manifest.json: not found" in result.stderr


def write_bucketed(job: Job, output) -> dict:
    """A tokenized, length-bucketed shard pair per job, as a corpus builder writes them."""
    for bucket in BUCKETS:
        with output.open(f"train/{bucket}/shard-{job.payload:05d}.parquet") as writer:
            for i in range(4):
                length = 8 * (i + 1) + (64 if bucket == "64-inf" else 0)
                writer.write(
                    {
                        "id": f"doc-{job.payload}-{bucket}-{i}",
                        "text": " ".join(["word"] * length),
                        "source": "c4" if i % 2 else "arxiv",
                        "meta": {"url": f"https://example.org/{i}"},
                        "input_ids": np.arange(length),
                    }
                )
    return {"documents": 8}


def test_card_of_a_bucketed_tokenized_build(tmp_path):
    spec = BuildSpec(
        directory=tmp_path / "buckets",
        builder={"name": "test buckets", "version": "1", "arguments": {"lengths": [64]}},
        source="c4+arxiv",
        fmt="parquet",
        splits=["train"],
        jobs=[Job(f"job-{i}", i, weight=8) for i in range(2)],
        run_job=write_bucketed,
        token_dtype="uint16",
        tokenizer={"path": "tokenizer.json", "sha256": "0" * 64, "vocab_size": 512, "eos_id": 0},
        buckets=BUCKETS,
        finalize=lambda results: {
            "statistics": {"Documents per job": {r.key: r.stats["documents"] for r in results}},
            "card": {"pretty_name": "Bucketed test", "language_creators": "found", "license": "odc-by"},
        },
    )
    run_build(spec, progress=False)
    card = DatasetCard.load(tmp_path / "buckets" / "README.md")
    data = card.data.to_dict()
    assert data["language_creators"] == ["found"] and data["license"] == "odc-by"
    assert [c["config_name"] for c in data["configs"]] == ["default", "bucket-0-64", "bucket-64-inf"]
    assert data["configs"][1]["data_files"] == [{"split": "train", "path": "train/0-64/shard-*.parquet"}]
    features = {f["name"]: f for f in data["dataset_info"]["features"]}
    assert features["input_ids"] == {"name": "input_ids", "list": "uint16"}
    assert data["dataset_info"]["splits"] == [
        {"name": "train", "num_bytes": data["dataset_info"]["download_size"], "num_examples": 16}
    ]
    text = card.text
    # 2 jobs x 2 docs per (bucket, source): tokens 8+24 (arxiv) and 16+32 (c4) in the short bucket
    assert "| 0-64 | arxiv | 4 | 64 | 8 | 8 | 16 | 24 | 24 |" in text
    assert "| 64-inf | c4 | 4 | 352 | 80 | 80 | 88 | 96 | 96 |" in text
    assert "| job-0 | 8 |" in text and "Tokenized with `tokenizer.json` (vocabulary 512" in text
    assert (tmp_path / "buckets" / "token_length_histogram.png").stat().st_size > 1000
    assert "![token length histogram](token_length_histogram.png)" in text


def test_features_yaml_is_what_datasets_writes(story_build):
    import pyarrow as pa
    from datasets import Features

    from ltsgen.card import yaml_feature
    from ltsgen.loaders.contract import read_manifest
    from ltsgen.loaders.formats import read_shard

    manifest = read_manifest(story_build)
    shard = manifest.shards("train")[0]
    metas = [r["meta"] for r in read_shard(str(story_build / shard.path), "parquet")]
    types = {
        "story meta": pa.array(metas).type,  # nested structs, lists of structs, lists of values
        "token ids": pa.list_(pa.uint16()),
        "values": pa.struct([(n, t) for n, t in [("a", pa.float64()), ("b", pa.bool_()), ("c", pa.null()),
                             ("d", pa.float32()), ("e", pa.large_string()), ("f", pa.timestamp("s"))]]),
        "nested lists": pa.large_list(pa.list_(pa.struct([("x", pa.int32())]))),
    }  # fmt: skip
    assert pa.types.is_struct(types["story meta"]) and types["story meta"].num_fields >= 3
    for name, arrow_type in types.items():
        reference = Features.from_arrow_schema(pa.schema([("column", arrow_type)]))._to_yaml_list()
        assert [{"name": "column", **yaml_feature(arrow_type)}] == reference, name


def test_a_mean_is_rounded_once_where_it_is_shown():
    """Before: rounded to 0.1 and then to a whole number, half to even: 205,499 words in 97 records (2,118.55)
    showed as 2,118."""
    from ltsgen.card import _cell, _spread

    values = [2118] * 96 + [2171]
    assert _cell(_spread(values, "words")["mean words"]) == "2,119"
    assert _cell(_spread([1, 2, 2], "words")["mean words"]) == "1.667"


def test_a_bucket_card_names_no_source_dataset_its_reader_cannot_know():
    """Before: the Pile reader's card said "The Pile" and EleutherAI/pile of any file in the Pile's layout (the
    code sample is Debian source code); the readers of C4 and arXiv layouts keep theirs."""
    from ltsgen.corpora.card_text import bucket_card

    pile = bucket_card("pile", "code", "ltsgen buckets ...", [512], [512])
    assert pile["source_datasets"] == [] and not pile["pretty_name"].startswith("The Pile")
    assert bucket_card("text", "t", "ltsgen buckets ...", [512], [512])["source_datasets"] == []
    assert bucket_card("c4", "c4", "ltsgen buckets ...", [512], [512])["source_datasets"] == ["allenai/c4"]


@pytest.mark.parametrize(
    "card", sorted((Path(__file__).parents[2] / "data_cards").glob("*.md")), ids=lambda p: p.name
)
def test_a_checked_in_card_loads_whole_through_datasets(card, caplog):
    """datasets needs name, num_bytes and num_examples on every split, or it drops the split info with a
    warning (as it did for a card written without num_bytes)."""
    import logging

    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCard

    with caplog.at_level(logging.WARNING):
        infos = DatasetInfosDict.from_dataset_card_data(DatasetCard.load(card).data)
    assert not [record for record in caplog.records if "Ignoring" in record.getMessage()]
    (info,) = infos.values()
    assert info.splits and all(
        split.num_examples > 0 and split.num_bytes > 0 for split in info.splits.values()
    )
