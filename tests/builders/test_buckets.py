"""`ltsgen buckets` end to end on the real samples: exact buckets, exact nested evaluation sets, formats,
determinism across worker counts, kill -9 and resume, and one-line errors for bad input."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus_fixtures import ARXIV, C4_GZ, C4_JSONL, json_lines, write_pile_zst
from faults import end
from process_tools import kill_9, wait_until

from ltsgen.cli import main
from ltsgen.loaders.contract import parse_bucket_name, read_manifest
from ltsgen.loaders.files import sha256_file
from ltsgen.loaders.formats import read_shard
from ltsgen.tokenizer import load_tokenizer

REPO = Path(__file__).resolve().parents[2]
LENGTHS = "256,512,1024,2048,4096"
EVAL_N = 8
# the arguments of the reference C4 build that the other tests compare against
C4_BUILD_ARGS = [
    "--bucket-lengths",
    LENGTHS,
    "--eval-sequences",
    str(EVAL_N),
    "--eval-concat",
    "--shard-tokens",
    "20000",
]


@pytest.fixture(scope="session")
def tokenizer_path(tmp_path_factory, real_data) -> Path:
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    argv = ["tokenizer", "--source", "c4", "--input", str(real_data / C4_GZ), "--vocab-size", "1024"]
    assert main([*argv, "--out", str(path)]) == 0
    return path


def build(out: Path, source: str, inputs: list, tokenizer: Path, *extra: str, card: bool = False) -> int:
    argv = ["buckets", "--source", source, "--input", *map(str, inputs), "--out", str(out)]
    return main(
        [*argv, "--tokenizer", str(tokenizer), "--no-progress", *extra, *([] if card else ["--no-card"])]
    )


def records(directory: Path, split: str) -> dict[str, list[dict]]:
    """bucket -> records of every shard of ``split``, in manifest order."""
    manifest = read_manifest(directory)
    found: dict[str, list[dict]] = {}
    for shard in manifest.shards(split):
        found.setdefault(shard.bucket, []).extend(read_shard(str(directory / shard.path), manifest.format))
    return found


def tree(directory: Path) -> dict[str, str]:
    """Every file of a build (the journal aside, which records completion order) -> sha256."""
    return {
        str(p.relative_to(directory)): sha256_file(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and ".ltsgen" not in p.parts
    }


@pytest.fixture(scope="session")
def c4_build(tmp_path_factory, tokenizer_path, real_data) -> Path:
    out = tmp_path_factory.mktemp("c4") / "data"
    assert build(out, "c4", [real_data / C4_JSONL], tokenizer_path, *C4_BUILD_ARGS, card=True) == 0
    return out


def test_every_document_in_the_bucket_of_its_own_length_none_lost(c4_build, tokenizer_path, real_data):
    tokenizer = load_tokenizer(tokenizer_path)
    texts = {
        f"c4-{hashlib.sha1(r['text'].encode()).hexdigest()[:16]}": r["text"]
        for r in json_lines(real_data / C4_JSONL)
    }
    assert len(texts) == 400  # the sample has no exact duplicates
    manifest = read_manifest(c4_build)
    assert manifest.buckets == ["0-256", "256-512", "512-1024", "1024-2048", "2048-4096", "4096-inf"]
    assert (
        manifest.tokenizer["sha256"]
        == sha256_file(c4_build / "tokenizer.json")
        == sha256_file(tokenizer_path)
    )
    seen: list[str] = []
    for split in ("train", "validation", "test"):
        for bucket, rows in records(c4_build, split).items():
            lo, hi = parse_bucket_name(bucket)
            for row in rows:
                ids = np.asarray(row["input_ids"])
                assert ids.dtype == np.uint16 and row["num_tokens"] == ids.size
                assert lo <= ids.size and (hi is None or ids.size < hi)
                assert row["text"] == texts[row["id"]]
                assert ids.tolist() == tokenizer.encode(row["text"], add_special_tokens=False).ids
                seen.append(row["id"])
    held_out = {i for ids in manifest.extra["eval"]["documents"].values() for i in ids}
    assert len(seen) == len(set(seen)) == 400 - len(held_out)
    assert set(seen) | held_out == set(texts) and not set(seen) & held_out
    cleaning = manifest.extra["statistics"]["Cleaning"]
    assert cleaning["documents read"] == 400 and cleaning["training documents"] == len(seen)
    card = (c4_build / "README.md").read_text(encoding="utf-8")
    assert "Training buckets" in card and "Evaluation sets" in card and "ltsgen buckets --source c4" in card
    # per bucket and source: the training buckets, then each evaluation set of its own, by length
    table = card.split("Token lengths per bucket and source:\n")[1].strip().split("\n\n")[0].splitlines()[2:]
    rows = [row.split(" | ")[:3] for row in table]
    held = [[f"| {split}/{length}", source, str(EVAL_N)] for split, source in (("eval", "c4"), ("eval_concat", "-"))
            for length in LENGTHS.split(",")]  # fmt: skip
    assert [row[0].removeprefix("| ") for row in rows[: -len(held)]] == manifest.buckets
    assert rows[-len(held) :] == held


def test_evaluation_sets_are_exact_and_nested(c4_build, tokenizer_path, real_data):
    tokenizer = load_tokenizer(tokenizer_path)
    full = {}
    for row in json_lines(real_data / C4_JSONL):
        key = f"c4-{hashlib.sha1(row['text'].encode()).hexdigest()[:16]}"
        full[key] = np.array(tokenizer.encode(row["text"], add_special_tokens=False).ids)
    eligible = {
        length: sum(ids.size >= length for ids in full.values()) for length in map(int, LENGTHS.split(","))
    }
    manifest = read_manifest(c4_build)
    evals = records(c4_build, "eval")
    lengths = sorted(map(int, evals))
    assert lengths == manifest.extra["eval"]["lengths"] == list(eligible)
    for length in lengths:
        rows = evals[str(length)]
        assert len(rows) == min(EVAL_N, eligible[length])
        assert [r["meta"]["document_id"] for r in rows] == manifest.extra["eval"]["documents"][str(length)]
        for row in rows:
            document = row["meta"]["document_id"]
            assert row["num_tokens"] == len(row["input_ids"]) == length
            assert np.array_equal(row["input_ids"], full[document][:length])
    for short, long in zip(lengths, lengths[1:], strict=False):
        longer = evals[str(long)]
        shorter = evals[str(short)][: len(longer)]  # the longer length's documents come first, same order
        for a, b in zip(shorter, longer, strict=True):
            assert a["meta"]["document_id"] == b["meta"]["document_id"]
            assert np.array_equal(a["input_ids"], b["input_ids"][:short])

    eos = manifest.tokenizer["eos_id"]
    held_out = sorted(
        {r["meta"]["document_id"] for rows in evals.values() for r in rows}, key=list(full).index
    )
    stream = np.concatenate([np.append(full[d], eos) for d in held_out])
    concat = records(c4_build, "eval_concat")
    cut = [s for s in manifest.shards("eval_concat") if s.bucket == "4096"]  # 8 windows of 4,096 tokens
    assert len(cut) == 2 and all(s.tokens <= 20000 for s in manifest.shards("eval_concat"))
    for length in lengths:
        rows = concat[str(length)]
        assert len(rows) == min(EVAL_N, stream.size // length)
        for number, row in enumerate(rows):
            assert np.array_equal(row["input_ids"], stream[number * length : (number + 1) * length])


def test_worker_count_changes_no_byte(c4_build, tmp_path, tokenizer_path, real_data):
    out = tmp_path / "two"
    assert build(out, "c4", [real_data / C4_JSONL], tokenizer_path, *C4_BUILD_ARGS, "--workers", "2") == 0
    card = {"README.md", "length_histogram.png", "token_length_histogram.png"}  # rendered from the rest
    assert tree(out) == {k: v for k, v in tree(c4_build).items() if k not in card}


def test_formats_agree_and_duplicates_across_files_are_removed(tmp_path, tokenizer_path, real_data, capsys):
    papers = tmp_path / "papers.jsonl"  # three arXiv papers: about 34k, 4k and 66k tokens
    papers.write_bytes(b"".join((real_data / ARXIV).read_bytes().splitlines(keepends=True)[:3]))
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(papers.read_bytes())
    rows = {}
    for fmt in ("parquet", "webdataset", "jsonl.zst"):
        out = tmp_path / fmt.replace(".", "_")
        extra = [
            "--format",
            fmt,
            "--bucket-lengths",
            "8192,32768",
            "--eval-sequences",
            "1",
            "--splits",
            "train=1",
        ]
        assert build(out, "redpajama-arxiv", [papers, copy], tokenizer_path, *extra) == 0
        manifest = read_manifest(out)
        assert manifest.extra["statistics"]["Cleaning"]["duplicates removed"] == 3
        train = records(out, "train")
        assert sorted(train) == ["0-8192", "32768-inf"]
        rows[fmt] = [
            (r["id"], r["text"], r["input_ids"].tolist(), r["meta"]) for b in train.values() for r in b
        ]
        rows[fmt] += [(r["id"], r["input_ids"].tolist()) for b in records(out, "eval").values() for r in b]
    assert rows["parquet"] == rows["webdataset"] == rows["jsonl.zst"]
    assert len(rows["parquet"]) == 2 + 2  # two training papers, one held-out paper at 8192 and 32768
    assert "duplicates removed 3" in capsys.readouterr().out


def test_rerun_is_a_no_op_and_other_arguments_are_refused(c4_build, tokenizer_path, real_data, capsys):
    before = tree(c4_build)
    assert build(c4_build, "c4", [real_data / C4_JSONL], tokenizer_path, *C4_BUILD_ARGS, card=True) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert tree(c4_build) == before
    assert build(c4_build, "c4", [real_data / C4_JSONL], tokenizer_path, "--eval-sequences", "3") == 2
    error = capsys.readouterr().err.strip()
    assert "holds a build with other arguments" in error and "\n" not in error
    # an --out that is never writable is said before anything is read there (before: the Hub asked, offline)
    assert build("hf://datasets/someone/c4", "c4", [real_data / C4_JSONL], tokenizer_path) == 2
    assert capsys.readouterr().err.startswith(
        "ltsgen buckets: error: hf://datasets/someone/c4: hf:// is read-only"
    )


def _cli(*args: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "ltsgen"), *args],
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _kill_when(process: subprocess.Popen, ready) -> None:
    """kill -9 the build as soon as ``ready()`` holds; its worker processes must end with it."""
    try:
        wait_until(process, ready, timeout=60.0)
        kill_9(process)
    finally:
        end(process)


def test_kill_9_in_either_pass_then_rerun_gives_the_uninterrupted_result(
    tmp_path, tokenizer_path, real_data, capsys
):
    args = [
        "buckets",
        "--source",
        "c4",
        "--input",
        str(real_data / C4_GZ),
        "--tokenizer",
        str(tokenizer_path),
    ]
    args += [
        "--bucket-lengths",
        LENGTHS,
        "--eval-sequences",
        "4",
        "--shard-tokens",
        "4000",
        "--no-progress",
        "--no-card",
    ]
    reference, out = tmp_path / "reference", tmp_path / "killed"
    assert main([*args, "--out", str(reference)]) == 0

    chunks = out / ".ltsgen" / "chunks"
    _kill_when(_cli(*args, "--out", str(out), "--workers", "2"), lambda: any(chunks.glob("chunk-*.arrow")))
    assert not (out / "manifest.json").exists()
    journal = out / ".ltsgen" / "journal.jsonl"
    _kill_when(
        _cli(*args, "--out", str(out)), lambda: journal.exists() and journal.read_text().count("\n") >= 5
    )
    assert not (out / "manifest.json").exists()
    capsys.readouterr()
    assert (
        main([*args, "--out", str(out)]) == 0
    )  # the rerun, in this process: the kills are the subprocesses'
    stdout = capsys.readouterr().out
    assert "resumed" in stdout and "kept from an earlier run" in stdout
    assert tree(out) == tree(reference)
    assert not chunks.exists()


@pytest.fixture
def c4_lines(real_data) -> list[bytes]:
    return (real_data / C4_JSONL).read_bytes().splitlines()[:40]


def _bad_input_cases(tmp_path: Path, real_data: Path, lines: list[bytes]) -> list[tuple[list[str], str]]:
    cases = []
    malformed = tmp_path / "malformed.jsonl"
    malformed.write_bytes(b"\n".join([*lines[:6], b'{"text": "cut', *lines[6:]]) + b"\n")
    cases.append((["c4", str(malformed)], rf"{malformed}:7: malformed JSON"))
    missing = tmp_path / "missing.jsonl"
    missing.write_bytes(b"\n".join([*lines[:2], b'{"url": "https://example.org/"}', *lines[2:]]) + b"\n")
    cases.append((["c4", str(missing)], rf"{missing}:3: missing text field 'text'"))
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes((real_data / C4_GZ).read_bytes()[:200_000])
    cases.append((["c4", str(gz)], rf"{gz}:\d+: truncated gzip stream"))
    zst = tmp_path / "cut.jsonl.zst"
    write_pile_zst(zst, real_data)
    zst.write_bytes(zst.read_bytes()[:300_000])
    cases.append((["pile", str(zst)], rf"{zst}:\d+: truncated zstd stream"))
    return cases


def test_bad_input_one_line_error_or_counted_skip(tmp_path, tokenizer_path, real_data, c4_lines, capsys):
    for number, (source_input, message) in enumerate(_bad_input_cases(tmp_path, real_data, c4_lines)):
        source, path = source_input
        out = tmp_path / f"out{number}"
        assert build(out, source, [path], tokenizer_path, "--eval-sequences", "0") == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and error.startswith("ltsgen buckets: error: ")
        assert __import__("re").search(message, error), error
        assert "Traceback" not in error and not (out / "manifest.json").exists()
        assert (
            build(out, source, [path], tokenizer_path, "--eval-sequences", "0", "--skip-bad", "--overwrite")
            == 0
        )
        statistics = read_manifest(out).extra["statistics"]["Cleaning"]
        assert sum(v for k, v in statistics.items() if k.startswith("skipped: ")) == 1
        capsys.readouterr()


def test_a_tokenizer_without_an_end_of_text_token_is_named(tmp_path, tokenizer_path, real_data, capsys):
    """Before: "the tokenizer has none of the end-of-text tokens ...", without saying which file."""
    import json

    content = json.loads(tokenizer_path.read_text())
    content["added_tokens"] = []
    content["model"]["vocab"].pop("<|endoftext|>")
    without = tmp_path / "no-eos.json"
    without.write_text(json.dumps(content))
    assert build(tmp_path / "out", "c4", [real_data / C4_JSONL], without, "--eval-sequences", "0") == 2
    assert capsys.readouterr().err.startswith(
        f"ltsgen buckets: error: {without}: the tokenizer has none of the end-of-text tokens"
    )


def test_a_corpus_all_held_out_says_so_and_draws_its_card_without_a_warning(
    tmp_path, tokenizer_path, c4_lines, capsys
):
    """20 documents, 100 evaluation sequences asked per length: every document is held out. Before: exit 0
    in silence, and matplotlib's "No artists with labels found to put in legend" from the card."""
    import warnings

    small = tmp_path / "small.jsonl"
    small.write_bytes(b"\n".join(c4_lines[:20]) + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (
            build(tmp_path / "out", "c4", [small], tokenizer_path, "--bucket-lengths", "64,256", card=True)
            == 0
        )
    assert (
        "note: every document went to the evaluation sets (100 per length asked): train, validation, test are empty"
        in (capsys.readouterr().out)
    )
    # an evaluation length no document reaches: before, exit 0 with only "eval 100000: 0 sequences"
    assert build(tmp_path / "long", "c4", [small], tokenizer_path, "--bucket-lengths", "64,256",
                 "--eval-lengths", "64,100000", "--eval-sequences", "2") == 0  # fmt: skip
    assert (
        "note: no document reaches 100000 tokens: no evaluation set of documents of that length (lower "
        "--eval-lengths, or add longer documents)" in capsys.readouterr().out
    )
    # most documents held out (before: the counts printed, and nothing said of them)
    assert build(tmp_path / "most", "c4", [small], tokenizer_path, "--bucket-lengths", "64,256",
                 "--eval-lengths", "64,256", "--eval-sequences", "12") == 0  # fmt: skip
    manifest = read_manifest(tmp_path / "most")
    held_out = len({d for chosen in manifest.extra["eval"]["documents"].values() for d in chosen})
    left = sum(
        shard.samples for split in ("train", "validation", "test") for shard in manifest.splits.get(split, [])
    )
    assert 0 < left < held_out
    assert (
        f"note: the evaluation sets hold {held_out} documents, more than the {left} left to train, validation, "
        "test; a smaller --eval-sequences (12 per length) keeps more to train on" in capsys.readouterr().out
    )


def test_unclean_documents_counted_or_strict(tmp_path, tokenizer_path, c4_lines, capsys):
    path = tmp_path / "unclean.jsonl"
    path.write_bytes(
        b"\n".join([*c4_lines[:3], b'{"text": " "}', b'{"text": "x \xff"}', *c4_lines[3:]]) + b"\n"
    )
    assert build(tmp_path / "a", "c4", [path], tokenizer_path, "--eval-sequences", "0") == 0
    cleaning = read_manifest(tmp_path / "a").extra["statistics"]["Cleaning"]
    assert cleaning["skipped: empty"] == 1 and cleaning["skipped: invalid UTF-8"] == 1
    assert cleaning["training documents"] == 40
    capsys.readouterr()
    assert build(tmp_path / "b", "c4", [path], tokenizer_path, "--strict") == 2
    assert capsys.readouterr().err == f"ltsgen buckets: error: {path}:4: empty document (--strict)\n"


def test_cli_errors_in_a_real_process_have_no_traceback(tmp_path, real_data):
    process = _cli(
        "buckets", "--source", "c4", "--input", str(real_data / C4_GZ), "--out", str(tmp_path / "x"),
        "--tokenizer", "nobody-here/no-such-tokenizer",
    )  # fmt: skip
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 2
    lines = stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ltsgen buckets: error: nobody-here/no-such-tokenizer: ")
