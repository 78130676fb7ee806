"""The one root of every error a user can cause, the one-line error for a missing optional extra, the
"did you mean" of every error that names an unknown choice, what is wrong with a number out of its limits,
the value of a list given twice, and the first line of a library's message that an error quotes.

A leaf module: it imports nothing of ltsgen's, so every part (``ltsgen.loaders`` and ``ltsgen.encodings``
included) may raise its errors under one root, and the CLI catches ``LtsgenError`` alone and prints its
message as one line.
"""

from __future__ import annotations

import difflib
import importlib
import math
from collections.abc import Iterable
from types import ModuleType
from typing import Any


class LtsgenError(Exception):
    """A failure the user can fix (bad option, file, data or environment); the message is one line: the
    line breaks of a cause it quotes (a library's own message) are joined with spaces."""

    def __init__(self, message: object = "", *args: object) -> None:
        super().__init__(" ".join(line.strip() for line in str(message).splitlines() if line.strip()), *args)


class UsageError(LtsgenError):
    """Arguments that cannot make a job: the message names the option and the accepted values."""


class MissingDependency(LtsgenError):
    """An optional dependency is not installed; the message names the extra that provides it."""


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (a library's, quoted in a one-line error); its type's name
    when the message is empty."""
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def first_repeated(values: Iterable[Any]) -> Any:
    """The first of a user's list of values that repeats an earlier one (None when none does), for the
    error that names it: a seed or an encoding given twice would be one run said as two."""
    seen = []
    for value in values:
        if value in seen:
            return value
        seen.append(value)
    return None


def did_you_mean(word: str, choices: Iterable[str], *, n: int = 3, cutoff: float = 0.6) -> str:
    """``did you mean 'a' or 'b'?`` naming the (at most ``n``) closest of ``choices`` to ``word`` by difflib's
    ratio, above ``cutoff``; empty when none is close. Each message places it as it reads best."""
    close = [repr(choice) for choice in difflib.get_close_matches(word, list(choices), n=n, cutoff=cutoff)]
    if not close:
        return ""
    return f"did you mean {close[0] if len(close) == 1 else ', '.join(close[:-1]) + ' or ' + close[-1]}?"


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` or raise ``MissingDependency`` naming ``pip install 'ltsgen[extra]'``.

    Args:
        module: the importable name (``"s3fs"``, ``"ray"``).
        extra: the ltsgen extra that installs it (``"s3"``, ``"ray"``).
        purpose: what needs it, for the message (``"s3:// paths"``).
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(
            f"{purpose} need {module}, which is not installed: pip install 'ltsgen[{extra}]'"
        ) from None


def out_of_limits(value: Any, limits: dict[str, float]) -> str | None:
    """What is wrong with the number ``value`` under ``limits`` (``above``, ``at_least``, ``at_most``), in a
    few words ("must be at least 1"), or None when it is within them."""
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    for name, holds in (("above", value > limits.get("above", -math.inf)),
                        ("at_least", value >= limits.get("at_least", -math.inf)),
                        ("at_most", value <= limits.get("at_most", math.inf))):  # fmt: skip
        if not holds:
            bound = limits[name]
            shown = f"{bound:,}" if float(bound).is_integer() else f"{bound:g}"
            return f"must be {name.replace('_', ' ')} {shown}"
    return None
