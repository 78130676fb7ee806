"""``ltsgen tokenizer``: train a byte-level BPE tokenizer on a corpus or on a built dataset directory."""

from __future__ import annotations

import argparse
import time
from collections.abc import Iterator

from ltsgen.commands import add_command, storage_options
from ltsgen.corpora.arguments import add_reader_arguments, reader_options, screen


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "tokenizer",
        summary="train a byte-level BPE tokenizer (tokenizer.json) on a corpus or a built dataset",
        description="Train a byte-level BPE tokenizer (GPT-2 style, the Hugging Face tokenizers library) with "
        "<|endoftext|> as its end-of-text token, on documents read with --source/--input or on the "
        "train split of a built dataset directory (--data). Writes a tokenizer.json that any "
        "Hugging Face tokenizer loads and that `ltsgen buckets --tokenizer` takes.",
        examples=[
            "ltsgen tokenizer --data lts --vocab-size 2048 --out lts-tokenizer.json",
            "ltsgen tokenizer --source c4 --input 'c4/*.json.gz' --vocab-size 8192 --out tok.json",
        ],
    )
    add_reader_arguments(parser, required=False)
    parser.add_argument(
        "--data", help="a built ltsgen dataset directory (path or URL) to train on (instead of --source)"
    )
    parser.add_argument(
        "--vocab-size", type=int, default=8192, help="vocabulary size, special tokens included"
    )
    parser.add_argument(
        "--max-documents", type=int, help="train on at most this many documents (the first ones)"
    )
    parser.add_argument(
        "--out", required=True, help="where to write tokenizer.json (a path or s3:// gs:// file:// URL)"
    )
    parser.set_defaults(func=run)


def _dataset_texts(directory) -> Iterator[str]:
    """The texts of the train split (else the first split) of a dataset directory (a ``Storage``)."""
    from ltsgen.loaders.contract import TRAIN_SPLIT, read_manifest
    from ltsgen.loaders.formats import decode_shard

    manifest = read_manifest(directory)
    split = TRAIN_SPLIT if TRAIN_SPLIT in manifest.splits else next(iter(manifest.splits))
    for shard in manifest.shards(split):
        data = directory.read_bytes(shard.path)
        yield from (
            r["text"]
            for r in decode_shard(data, manifest.format, directory.location(shard.path), ["text"]).records()
        )


def run(args: argparse.Namespace) -> int:
    from ltsgen.corpora.inputs import InputError
    from ltsgen.corpora.readers import read_documents
    from ltsgen.errors import UsageError
    from ltsgen.loaders.contract import ContractError
    from ltsgen.loaders.storage import Storage, locate
    from ltsgen.tokenizer import TokenizerError, save_tokenizer, train_tokenizer

    if (args.data is None) == (args.source is None):
        raise UsageError("give either --data DIR or --source with --input")
    if args.source and not args.input:
        raise UsageError("--source needs --input")
    started = time.perf_counter()
    counts = {"documents": 0, "characters": 0}
    policy = screen(args)
    options = storage_options(args)
    locate(args.out, options)[0].check_writable()  # before the training, not after

    def texts() -> Iterator[str]:
        if args.data is not None:
            stream = _dataset_texts(Storage(args.data, options))
        else:
            stream = (d.text for d in read_documents(args.source, args.input, reader_options(args), policy))
        for number, text in enumerate(stream):
            if args.max_documents is not None and number >= args.max_documents:
                return
            counts["documents"] += 1
            counts["characters"] += len(text)
            yield text

    try:
        tokenizer = train_tokenizer(texts(), args.vocab_size)
        if counts["documents"] == 0:
            raise UsageError("no documents to train on")
        save_tokenizer(tokenizer, args.out, options)
    except (InputError, ContractError, TokenizerError) as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"{args.out}: cannot write ({error.strerror or error})") from None
    print(
        f"{args.out}: byte-level BPE, vocabulary {tokenizer.get_vocab_size():,}, trained on "
        f"{counts['documents']:,} documents ({counts['characters']:,} characters) in {time.perf_counter() - started:.1f}s"
    )
    if policy.counts:
        print("  " + ", ".join(f"{kind} {count:,}" for kind, count in sorted(policy.counts.items())))
    return 0
