"""Build a position encoding by name."""

from __future__ import annotations

import functools
import inspect
import math
import numbers
from collections.abc import Callable, Mapping

from ltsgen.errors import did_you_mean

from .alibi import ALiBi
from .ape import APE
from .base import EncodingError, NoPE, PositionEncoding
from .fire import FIRE
from .kerple import Kerple
from .rotary import RoPE, RoPEPI, YaRN
from .sandwich import Sandwich
from .t5 import T5Bias

# the largest integer option taken (a size, a count, a distance): far beyond any setting of these encodings,
# it keeps a mistyped number from reaching torch as a tensor size it cannot hold
LARGEST_OPTION = 2**24

_BUILDERS: dict[str, Callable[..., PositionEncoding]] = {
    "nope": NoPE,
    "rope": RoPE,
    "rope_pi": RoPEPI,
    "yarn": YaRN,
    "alibi": ALiBi,
    "kerple_log": functools.partial(Kerple, variant="log"),
    "kerple_power": functools.partial(Kerple, variant="power"),
    "t5": T5Bias,
    "sandwich": Sandwich,
    "fire": FIRE,
    "ape": APE,
}

NAMES: tuple[str, ...] = tuple(_BUILDERS)


def canonical_name(name: str) -> str:
    """``name`` as ``NAMES`` spell it: case and ``-`` for ``_`` do not matter (``RoPE-PI`` is ``rope_pi``).

    Raises:
        EncodingError: no encoding has that name; the one-line message gives the closest names.
    """
    folded = str(name).strip().lower().replace("-", "_")
    if folded in _BUILDERS:
        return folded
    raise EncodingError(f"unknown encoding {name!r}{_hint(folded, NAMES)}; choose one of {', '.join(NAMES)}")


def _hint(word: str, choices: tuple[str, ...] | list[str]) -> str:
    """`` (did you mean 'a' or 'b'?)`` with the closest of ``choices`` to ``word``; empty when none is close."""
    close = did_you_mean(word, choices)
    return f" ({close})" if close else ""


def family(name: str) -> str:
    """How encoding ``name`` encodes position (``rotary``, ``decaying bias``, ...), as its class declares."""
    return _class(name).family


def trained_as(name: str) -> str:
    """The encoding whose trained weights ``name`` reads: ``rope`` for RoPE, RoPE-PI and YaRN (one model
    trained at factor 1, rescaled differently to read longer); ``name`` itself for the others."""
    return _class(name).shares_weights_of or canonical_name(name)


def shares_weights(name: str) -> bool:
    """Whether ``name`` reads weights that other encodings read too (RoPE, RoPE-PI and YaRN)."""
    return _class(name).shares_weights_of is not None


def rescaled(name: str) -> bool:
    """Whether ``name`` is evaluated rescaled to each evaluation length (RoPE-PI and YaRN)."""
    return _class(name).rescaled


def rescaled_options(name: str, length: int, train_length: int) -> dict[str, object]:
    """The options that stretch ``name`` trained at ``train_length`` tokens to ``length`` (empty unless
    ``rescaled(name)``): RoPE-PI's and YaRN's ``factor`` and ``original_length``."""
    return _class(name).rescaled_options(length, train_length)


def options(name: str) -> dict[str, object]:
    """The keyword options of encoding ``name`` with their defaults."""
    builder = _builder(name)
    fixed = builder.keywords if isinstance(builder, functools.partial) else {}
    parameters = list(inspect.signature(_class(name)).parameters.values())[2:]  # after num_heads, head_dim
    return {p.name: p.default for p in parameters if p.name not in fixed}


def training_options(
    name: str, train_length: int, overrides: Mapping[str, object] | None = None
) -> dict[str, object]:
    """Every option of encoding ``name`` for a model trained at ``train_length`` tokens, defaults included.

    The constructor's defaults, then the values the encoding sets for the training length (FIRE's threshold,
    T5's max distance, RoPE-PI's and YaRN's training scale), then ``overrides``. Override values may be
    text as typed on a command line (``"128"``, ``"none"``, ``"true"``): they take the type of the default.

    Args:
        name: one of ``NAMES``.
        train_length: the training context in tokens.
        overrides: option values to set, by name.

    Returns:
        A JSON-safe dict of every option, ready for ``build(name, heads, head_dim, **options)``.
    """
    resolved = {**options(name), **_class(name).training_options(train_length)}
    for key, value in (overrides or {}).items():
        if key not in resolved:
            raise EncodingError(_no_option(name, [key], sorted(resolved)))
        resolved[key] = _typed(name, key, value, options(name)[key])
    return resolved


def _typed(name: str, key: str, value: object, default: object) -> object:
    """``value`` (text from a command line is parsed first) as the type of ``default``, a finite number; None
    passes through (it disables FIRE's threshold), and the constructor checks ranges (``EncodingError``)."""
    if isinstance(value, str):
        value = _parse(value)
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):  # a numpy or torch scalar
        value = value.item()
    if isinstance(value, numbers.Real) and not isinstance(value, bool):  # numpy numbers as Python's
        value = int(value) if isinstance(value, numbers.Integral) else float(value)
    if isinstance(value, float) and not math.isfinite(value):
        raise EncodingError(f"{name} option {key}={value!r}: expected a finite number")
    if isinstance(default, float) and type(value) is int:
        return float(value)
    if type(default) is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is int and abs(value) > LARGEST_OPTION:
        raise EncodingError(f"{name} option {key}={value!r}: expected at most {LARGEST_OPTION:,} in size")
    if value is not None and default is not None and type(value) is not type(default):
        raise EncodingError(f"{name} option {key}={value!r}: expected a value like {default!r}")
    return value


def _parse(text: str) -> object:
    lowered = text.strip().lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for parse in (int, float):
        try:
            return parse(lowered)
        except ValueError:
            pass
    return text


def build(name: str, num_heads: int, head_dim: int, **options_: object) -> PositionEncoding:
    """Build encoding ``name`` (one of ``NAMES``) for ``num_heads`` heads of size ``head_dim``; each option
    takes its default's type, a finite number (``EncodingError`` otherwise, as for a value out of range)."""
    builder = _builder(name)
    defaults = options(name)
    unknown = sorted(set(options_) - set(defaults))
    if unknown:
        raise EncodingError(_no_option(name, unknown, sorted(defaults)))
    typed = {key: _typed(name, key, value, defaults[key]) for key, value in options_.items()}
    return builder(num_heads, head_dim, **typed)


def _no_option(name: str, unknown: list[str], known: list[str]) -> str:
    """The one-line error for options ``unknown`` that encoding ``name`` (taking ``known``) does not have."""
    given = ", ".join(repr(key) for key in unknown)
    if not known:
        return f"encoding {name!r} has no option {given}; it takes no options"
    hint = _hint(unknown[0], known) if len(unknown) == 1 else ""
    return f"encoding {name!r} has no option {given}{hint}; it takes {', '.join(known)}"


def _builder(name: str) -> Callable[..., PositionEncoding]:
    return _BUILDERS[canonical_name(name)]


def _class(name: str) -> type[PositionEncoding]:
    builder = _builder(name)
    return builder.func if isinstance(builder, functools.partial) else builder
