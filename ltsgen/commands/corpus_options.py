"""The command-line options shared by every command that reads a corpus (``buckets``, ``tokenizer``): the
readers' options as arguments, and back into ``ReaderOptions``."""

from __future__ import annotations

import argparse

from ltsgen.commands import add_storage_argument, number, storage_options
from ltsgen.corpora.readers import SOURCES, ReaderOptions, Screen
from ltsgen.errors import UsageError
from ltsgen.loaders.contract import MAX_DOC_CHARS

DEFAULT_HF_SPLIT = "train"  # of --hf-split
SOURCE_HELP = (
    "c4: allenai/c4 json/json.gz lines (text, timestamp, url); "
    "pile: the Pile's jsonl/jsonl.zst (text, meta.pile_set_name; see --subset); "
    "redpajama-arxiv: RedPajama arXiv jsonl (text, meta.arxiv_id, ...); "
    "stack: The Stack parquet (content, lang, ...); "
    "hf: a Hugging Face dataset name or local folder, streamed (needs network for Hub names); "
    "text: plain text files or folders (one document per file, or see --separator)"
)


def add_reader_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    group = parser.add_argument_group("input")
    group.add_argument("--source", choices=sorted(SOURCES), required=required, help=SOURCE_HELP)
    group.add_argument(
        "--input",
        nargs="+",
        metavar="PATH",
        help="files, folders or globs (quote globs), local or s3:// gs:// hf:// URLs, read in the order "
        "given; a folder gives its files named as the source reads them (.json, .jsonl, .ndjson; .txt, .md "
        "for text; .parquet for stack; each but .md and .parquet also .gz, .zst, .bz2 or .xz); for --source "
        "hf, dataset names",
    )
    group.add_argument(
        "--subset", help="pile: keep only documents whose meta.pile_set_name is this (ArXiv, Github, ...)"
    )
    group.add_argument(
        "--text-field", help="the field holding the text, when not the source's own (text; content for stack)"
    )
    group.add_argument(
        "--separator", help="text: split each file into documents on this string (e.g. '<|endoftext|>')"
    )
    group.add_argument("--hf-config", help="hf: the dataset configuration name (e.g. en for allenai/c4)")
    group.add_argument("--hf-split", default=DEFAULT_HF_SPLIT, help="hf: the split to stream")
    group.add_argument(
        "--skip-bad",
        action="store_true",
        help="count and skip bad lines (malformed JSON, missing text field, truncated stream) instead of failing",
    )
    add_storage_argument(group)
    group.add_argument(
        "--strict",
        action="store_true",
        help="fail on empty or invalid UTF-8 documents instead of counting and skipping them",
    )
    group.add_argument(
        "--max-doc-chars",
        type=number(int, {"at_least": 0}),
        default=MAX_DOC_CHARS,
        metavar="N",
        help="skip (and count) documents longer than N characters, which bounds memory: tokenizing costs "
        "about 130 bytes per character; 0 for no limit",
    )


# the options only one source reads: given with another, they are refused rather than ignored
SOURCE_OPTIONS = {"subset": "pile", "separator": "text", "hf_config": "hf"}


def check_source_options(args: argparse.Namespace) -> None:
    """Refuse an option of one source given with another (or with ``--data``, which reads no source)."""
    for name, source in SOURCE_OPTIONS.items():
        if getattr(args, name) is not None and args.source != source:
            given = f"--source {args.source}" if args.source else "--data"
            raise UsageError(f"--{name.replace('_', '-')} applies to --source {source}, not {given}")


def reader_options(args: argparse.Namespace) -> ReaderOptions:
    check_source_options(args)
    return ReaderOptions(
        text_field=args.text_field,
        subset=args.subset,
        separator=args.separator,
        hf_config=args.hf_config,
        hf_split=args.hf_split,
        storage_options=storage_options(args) or None,
    )


def screen(args: argparse.Namespace) -> Screen:
    return Screen(skip_bad=args.skip_bad, strict=args.strict, max_chars=args.max_doc_chars)
