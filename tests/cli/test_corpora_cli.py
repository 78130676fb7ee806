"""One CLI for ``buckets``, ``tokenizer`` and ``card``: the current option names, the earlier spellings as
hidden aliases that build the same dataset, defaults shown once by the formatter and never by hand."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from faults import corpus_and_tokenizer, tree

from ltsgen.cli import build_parser, main
from ltsgen.loaders.contract import read_manifest


def subparser(name: str) -> argparse.ArgumentParser:
    actions = build_parser()._subparsers._group_actions[0]
    return actions.choices[name]


@pytest.mark.parametrize("command", ["buckets", "tokenizer", "card"])
def test_help_shows_each_default_once_and_no_old_spelling(command):
    parser = subparser(command)
    hand_written = [a.dest for a in parser._actions if a.help and re.search(r"\(default\b", a.help)]
    assert hand_written == []  # the formatter adds "(default: X)" where there is one
    text = " ".join(parser.format_help().split())
    assert "(default: None)" not in text and not re.search(r"\(default[^)]*\) \(default", text)
    for old in ("--lengths ", "--eval-per-length", "--output", "--quiet"):
        assert old not in text


def test_buckets_defaults():
    args = subparser("buckets").parse_args(["--source", "c4", "--out", "o", "--tokenizer", "t"])
    assert args.format == "parquet" and args.max_doc_chars == 1_000_000 and args.eval_sequences == 100


def test_earlier_spellings_build_the_same_dataset(tmp_path):
    corpus, tokenizer = corpus_and_tokenizer(tmp_path, documents=30)
    common = [
        "buckets",
        "--source",
        "c4",
        "--input",
        str(corpus),
        "--tokenizer",
        str(tokenizer),
        "--no-progress",
    ]
    assert (
        main([*common, "--out", str(tmp_path / "new"), "--bucket-lengths", "256", "--eval-sequences", "2"])
        == 0
    )
    assert main([*common, "--out", str(tmp_path / "old"), "--lengths", "256", "--eval-per-length", "2"]) == 0
    assert read_manifest(tmp_path / "new").builder == read_manifest(tmp_path / "old").builder
    assert tree(tmp_path / "new") == tree(tmp_path / "old")
    assert "--bucket-lengths 256" in (tmp_path / "new" / "README.md").read_text()

    assert main(["card", str(tmp_path / "new"), "--output", str(tmp_path / "cards" / "old.md")]) == 0
    assert main(["card", str(tmp_path / "new"), "--out", str(tmp_path / "cards" / "new.md")]) == 0
    old, new = (tmp_path / "cards" / "old.md").read_text(), (tmp_path / "cards" / "new.md").read_text()
    assert old.replace("old_", "new_") == new


# ------------------------------------------------------------------ one-line refusals

REQUIRED = {
    "buckets": ["--source", "text", "--input", "corpus", "--tokenizer", "tok.json"],
    "tokenizer": ["--source", "text", "--input", "corpus"],
}


@pytest.mark.parametrize(
    ("option", "value", "problem"),
    [
        (
            "--bucket-lengths",
            "0,256",
            "--bucket-lengths: '0,256' must list positive token counts in increasing order",
        ),
        ("--eval-lengths", "-5", "--eval-lengths: '-5' must list positive token counts in increasing order"),
        # before: an empty --eval-lengths was taken for the default, the bucket lengths
        ("--eval-lengths", "", "--eval-lengths: give at least one value, e.g. 512,1024"),
        (
            "--bucket-lengths",
            "512,x",
            "--bucket-lengths '512,x': expected comma-separated integers like 512,1024,2048",
        ),
        ("--workers", "0", "--workers must be at least 1, not 0"),
        # an option another source reads: before, accepted and ignored
        ("--hf-config", "en", "--hf-config applies to --source hf, not --source text"),
        ("--subset", "ArXiv", "--subset applies to --source pile, not --source text"),
    ],
)
def test_buckets_names_the_one_option_that_is_wrong(option, value, problem, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["buckets", *REQUIRED["buckets"], "--out", str(out), option, value]) == 2
    assert capsys.readouterr().err == f"ltsgen buckets: error: {problem}\n"
    assert not out.exists()


def test_tokenizer_refuses_a_source_option_with_data(tmp_path, capsys):
    """Before: accepted with --data, which reads no source, and ignored."""
    argv = ["tokenizer", "--data", str(tmp_path / "lts"), "--separator", "<|endoftext|>"]
    assert main(argv) == 2
    assert (
        capsys.readouterr().err
        == "ltsgen tokenizer: error: --separator applies to --source text, not --data\n"
    )


def test_tokenizer_with_no_document_left_says_what_was_skipped(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for number in range(3):
        (corpus / f"doc{number}.txt").write_text(f"document number {number}, longer than ten characters\n")
    out = tmp_path / "tok.json"
    argv = ["tokenizer", "--source", "text", "--input", str(corpus), "--out", str(out), "--no-progress"]
    assert main([*argv, "--max-doc-chars", "10"]) == 2
    assert capsys.readouterr().err == (
        f"ltsgen tokenizer: error: {corpus}: no documents to train on (skipped: longer than 10 characters 3); "
        "nothing was written\n"
    )
    assert not out.exists()


@pytest.fixture(scope="module")
def text_buckets(tmp_path_factory) -> tuple[Path, list[Path], Path]:
    """(build, its 12 input files, tokenizer): a small `ltsgen buckets` build of plain text, with its card."""
    folder = tmp_path_factory.mktemp("text-buckets")
    _, tokenizer = corpus_and_tokenizer(folder, documents=30)
    inputs = []
    for number in range(12):
        inputs.append(folder / f"document-with-a-long-name-{number:02d}.txt")
        inputs[-1].write_text(f"the little dog {number} ran home under the big red sun.\n" * (number + 1))
    out = folder / "built"
    argv = ["buckets", "--source", "text", "--input", *map(str, inputs), "--tokenizer", str(tokenizer)]
    argv += ["--bucket-lengths", "64", "--eval-sequences", "0", "--splits", "train=1", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    return out, inputs, tokenizer


def test_a_build_of_another_builder_or_arguments_is_refused_in_one_short_line(text_buckets, capsys):
    out, inputs, tokenizer = text_buckets
    capsys.readouterr()
    before = tree(out)
    assert main(["stories", "--out", str(out), "--num-stories", "2", "--no-progress"]) == 2
    assert capsys.readouterr().err == (
        f"ltsgen stories: error: {out}: holds a build of ltsgen buckets, not of ltsgen stories; use another "
        "--out, or --overwrite to replace it (removes only the files that build wrote)\n"
    )
    argv = ["buckets", "--source", "text", "--input", str(inputs[0]), "--tokenizer", str(tokenizer)]
    assert main([*argv, "--bucket-lengths", "64,128", "--out", str(out), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and len(error) < 600, error
    assert error.startswith(
        f"ltsgen buckets: error: {out}: holds a build with other arguments (bucket_lengths [64] -> [64, 128], "
    )
    assert "inputs [12 items] -> [1 item]," in error and "long-name" not in error
    assert tree(out) == before


def test_card_refuses_to_copy_a_card_over_the_dataset_own_card(text_buckets, capsys):
    out = text_buckets[0]
    before = tree(out)
    for own in (out / "README.md", out / ".." / out.name / "README.md"):
        assert main(["card", str(out), "--out", str(own)]) == 2
        assert capsys.readouterr().err == (
            f"ltsgen card: error: {own}: is the card of {out} itself, which `ltsgen card` writes anyway; give "
            "--out another file\n"
        )
    assert tree(out) == before and not (out / "README_length_histogram.png").exists()
