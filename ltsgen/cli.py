"""The `ltsgen` command line: one subcommand per job, each defined in its own module."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import re
import signal
import sys
from collections.abc import Collection

from ltsgen import __version__
from ltsgen.errors import LtsgenError, did_you_mean

# Each module, named after its command, exposes `SUMMARY` (its line in `ltsgen --help`) and
# `register(subparsers)`, whose parser sets `func(args) -> int`.
COMMAND_MODULES: list[str] = [
    "ltsgen.commands.stories",
    "ltsgen.commands.card",
    "ltsgen.commands.info",
    "ltsgen.commands.buckets",
    "ltsgen.commands.tokenizer",
    "ltsgen.commands.train",
    "ltsgen.commands.evaluate",
    "ltsgen.commands.compare",
]


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, like every other ltsgen error (no usage block), and
    which takes no abbreviated option (``--num-storie 3`` is a typo, not ``--num-stories 3``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(commands: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``ltsgen`` parser. Only the subcommands in ``commands`` (all when None) get their options, the
    others just their summary line: building one command's options may import what only it needs (the
    training commands import torch), which the other commands should not pay for."""
    parser = OneLineParser(
        prog="ltsgen",
        description="Long-context research data, streaming loaders and position-encoding experiments.",
    )
    parser.add_argument("--version", action="version", version=f"ltsgen {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name in COMMAND_MODULES:
        module = importlib.import_module(module_name)
        name = module_name.rsplit(".", 1)[1]
        if commands is None or name in commands:
            module.register(subparsers)
        else:
            subparsers.add_parser(name, help=module.SUMMARY)
    return parser


def main(argv: list[str] | None = None) -> int:
    try:
        return _run(argv)
    except BrokenPipeError:  # `ltsgen ... | head`: the reader left; stop quietly, as a shell tool does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 128 + signal.SIGPIPE
    except KeyboardInterrupt:  # before a command runs (its own interrupts are said by _run, naming it)
        print("ltsgen: interrupted", file=sys.stderr)
        return 130


def out_of_memory(error: BaseException) -> str | None:
    """What an allocation that failed asked for, in a few words; None for any other error."""
    text = str(error)
    if isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError":
        return text.split(". ")[0].strip() or "an allocation failed"
    asked = re.search(r"can't allocate memory: you tried to allocate (\d+) bytes", text)
    return None if asked is None else f"{int(asked.group(1)) / 2**30:,.1f} GiB asked of the CPU at once"


# filesystem libraries that log a failure (with its traceback) before raising it: 160 lines for an
# unreachable gs:// before the command's own one-line error
QUIETED_LOGGERS = ("gcsfs", "s3fs", "fsspec")
# options that name a file, folder or URL: an empty one would mean the working folder, never what was meant
PATH_OPTIONS = ("out", "data", "run", "input", "tokenizer", "init_from", "cache_dir")


def _check_paths(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``--out ""`` (an unset shell variable, say) as the command's one-line error, not the working folder;
    and a path that starts with ``~`` taken from the home folder, as the shell does where it sees one
    (``--out ~/lts``) and does not after an ``=`` (``--out=~/lts``)."""
    command = next(action for action in parser._actions if action.dest == "command").choices[args.command]
    for action in command._actions:
        if action.dest not in PATH_OPTIONS or not action.option_strings:
            continue
        value = getattr(args, action.dest, None)
        values = value if isinstance(value, list) else [value]
        if any(item == "" for item in values):
            command.error(f"argument {action.option_strings[0]}: an empty path")
        expanded = [
            type(item)(os.path.expanduser(item)) if isinstance(item, str | os.PathLike) else item
            for item in values
        ]
        setattr(args, action.dest, expanded if isinstance(value, list) else expanded[0])


def _run(argv: list[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    # the first word that is not an option names the command (`ltsgen` itself has only --help, --version)
    parser = build_parser(commands=[word for word in argv if not word.startswith("-")][:1])
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser, so that the line names the command and its --help
        commands = next(action for action in parser._actions if action.dest == "command").choices
        command = commands.get(args.command, parser)
        options = [  # those --help lists, not an old spelling kept for a while
            name[2:]
            for action in command._actions
            if action.help != argparse.SUPPRESS
            for name in action.option_strings
            if name[:2] == "--"
        ]
        typo = next((word.split("=")[0][2:] for word in unknown if word.startswith("--")), "")
        hint = did_you_mean(typo, options, n=1).replace("'", "'--", 1) if typo else ""  # names, then dashes
        command.error(f"unrecognized arguments: {' '.join(unknown)}" + (f"; {hint}" if hint else ""))
    if not hasattr(args, "func"):
        parser.print_help()
        return 0
    _check_paths(parser, args)
    for library in QUIETED_LOGGERS:  # their failures come back as exceptions, said as one line below
        logging.getLogger(library).setLevel(logging.CRITICAL)
    try:
        return int(args.func(args) or 0)
    except LtsgenError as error:  # every user-fixable failure: one line, exit status 2
        print(f"ltsgen {args.command}: error: {error}", file=sys.stderr)
        return 2
    except (MemoryError, RuntimeError) as error:  # torch's allocators raise RuntimeErrors of their own
        asked = out_of_memory(error)
        if asked is None:
            raise
        print(f"ltsgen {args.command}: error: out of memory ({asked}): ask for a smaller model, batch, length or "
              "fewer workers", file=sys.stderr)  # fmt: skip
        return 2
    except KeyboardInterrupt:
        print(f"ltsgen {args.command}: interrupted", file=sys.stderr)
        return 130
