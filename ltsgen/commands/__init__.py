"""The subcommands of ``ltsgen``, one module each, all built through ``add_command`` so that every
``--help`` reads the same way: wrapped description, defaults shown once, examples at the end."""

from __future__ import annotations

import argparse
import re
import textwrap

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
