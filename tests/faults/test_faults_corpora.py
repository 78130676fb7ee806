"""Faults of the corpus readers as ``ltsgen buckets`` and ``ltsgen tokenizer`` meet them: JSON nested
100,000 deep, one 50 MB document, an empty input, a 0-byte compressed file (a failed download), a corrupt
parquet file. Each is one line naming the file, or a skip counted under its own cause with ``--skip-bad``."""

from __future__ import annotations

import bz2
import gzip
import json
import lzma
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard
from faults import ENV, LTSGEN, REPO, corpus_and_tokenizer

from ltsgen.cli import main
from ltsgen.corpora import inputs
from ltsgen.corpora.readers import ReaderOptions, Screen, _split_stream, read_documents
from ltsgen.loaders.contract import Manifest, read_manifest, write_manifest
from ltsgen.shards import ShardWriter

NESTED = b'{"text": "deep", "meta": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    return corpus_and_tokenizer(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def corpus(made) -> Path:
    return made[0]


@pytest.fixture(scope="module")
def tokenizer(made) -> Path:
    return made[1]


def buckets(out: Path, inputs_: list[Path], tokenizer: Path, *extra: str) -> list[str]:
    argv = ["buckets", "--source", "c4", "--input", *map(str, inputs_), "--tokenizer", str(tokenizer)]
    return [*argv, "--out", str(out), "--eval-sequences", "0", "--no-progress", "--no-card", *extra]


def cleaning(directory: Path) -> dict[str, int]:
    return read_manifest(directory).extra["statistics"]["Cleaning"]


def error_line(capsys, command: str) -> str:
    """The one line ``ltsgen COMMAND`` printed to stderr (run in this process)."""
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ltsgen {command}: error: "), lines
    return lines[0]


def test_json_nested_100000_deep_is_one_line_or_counted(tmp_path, corpus, tokenizer, capsys):
    bad = tmp_path / "nested.jsonl"
    bad.write_bytes(corpus.read_bytes() + NESTED + b"\n")
    line = sum(1 for _ in corpus.open()) + 1
    assert main(buckets(tmp_path / "a", [bad], tokenizer)) == 2
    assert error_line(capsys, "buckets").endswith(
        f"{bad}:{line}: JSON nested too deeply to read (use --skip-bad to count and skip such lines)"
    )
    assert main(buckets(tmp_path / "a", [bad], tokenizer, "--skip-bad")) == 0
    assert cleaning(tmp_path / "a")["skipped: JSON nested too deeply"] == 1
    assert cleaning(tmp_path / "a")["training documents"] == 60

    argv = [
        "tokenizer",
        "--source",
        "c4",
        "--input",
        str(bad),
        "--vocab-size",
        "300",
        "--out",
        str(tmp_path / "t.json"),
        "--no-progress",
    ]
    assert main(argv) == 2
    assert f"{bad}:{line}: JSON nested too deeply" in error_line(capsys, "tokenizer")
    assert main([*argv, "--skip-bad"]) == 0
    assert "skipped: JSON nested too deeply 1" in capsys.readouterr().out


