"""``ltsgen card DIR``: (re)write the data card of a dataset directory from its manifest and shards."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ltsgen.commands import add_command, add_hidden_alias, add_storage_argument, storage_options

SUMMARY = "write DIR/README.md, the Hugging Face dataset card of a built dataset"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "card",
        summary=SUMMARY,
        description="Write DIR/README.md (a Hugging Face dataset card: YAML header with configs and dataset_info, "
        "then a datasheet with the build's statistics) and the length histograms beside it, from "
        "DIR/manifest.json and the shards. Every ltsgen build runs this at its end; while a build runs in DIR "
        "the command is refused.\n\n"
        "The card is generated: this command replaces the README.md and plots that ltsgen wrote, hand edits "
        "included, and says so when one was edited since. A README.md or plot that ltsgen did not write is "
        "never replaced (the command is refused), nor is a file at --out that is not a card copy. Keep your "
        "own notes in another file.",
        examples=[
            "ltsgen card lts",
            "ltsgen card c4-buckets --out data_cards/c4.md",
        ],
    )
    parser.add_argument(
        "directory", metavar="DIR", help="a dataset directory with manifest.json (a path or s3:// gs:// URL)"
    )
    parser.add_argument(
        "--out",
        type=copy_path,
        metavar="FILE",
        help="also copy the card to FILE (its plots beside it, renamed)",
    )
    add_hidden_alias(parser, "--output", "out", type=copy_path)
    add_storage_argument(parser)
    parser.set_defaults(func=run)


def copy_path(text: str) -> Path:
    """``--out``'s file, a local path. Empty, a URL, or a folder (a trailing separator, ``.`` or ``..``,
    which ``Path`` drops: the copy would become a file named after the folder) is a usage error."""
    if not text:
        raise argparse.ArgumentTypeError("an empty path")
    if "://" in text:
        raise argparse.ArgumentTypeError(f"{text}: the copy is written to a local file, not to a URL")
    if text.endswith(("/", os.sep)) or os.path.basename(text) in (".", ".."):
        example = os.path.join(os.path.normpath(text), "card.md")
        raise argparse.ArgumentTypeError(f"{text} names a folder; give the copy's file name ({example}, say)")
    return Path(text)


def run(args: argparse.Namespace) -> int:
    from ltsgen.build import build_running
    from ltsgen.card import (
        PLOTS_MISSING,
        can_plot,
        card_conflict,
        copy_card,
        refuse_copy_over,
        write_card,
    )
    from ltsgen.loaders.contract import read_manifest
    from ltsgen.loaders.errors import LoaderError
    from ltsgen.loaders.storage import LockHeld, Storage, StorageError
    from ltsgen.outputs import CARD_FILES, LOCK_PATH, output_state

    try:
        directory = Storage(args.directory, storage_options(args))
        held = directory.lock_holder(LOCK_PATH)
        if held is not None:  # first: a build there has not written its manifest yet
            raise build_running(directory, held)
        read_manifest(directory)  # not a dataset: refused before the lock writes anything there
        for name in CARD_FILES:
            if output_state(directory, name) == "other":
                raise LoaderError(
                    f"{directory.location(name)}: not written by ltsgen, and the card writes there; move it "
                    "away (ltsgen never writes over a file of yours)"
                )
        if args.out is not None:
            refuse_copy_over(args.out, directory)
        with directory.lock(LOCK_PATH):  # a build there would remove the card's temporary files
            replaced = card_conflict(directory)
            path = write_card(directory)
        if args.out is not None:
            copy_card(directory, args.out)
    except LockHeld as error:
        raise build_running(directory, error.reason) from None
    except OSError as error:
        raise StorageError(f"{error.filename or args.directory}: {error.strerror or error}") from None
    if replaced:
        print(f"{replaced}: replaced by the new card, its content is lost")
    print(f"wrote {path}" + (f" and {args.out}" if args.out else ""))
    if not can_plot():
        print(f"note: {PLOTS_MISSING}")
    return 0
