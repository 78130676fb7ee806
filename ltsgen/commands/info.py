"""``ltsgen info DIR``: what a dataset directory holds, per split; ``--verify`` checks every shard."""

from __future__ import annotations

import argparse
import json
from typing import Any

from ltsgen.commands import add_command, add_storage_argument, storage_options

SUMMARY = "show what a dataset directory holds per split (records, tokens, shards, lengths); --verify"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "info",
        summary=SUMMARY,
        description="Show a dataset directory built by ltsgen, read from its manifest and shards: per split "
        "the records, the tokens when they are stored, the shards and their bytes, the length buckets, "
        "percentiles of the words (and tokens) per record and the first record, cut short; and the "
        "tokenizer. Reads the length columns of every shard. --verify also hashes every shard and "
        "compares it with the manifest's sha256 (exit status 2 when one differs).",
        examples=[
            "ltsgen info lts",
            "ltsgen info lts --verify",
            "ltsgen info s3://bucket/c4-buckets --json",
        ],
    )
    parser.add_argument(
        "directory", metavar="DIR", help="a dataset directory (a path or s3:// gs:// hf:// URL)"
    )
    parser.add_argument(
        "--verify", action="store_true", help="check every shard's sha256 against the manifest"
    )
    parser.add_argument("--json", action="store_true", help="print the same as one JSON object")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar while --verify hashes")
    add_storage_argument(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ltsgen.info import dataset_info
    from ltsgen.loaders.errors import LoaderError
    from ltsgen.loaders.storage import Storage

    try:
        info = dataset_info(
            Storage(args.directory, storage_options(args)), verify=args.verify, progress=not args.no_progress
        )
    except LoaderError as error:  # (a decoder's own message may span lines)
        raise LoaderError(" ".join(str(error).split())) from None
    print(json.dumps(info, indent=2) if args.json else describe(info))
    bad = info.get("mismatched")
    if bad:
        raise LoaderError(
            f"{len(bad)} of {info['verified']} files differ from their sha256 in {info['location']}/manifest.json"
            f": {', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''}"
        )
    return 0


def describe(info: dict[str, Any]) -> str:
    """The lines ``ltsgen info`` prints."""
    tokenizer = info["tokenizer"]
    lines = [
        f"{info['location']}: {info['source']} ({info['builder']}), {info['format']} shards",
        "tokenizer: "
        + (
            f"{tokenizer['path']} (vocabulary {_count(tokenizer.get('vocab_size'))}, eos id "
            f"{tokenizer.get('eos_id')}, sha256 {str(tokenizer.get('sha256'))[:12]})"
            + (
                ", not found in the folder (the manifest names it)"
                if info.get("tokenizer_found") is False
                else ""
            )
            if tokenizer
            else "none attached (`ltsgen tokenizer --data DIR` attaches one)"
        ),
    ]
    for split, entry in info["splits"].items():
        tokens = f", {entry['tokens']:,} tokens" if entry["tokens"] is not None else ""
        lines.append(
            f"{split}: {entry['records']:,} records, {entry['words']:,} words{tokens}, {entry['shards']} shard{'s' * (entry['shards'] != 1)}, "
            f"{_size(entry['bytes'])}"
        )
        if entry["buckets"]:
            lines.append(f"  buckets: {', '.join(entry['buckets'])}")
        for unit in ("words", "tokens"):
            spread = entry[f"{unit}_per_record"]
            if spread:
                lines.append(f"  {unit} per record: " + ", ".join(f"{k} {v:,}" for k, v in spread.items()))
        if entry["first_record"]:
            first = entry["first_record"]
            lines.append(f"  first record {first['id']} ({first['chars']:,} characters): {first['text']!r}")
    if "verified" in info:
        bad = len(info["mismatched"])
        lines.append(
            f"verified {info['verified']} files: " + (f"{bad} differ" if bad else "every sha256 matches")
        )
    return "\n".join(lines)


def _size(count: int) -> str:
    if count < 1000:
        return f"{count:,} bytes"
    scale, unit = next((s, u) for s, u in ((1e9, "GB"), (1e6, "MB"), (1e3, "KB")) if count >= s)
    return f"{count / scale:,.1f} {unit}"


def _count(value) -> str:
    """A manifest's count as ``info`` shows it: with separators, or ``unknown`` where the entry lacks it."""
    return f"{value:,}" if isinstance(value, int) else "unknown"
