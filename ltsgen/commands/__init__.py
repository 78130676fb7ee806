"""The subcommands of ``ltsgen``, one module each, all built through ``add_command`` so that every
``--help`` reads the same way: wrapped description, defaults shown once, examples at the end."""

from __future__ import annotations

import argparse
import json
import os
import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

from ltsgen.errors import UsageError, first_repeated, out_of_limits

_STATES_DEFAULT = re.compile(r"\(default\b")


class HelpFormatter(argparse.HelpFormatter):
    """Wraps paragraphs, keeps indented lines (the examples) as written, and adds ``(default: X)`` once, to
    options with a real default that do not state one themselves."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        blocks = []
        for block in text.strip("\n").split("\n\n"):
            if block.startswith(" "):
                blocks.append(textwrap.indent(block, indent))
            else:
                blocks.append(
                    textwrap.fill(
                        " ".join(block.split()), width, initial_indent=indent, subsequent_indent=indent
                    )
                )
        return "\n\n".join(blocks)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            action.required
            or not action.option_strings
            or any(action.default is flag for flag in (None, False, True))
            or action.default == argparse.SUPPRESS
            or _STATES_DEFAULT.search(text)
        ):
            return text
        return f"{text} (default: %(default)s)"


def add_command(
    subparsers: argparse._SubParsersAction, name: str, *, summary: str, description: str, examples: list[str]
) -> argparse.ArgumentParser:
    """Add subcommand ``name``: ``summary`` is its line in ``ltsgen --help``, ``description`` opens its own
    ``--help`` (paragraphs split by blank lines), ``examples`` are whole command lines shown at the end."""
    epilog = "examples:\n\n" + "\n".join(f"  {line}" for line in examples)
    return subparsers.add_parser(
        name, help=summary, description=description, epilog=epilog, formatter_class=HelpFormatter
    )


def add_hidden_alias(parser: argparse.ArgumentParser, old: str, dest: str, **kwargs) -> None:
    """Accept the earlier spelling ``old`` of an option for one more release, unlisted in ``--help``.

    ``dest`` is the current option's destination; ``kwargs`` repeat what parses a value (``type``,
    ``action``), so that both spellings give the same result.
    """
    parser.add_argument(old, dest=dest, default=argparse.SUPPRESS, help=argparse.SUPPRESS, **kwargs)


def add_engine_arguments(parser: argparse.ArgumentParser, what: str = "jobs") -> None:
    """``--workers``, ``--engine`` and ``--ray-address``: where a build's ``what`` run (never what it
    writes)."""
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help=f"{what} at once: local processes, 1 unless given; with --engine ray, tasks in flight, the "
        "cluster's CPUs unless given. The output is the same for any number",
    )
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="run the jobs on this machine, or as Ray tasks (a local Ray runtime, or --ray-address)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="the Ray cluster to join with --engine ray (auto, ray://HEAD:10001 or HEAD:6379)",
    )


def engine_from(args: argparse.Namespace):
    """The engine that ``add_engine_arguments``' options name (a context manager; close it after use)."""
    from ltsgen.engines import make_engine

    return make_engine(args.engine, args.workers, args.ray_address)


def add_storage_argument(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--storage-options JSON``: fsspec options for every URL the command reads or writes."""
    parser.add_argument(
        "--storage-options",
        default=None,
        metavar="JSON",
        help="options for the filesystem of s3:// gs:// hf:// URLs, as a JSON object (e.g. "
        '\'{"profile": "lab"}\' or \'{"endpoint_url": "http://127.0.0.1:9000"}\'); credentials and '
        "endpoints otherwise come from the filesystem's usual sources (AWS_ENDPOINT_URL, AWS_PROFILE, ...)",
    )


def storage_options(args: argparse.Namespace) -> dict:
    """The parsed ``--storage-options`` (one-line error when it is not a JSON object)."""
    from ltsgen.loaders.storage import parse_storage_options

    return parse_storage_options(getattr(args, "storage_options", None))


@contextmanager
def storage_defaults(args: argparse.Namespace, url: str) -> Iterator[None]:
    """While a command runs, ``--storage-options`` as fsspec's own defaults for ``url``'s scheme: in this
    process (``fsspec.config.conf``) and, through fsspec's ``FSSPEC_<SCHEME>`` variable, in every process it
    starts (DataLoader workers, runs in worker processes or Ray tasks). For commands whose library code opens
    ``url`` by name (train, evaluate, compare); the builders hand a ``Storage`` with its options instead."""
    from ltsgen.loaders.mixture import parse_mixture
    from ltsgen.loaders.storage import scheme_of

    mixture = parse_mixture(url)  # a mixture (PATH=WEIGHT,...): the scheme of its first remote source
    sources = list(mixture) if isinstance(mixture, dict) else [url]
    url = next((source for source in sources if scheme_of(source) not in ("", "file")), sources[0])
    options, scheme = storage_options(args), scheme_of(url)
    if not options or scheme in ("", "file"):
        yield
        return
    import fsspec.config

    variable = f"FSSPEC_{scheme.upper()}"
    saved_conf, saved_variable = fsspec.config.conf.get(scheme), os.environ.get(variable)
    merged = {**(saved_conf or {}), **options}
    fsspec.config.conf[scheme] = merged
    os.environ[variable] = json.dumps(merged)
    try:
        yield
    finally:
        if saved_conf is None:
            fsspec.config.conf.pop(scheme, None)
        else:
            fsspec.config.conf[scheme] = saved_conf
        if saved_variable is None:
            os.environ.pop(variable, None)
        else:
            os.environ[variable] = saved_variable


def number(kind: type, limits: dict[str, float]):
    """An argparse ``type`` for a number of ``kind`` within ``limits`` (``above``, ``at_least``, ``at_most``):
    anything else is refused while the command line is parsed, in one line naming the option, worded as
    ``TrainConfig.check`` words its limits (``argument --max-doc-chars: must be at least 0 (got -1)``)."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        problem = out_of_limits(value, limits)
        if problem:
            raise argparse.ArgumentTypeError(f"{problem} (got {text})")
        return value

    parse.__name__ = kind.__name__
    return parse


def integers(text: str, option: str, example: str) -> list[int]:
    """``"64,128,"`` -> [64, 128] (empty items skipped); a one-line ``UsageError`` naming ``option`` for a
    list without any integer, with an item that is none, or with a value given twice (a seed or length
    twice would be one run or evaluation, said as two)."""
    parts = [part.strip() for part in str(text).split(",") if part.strip()]
    if not parts:
        raise UsageError(f"{option}: give at least one value, e.g. {example}")
    try:
        values = [int(part) for part in parts]
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected comma-separated integers like {example}") from None
    twice = first_repeated(values)
    if twice is not None:
        raise UsageError(f"{option} {text!r}: {twice} is given twice")
    return values
