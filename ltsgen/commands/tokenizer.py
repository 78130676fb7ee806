"""``ltsgen tokenizer``: train a byte-level BPE tokenizer on a corpus or on a built dataset directory, and
save it as a Hugging Face tokenizer folder, a ``tokenizer.json``, or attached to the dataset itself."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

from ltsgen.commands import add_command, number, storage_options
from ltsgen.commands.corpus_options import (
    DEFAULT_HF_SPLIT,
    add_reader_arguments,
    check_source_options,
    reader_options,
    screen,
)

SUMMARY = "train a byte-level BPE tokenizer on a corpus or a built dataset (or attach one to it)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "tokenizer",
        summary=SUMMARY,
        description="Train a byte-level BPE tokenizer (GPT-2 style, the Hugging Face tokenizers library) with "
        "<|endoftext|> as its end-of-text token, on documents read with --source/--input or on the "
        "train split of a built dataset directory (--data).\n\n"
        "Where it goes: --out NAME.json writes that tokenizer.json alone (what `ltsgen buckets "
        "--tokenizer` and `ltsgen compare --tokenizer` take); --out FOLDER writes a complete Hugging "
        "Face tokenizer folder (tokenizer.json, tokenizer_config.json, special_tokens_map.json) that "
        "transformers.AutoTokenizer.from_pretrained(FOLDER) loads with its eos token; with --data and "
        "no --out, the tokenizer is attached to the dataset: DIR/tokenizer.json (with the files "
        "AutoTokenizer.from_pretrained(DIR) reads), recorded in its manifest, and the token ids of every "
        "split stored in DIR/tokens/ (published shard by shard; a rerun after an interruption resumes), so "
        "that StreamingDataset(DIR, seq_len=N) reads the ids instead of tokenizing the text.",
        examples=[
            "ltsgen tokenizer --data lts --vocab-size 2048                  # attach to the dataset lts",
            "ltsgen tokenizer --data lts --vocab-size 2048 --out lts-tokenizer  # a Hugging Face folder",
            "ltsgen tokenizer --source c4 --input 'c4/*.json.gz' --vocab-size 8192 --out tok.json",
        ],
    )
    add_reader_arguments(parser, required=False)
    parser.add_argument(
        "--data", help="a built ltsgen dataset directory (path or URL) to train on (instead of --source)"
    )
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=8192,
        help="vocabulary size, special tokens included (at most: a small text may have fewer pairs to merge)",
    )
    parser.add_argument(
        "--max-documents",
        type=number(int, {"at_least": 1}),
        metavar="N",
        help="train on at most this many documents (the first ones)",
    )
    parser.add_argument(
        "--out",
        help="NAME.json for the tokenizer.json alone, or a folder for a Hugging Face tokenizer folder (a "
        "path or s3:// gs:// file:// URL); required with --source (with --data, leaving it out attaches "
        "the tokenizer to the dataset)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def _dataset_texts(directory, policy) -> Iterator[str]:
    """The texts of the train split (else the first split) of a dataset directory (a ``Storage``), those
    longer than ``--max-doc-chars`` skipped and counted in ``policy`` (a ``Screen``)."""
    from ltsgen.loaders.contract import TRAIN_SPLIT, read_manifest
    from ltsgen.loaders.formats import decode_shard

    manifest = read_manifest(directory)
    split = TRAIN_SPLIT if TRAIN_SPLIT in manifest.splits else next(iter(manifest.splits))
    for shard in manifest.shards(split):
        data, where = directory.read_bytes(shard.path), directory.location(shard.path)
        shard.check_bytes(data, where)  # a changed shard's text would train the tokenizer without a word
        for record in decode_shard(data, manifest.format, where, ["text"]).records():
            if policy.max_chars and len(record["text"]) > policy.max_chars:
                policy.too_long()
            else:
                yield record["text"]


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ltsgen.attach import attach_tokenizer, attachable_manifest
    from ltsgen.build import counted
    from ltsgen.corpora.readers import read_documents
    from ltsgen.errors import UsageError
    from ltsgen.loaders.storage import Storage
    from ltsgen.tokenizer import TokenizerError, check_free_target, save_tokenizer, train_tokenizer

    if (args.data is None) == (args.source is None):
        raise UsageError("give either --data DIR or --source with --input")
    if args.source and not (args.input and args.out):
        raise UsageError("--source needs --input and --out")
    if args.data is not None:  # a built dataset's train split is read as it is: these would change nothing
        given = {"--input": args.input, "--text-field": args.text_field, "--skip-bad": args.skip_bad,
                 "--strict": args.strict, "--hf-split": args.hf_split != DEFAULT_HF_SPLIT}  # fmt: skip
        ignored = next((option for option, value in given.items() if value), None)
        if ignored:
            raise UsageError(
                f"{ignored} applies to --source, not --data (a built dataset's records are read as they are)"
            )
    check_source_options(args)
    options = storage_options(args)
    data = None if args.data is None else Storage(args.data, options)
    if args.out is None:
        attachable_manifest(data)  # refuse before the training, not after
    else:
        check_free_target(args.out, options)
    started = time.perf_counter()
    counts = {"documents": 0, "characters": 0}
    policy = screen(args)

    def texts() -> Iterator[str]:
        if data is not None:
            stream = _dataset_texts(data, policy)
        else:
            stream = (d.text for d in read_documents(args.source, args.input, reader_options(args), policy))
        with tqdm(desc="reading", unit=" documents", disable=args.no_progress) as bar:
            for number, text in enumerate(stream):
                if args.max_documents is not None and number >= args.max_documents:
                    return
                counts["documents"] += 1
                counts["characters"] += len(text)
                bar.update()
                yield text

    tokenizer = train_tokenizer(texts(), args.vocab_size)
    if counts["documents"] == 0:  # as `ltsgen buckets` says it: what was read, and why none of it was kept
        raise TokenizerError(policy.nothing_kept(args.data or _inputs(args.input), "train on"))
    if args.out is None:
        entry, previous, kept, card_note = attach_tokenizer(
            data, tokenizer, progress=not args.no_progress, max_doc_chars=args.max_doc_chars
        )
        saved = data.location(entry["path"])
        stored = sum(shard["tokens"] for shard in entry["shards"].values())
        resumed = f", {kept} of them kept from an interrupted run" if kept else ""
        if previous is None:
            replaced = ""
        elif previous.get("sha256") == entry["sha256"]:
            replaced = " (the same tokenizer as before)"
        else:
            replaced = " (replacing the earlier one)"
        note = (
            f"; attached to {data} in its manifest{replaced}, "
            f"with the token ids of its {counted(len(entry['shards']), 'shard')} ({stored:,} tokens{resumed})"
        )
    else:
        saved, note, card_note = save_tokenizer(tokenizer, args.out, options), "", None
    size = tokenizer.get_vocab_size()
    short = (
        f" (of {args.vocab_size:,} asked: the text has no more pairs to merge)"
        if size < args.vocab_size
        else ""
    )
    print(
        f"{saved}: byte-level BPE, vocabulary {size:,}{short}, trained on "
        f"{counts['documents']:,} documents ({counts['characters']:,} characters) in "
        f"{time.perf_counter() - started:.1f}s{note}"
    )
    if policy.counts:
        print("  " + ", ".join(f"{kind} {count:,}" for kind, count in sorted(policy.counts.items())))
    if card_note:
        print(f"  note: {card_note}")
    return 0


def _inputs(inputs: list[str]) -> str:
    """The --input values as a message names them: the first, and how many more."""
    return inputs[0] + (f" and {len(inputs) - 1} more inputs" if len(inputs) > 1 else "")
