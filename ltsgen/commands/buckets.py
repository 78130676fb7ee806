"""``ltsgen buckets``: real corpora cut into token-length buckets, with exact-length evaluation sets."""

from __future__ import annotations

import argparse
import os

from ltsgen.commands import (
    add_command,
    add_engine_arguments,
    add_hidden_alias,
    engine_from,
    integers,
    number,
    storage_options,
)
from ltsgen.commands.corpus_options import add_reader_arguments, reader_options
from ltsgen.loaders.contract import FORMATS

DEFAULT_LENGTHS = "512,1024,2048,4096,8192,16384,32768"


SUMMARY = "tokenize a corpus (C4, the Pile, RedPajama arXiv, The Stack, HF, text) into length buckets"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "buckets",
        summary=SUMMARY,
        description="Read a corpus as a stream, drop empty, invalid, too long and exactly duplicated documents, "
        "tokenize, hold out exact-length evaluation sets and write the rest into token-length buckets "
        "DIR/<split>/<lo>-<hi>/shard-NNNNN.<ext> ([0,512), [512,1024), ..., [32768,inf)). Evaluation sets: "
        "DIR/eval/<L>/ holds --eval-sequences sequences of exactly L tokens, each the first L tokens of one "
        "held-out document, nested across lengths; --eval-concat adds DIR/eval_concat/<L>/ (held-out "
        "documents joined with EOS). Output is byte-identical for any --workers; a killed build resumes; "
        "datasets.load_dataset(DIR) reads it.",
        examples=[
            "ltsgen buckets --source c4 --input 'c4/*.json.gz' --tokenizer tok.json --out c4-buckets",
            "ltsgen buckets --source redpajama-arxiv --input arxiv.jsonl --tokenizer tok.json --out arxiv "
            "--bucket-lengths 1024,4096,16384 --eval-concat --workers 2",
            "ltsgen buckets --source c4 --input 's3://corpora/c4/en/*.json.gz' --tokenizer tok.json "
            "--out s3://builds/c4-buckets --engine ray --ray-address auto",
        ],
    )
    add_reader_arguments(parser)
    parser.add_argument(
        "--out",
        required=True,
        help="the dataset directory to write: a local path, or s3://, gs:// or file:// URL",
    )
    parser.add_argument(
        "--tokenizer",
        required=True,
        help="a tokenizer.json (or a folder with one), local or at a URL, or a Hugging Face Hub name",
    )
    parser.add_argument(
        "--bucket-lengths", default=DEFAULT_LENGTHS, help="bucket boundaries in tokens, increasing"
    )
    add_hidden_alias(parser, "--lengths", "bucket_lengths")
    parser.add_argument("--eval-lengths", help="evaluation lengths L, when not the --bucket-lengths")
    parser.add_argument(
        "--eval-sequences",
        type=number(int, {"at_least": 0}),
        default=100,
        metavar="N",
        help="evaluation sequences per length (0: none)",
    )
    add_hidden_alias(parser, "--eval-per-length", "eval_sequences", type=number(int, {"at_least": 0}))
    parser.add_argument(
        "--eval-concat", action="store_true", help="also write the concatenated-stream evaluation sets"
    )
    parser.add_argument(
        "--splits",
        default="train=0.98,validation=0.01,test=0.01",
        help="training splits (fractions, given in any order), assigned from the document id",
    )
    parser.add_argument("--format", default="parquet", choices=list(FORMATS), help="shard format")
    parser.add_argument(
        "--shard-tokens",
        type=number(int, {"at_least": 1}),
        default=1 << 24,
        help="at most this many tokens per shard",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the evaluation-document draw (any integer)"
    )
    add_engine_arguments(parser, "tokenizing and shard jobs")
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace a build with other arguments in --out (removing only what it wrote), or build beside "
        "other files (keeping them)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--no-card",
        action="store_true",
        help="skip the data card (README.md; `ltsgen card DIR` writes it later)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one core per worker; --workers scales
    from ltsgen.build import parse_splits
    from ltsgen.corpora.buckets import check_lengths
    from ltsgen.corpora.pipeline import BucketConfig, build_buckets
    from ltsgen.errors import LtsgenError, UsageError
    from ltsgen.loaders.storage import Storage, StorageError

    if not args.input:
        raise UsageError("--input is required (files, folders or globs; dataset names for --source hf)")
    if args.workers is not None and args.workers < 1:  # --workers is shared with `ltsgen stories`: its words
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    try:
        lengths = check_lengths(integers(args.bucket_lengths, "--bucket-lengths", "512,1024,2048"))
        eval_lengths = lengths
        if args.eval_lengths is not None:  # else the bucket lengths
            eval_lengths = check_lengths(
                integers(args.eval_lengths, "--eval-lengths", "512,1024"), "--eval-lengths"
            )
        config = BucketConfig(
            source=args.source,
            inputs=args.input,
            out=Storage(args.out, storage_options(args)),
            tokenizer=args.tokenizer,
            bucket_lengths=lengths,
            eval_lengths=eval_lengths,
            eval_sequences=args.eval_sequences,
            eval_concat=args.eval_concat,
            splits=parse_splits(args.splits),
            fmt=args.format,
            shard_tokens=args.shard_tokens,
            seed=args.seed,
            reader=reader_options(args),
            skip_bad=args.skip_bad,
            strict=args.strict,
            max_doc_chars=args.max_doc_chars,
        )
        with engine_from(args) as engine:
            result = build_buckets(
                config,
                engine=engine,
                overwrite=args.overwrite,
                progress=not args.no_progress,
                card=not args.no_card,
            )
    except LtsgenError:  # the builder's own one-line errors (some are ValueErrors too)
        raise
    except ValueError as error:  # e.g. --bucket-lengths that are no increasing token counts
        raise UsageError(str(error)) from None
    except OSError as error:  # unreadable input, full disk, unwritable output
        raise StorageError(f"{error.filename or args.out}: {error.strerror or error}") from None
    print(result.summary(args.out))
    return 0
