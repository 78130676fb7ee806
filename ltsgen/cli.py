"""The `ltsgen` command line: one subcommand per job, each defined in its own module."""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys

from ltsgen import __version__
from ltsgen.errors import LtsgenError

# Each module exposes `register(subparsers)`; the parser it adds sets `func(args) -> int`.
COMMAND_MODULES: list[str] = [
    "ltsgen.commands.stories",
    "ltsgen.commands.card",
    "ltsgen.commands.buckets",
    "ltsgen.commands.tokenizer",
    "ltsgen.commands.train",
    "ltsgen.commands.evaluate",
    "ltsgen.commands.compare",
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ltsgen",
        description="Long-context research data, streaming loaders and position-encoding experiments.",
    )
    parser.add_argument("--version", action="version", version=f"ltsgen {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:  # `ltsgen ... | head`: the reader left; stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 128 + signal.SIGPIPE


def _run(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except LtsgenError as error:  # every user-fixable failure: one line, exit status 2
        print(f"ltsgen {args.command}: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ltsgen {args.command}: interrupted", file=sys.stderr)
        return 130
