"""One CLI for ``buckets``, ``tokenizer`` and ``card``: the current option names, the earlier spellings as
hidden aliases that build the same dataset, defaults shown once by the formatter and never by hand."""

from __future__ import annotations

import argparse
import re

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