def peak_rss_mib(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    """Run ``ltsgen ARGS`` in a fresh process and return it with its peak resident memory."""
    code = (
        "import resource, subprocess, sys\n"
        "run = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "sys.stdout.write(run.stdout); sys.stderr.write(run.stderr)\n"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024)\n"
        "sys.exit(run.returncode)\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", code, LTSGEN, *map(str, args)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
    )
    *out, peak = run.stdout.strip().splitlines()
    run.stdout = "\n".join(out)
    return run, float(peak)


def test_one_50_mb_document_is_skipped_and_counted_in_bounded_memory(tmp_path, corpus, tokenizer):
    big = tmp_path / "big.jsonl"
    text = ("the little cat saw the big dog and ran home " * 1_200_000)[:50_000_000]
    big.write_text(json.dumps({"text": text, "url": "https://example.org/big"}) + "\n" + corpus.read_text())
    out = tmp_path / "buckets"
    run, peak = peak_rss_mib(*buckets(out, [big], tokenizer))
    assert run.returncode == 0, run.stderr
    assert cleaning(out)["skipped: line longer than 7,048,576 bytes"] == 1
    assert cleaning(out)["training documents"] == 60
    assert peak < 1000, f"{peak:.0f} MiB"  # 6.5 GB when the document was tokenized whole

    run, peak = peak_rss_mib(
        "tokenizer",
        "--source",
        "c4",
        "--input",
        big,
        "--vocab-size",
        "300",
        "--out",
        tmp_path / "t.json",
        "--no-progress",
    )
    assert run.returncode == 0, run.stderr
    assert "trained on 60 documents" in run.stdout
    assert "skipped: line longer than 7,048,576 bytes 1" in run.stdout
    assert peak < 1000, f"{peak:.0f} MiB"  # 4.4 GB when trained on


def test_max_doc_chars_is_recorded_and_counts_what_it_skips(tmp_path, corpus, tokenizer):
    out = tmp_path / "b"
    assert main(buckets(out, [corpus], tokenizer, "--max-doc-chars", "5000")) == 0
    lengths = [len(json.loads(line)["text"]) for line in corpus.open()]
    skipped = sum(length > 5000 for length in lengths)
    assert 0 < skipped < len(lengths)
    assert cleaning(out)["skipped: longer than 5,000 characters"] == skipped
    assert cleaning(out)["training documents"] == len(lengths) - skipped
    assert read_manifest(out).builder["arguments"]["max_doc_chars"] == 5000
    assert "--max-doc-chars 5000" in read_manifest(out).extra["card"]["command"]


def test_empty_input_is_refused_in_one_line_and_writes_nothing(tmp_path, tokenizer, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    out = tmp_path / "out"
    assert main(buckets(out, [empty], tokenizer)) == 2
    assert error_line(capsys, "buckets").endswith(f"{empty}: no documents to build from; nothing was written")
    assert [p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()] == [".ltsgen/lock"]

    blank = tmp_path / "blank.jsonl"
    blank.write_bytes(b'{"text": "  "}\n\n')
    assert main(buckets(out, [blank], tokenizer)) == 2
    assert error_line(capsys, "buckets").endswith(
        f"{blank}: no documents to build from (skipped: empty 1); nothing was written"
    )


@pytest.mark.parametrize("suffix, codec", [(".json.gz", "gzip"), (".jsonl.zst", "zstd")])
def test_a_0_byte_compressed_input_is_a_truncated_stream(tmp_path, corpus, tokenizer, capsys, suffix, codec):
    good = tmp_path / f"good{suffix}"
    raw = corpus.read_bytes()
    good.write_bytes(
        gzip.compress(raw, mtime=0) if codec == "gzip" else zstandard.ZstdCompressor().compress(raw)
    )
    failed = tmp_path / f"failed-download{suffix}"
    failed.write_bytes(b"")
    assert main(buckets(tmp_path / "a", [good, failed], tokenizer)) == 2
    assert error_line(capsys, "buckets").endswith(
        f"{failed}:1: truncated {codec} stream (the file is empty) (use --skip-bad to count and skip such lines)"
    )
    assert main(buckets(tmp_path / "a", [good, failed], tokenizer, "--skip-bad")) == 0
    assert cleaning(tmp_path / "a")["skipped: truncated stream"] == 1
    assert cleaning(tmp_path / "a")["training documents"] == 60


def test_corrupt_parquet_is_counted_under_its_own_cause(tmp_path, corpus, tokenizer):
    stack = tmp_path / "stack"
    stack.mkdir()
    texts = [json.loads(line)["text"] for line in corpus.open()]
    pq.write_table(pa.table({"content": texts, "lang": ["Python"] * len(texts)}), stack / "a.parquet")
    (stack / "b.parquet").write_bytes(b"PAR1" + np.random.default_rng(0).bytes(5000))
    argv = buckets(tmp_path / "out", [stack], tokenizer, "--skip-bad")
    argv[argv.index("c4")] = "stack"
    assert main(argv) == 0
    counts = cleaning(tmp_path / "out")
    assert counts["skipped: unreadable parquet"] == 1 and "skipped: truncated stream" not in counts
    assert counts["training documents"] == len(texts)


@pytest.mark.parametrize("read_size", [1, 2, 3, 7, 64])
def test_lines_and_separated_documents_across_any_chunk_boundary(tmp_path, monkeypatch, read_size):
    documents = ["first", "", "a longer second document", "x", "third<|end|>", "last"]
    monkeypatch.setattr(inputs, "READ_SIZE", read_size)  # the same file, cut into chunks of this size
    lines = tmp_path / "lines.jsonl"
    lines.write_text("\n".join(json.dumps({"text": d}) for d in documents) + "\n")
    screen = Screen(skip_bad=True)
    assert [d.text for d in read_documents("c4", [str(lines)], ReaderOptions(), screen)] == [
        d for d in documents if d
    ]
    text = tmp_path / "docs.txt"
    text.write_text("<|end|>".join(documents))
    assert [piece.decode() for piece in _split_stream(text, "<|end|>")] == "<|end|>".join(documents).split(
        "<|end|>"
    )


def gzip_bomb(path: Path, mib: int, corpus: Path) -> Path:
    """A .json.gz whose first line holds one text of ``mib`` MiB (a few hundred KB compressed), then the
    corpus's lines."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = ("the little cat saw the big dog and ran home " * 30_000)[: 1 << 20].encode()
    parts = [compressor.compress(b'{"text": "')]
    parts += [compressor.compress(block) for _ in range(mib)]
    parts += [compressor.compress(b'"}\n' + corpus.read_bytes()), compressor.flush()]
    path.write_bytes(b"".join(parts))
    return path


def test_a_small_gzip_holding_a_256_mib_line_is_skipped_unread_in_bounded_memory(tmp_path, corpus, tokenizer):
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", 256, corpus)
    assert bomb.stat().st_size < 1_000_000
    out = tmp_path / "buckets"
    run, peak = peak_rss_mib(*buckets(out, [bomb], tokenizer))
    assert run.returncode == 0, run.stderr
    assert cleaning(out)["skipped: line longer than 7,048,576 bytes"] == 1
    assert cleaning(out)["training documents"] == 60
    assert peak < 400, f"{peak:.0f} MiB"  # the line alone is 256 MiB, and was held several times over
    run, peak = peak_rss_mib(
        "tokenizer", "--source", "c4", "--input", bomb, "--vocab-size", "300", "--out", tmp_path / "t.json"
    )
    assert run.returncode == 0, run.stderr
    assert (
        "trained on 60 documents" in run.stdout
        and "skipped: line longer than 7,048,576 bytes 1" in run.stdout
    )
    assert peak < 400, f"{peak:.0f} MiB"


@pytest.mark.parametrize("read_size", [1, 2, 3, 7, 64])
def test_long_lines_and_documents_are_skipped_as_they_stream_by_across_any_chunk_boundary(
    tmp_path, monkeypatch, read_size
):
    monkeypatch.setattr(inputs, "READ_SIZE", read_size)
    lines = [b"short", b"x" * 10, b"", b"y" * 9, b"z" * 11, b"end"]
    path = tmp_path / "lines.txt"
    path.write_bytes(b"\n".join(lines))
    expected = [(n, line if len(line) <= 9 else None) for n, line in enumerate(lines, 1)]
    assert list(inputs.read_lines(path, limit=9)) == expected
    documents = ["first", "a" * 12, "", "b" * 8, "c" * 9 + "é", "last"]
    text = tmp_path / "docs.txt"
    text.write_text("<|end|>".join(documents))
    limit = 9
    assert list(_split_stream(text, "<|end|>", limit)) == [
        d.encode() if len(d.encode()) <= limit else None for d in documents
    ]
    screen = Screen(max_chars=2)  # a file of more than 4 * 2 bytes is skipped unread
    found = read_documents("text", [str(text)], ReaderOptions(), screen)
    assert list(found) == [] and screen.counts == {"skipped: longer than 2 characters": 1}


def test_a_glob_through_links_to_its_own_folders_reads_each_file_once(tmp_path):
    root = tmp_path / "d"
    (root / "sub").mkdir(parents=True)
    for name, folder in (("a", root), ("b", root / "sub")):
        (folder / f"{name}.jsonl").write_text(json.dumps({"text": f"document {name}"}) + "\n")
    (root / "self").symlink_to(".")  # d/self/self/... never ends for glob.glob
    (root / "sub" / "up").symlink_to("..")
    (root / "twice.jsonl").symlink_to("a.jsonl")
    for pattern in (f"{root}/**/*.jsonl", f"{root}/**", str(root), f"{tmp_path}/*/**/*.jsonl"):
        texts = [d.text for d in read_documents("c4", [pattern], ReaderOptions(), Screen())]
        assert texts == ["document a", "document b"], pattern
    assert [d.text for d in read_documents("c4", [f"{root}/**.jsonl"], ReaderOptions(), Screen())] == [
        "document a"  # "**" inside a name is "*", as for glob
    ]


def test_a_compressed_stream_never_expands_much_past_a_read_at_once(tmp_path):
    big = tmp_path / "zeros.txt.zst"
    big.write_bytes(zstandard.ZstdCompressor(level=19).compress(bytes(128 << 20)))
    bomb = tmp_path / "zeros.txt.gz"
    bomb.write_bytes(gzip.compress(bytes(64 << 20), compresslevel=9))
    # bzip2 and xz expanded a kilobyte to all their output in one call (before: a 64 MB chunk, and a bzip2
    # file of 785 bytes asked for 3 GB), and an xz or zstd file could ask for a window of gigabytes
    lines = tmp_path / "newlines.txt.bz2"
    lines.write_bytes(bz2.compress(b"\n" * (64 << 20), compresslevel=9))
    xz = tmp_path / "zeros.txt.xz"
    xz.write_bytes(lzma.compress(bytes(64 << 20), preset=9))
    for path, total in ((big, 128 << 20), (bomb, 64 << 20), (lines, 64 << 20), (xz, 64 << 20)):
        assert path.stat().st_size < 100_000
        sizes = [len(chunk) for chunk in inputs.read_chunks(path)]
        assert sum(sizes) == total and max(sizes) < inputs.READ_SIZE + (32 << 20), (path, max(sizes))
    for path in (lines, xz):
        assert max(len(chunk) for chunk in inputs.read_chunks(path)) <= 2 * inputs.READ_SIZE, path
    wide = tmp_path / "wide.txt.xz"  # a dictionary of 1 GiB declared, far past what the xz tool accepts
    filters = [{"id": lzma.FILTER_LZMA2, "dict_size": 1 << 30}]
    wide.write_bytes(lzma.compress(b"text\n" * 10, format=lzma.FORMAT_XZ, filters=filters))
    with pytest.raises(
        inputs.UnreadableInput, match="xz data that needs over 256 MiB of memory .*: decompress it first"
    ):
        list(inputs.read_chunks(wide))
    legacy = tmp_path / "legacy.txt.xz"  # the .lzma format named .xz, as xz itself reads it
    legacy.write_bytes(lzma.compress(b"old\n" * 10, format=lzma.FORMAT_ALONE))
    assert b"".join(inputs.read_chunks(legacy)) == b"old\n" * 10


def test_tokenizer_on_a_dataset_skips_and_counts_documents_over_max_doc_chars(tmp_path, capsys):
    texts = ["a short story of a cat", "x" * 5000, "a dog ran home at night"]
    with ShardWriter(tmp_path / "d", "train/shard-00000.parquet", "parquet") as writer:
        for number, text in enumerate(texts):
            writer.write({"id": f"r{number}", "text": text, "source": "lts"})
    builder = {"name": "test", "version": "0", "arguments": {}}
    write_manifest(tmp_path / "d", Manifest("lts", "parquet", {"train": [writer.info]}, builder))
    argv = ["tokenizer", "--data", str(tmp_path / "d"), "--vocab-size", "260", "--max-doc-chars", "100"]
    assert main([*argv, "--out", str(tmp_path / "t.json"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "trained on 2 documents" in out and "skipped: longer than 100 characters 1" in out


@pytest.mark.parametrize("source", ["stack", "hf"])
def test_a_parquet_or_hf_text_over_max_doc_chars_is_skipped_without_a_python_copy(tmp_path, source):
    field = "content" if source == "stack" else "text"
    texts = ["a short program", "x" * (20 << 20), None, "é" * 100, "é" * 101, "the last one"]
    folder = tmp_path / source
    folder.mkdir()
    pq.write_table(pa.table({field: texts, "n": list(range(6))}), folder / "train.parquet", row_group_size=4)
    list(read_documents(source, [str(folder)], ReaderOptions(), Screen(skip_bad=True)))  # imports done
    screen = Screen(max_chars=100, skip_bad=True)
    tracemalloc.start()
    try:
        documents = list(read_documents(source, [str(folder)], ReaderOptions(), screen))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(d.text, d.meta["n"], d.where.rsplit(":", 1)[1]) for d in documents] == [
        ("a short program", 0, "row 1"),
        ("é" * 100, 3, "row 4"),
        ("the last one", 5, "row 6"),
    ]
    assert screen.counts == {"skipped: longer than 100 characters": 2, "skipped: missing text field": 1}
    assert peak < 10 << 20, peak  # the 20 MiB text was never a Python string (Arrow memory is not traced)
