"""Build a position encoding by name."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from .alibi import ALiBi
from .ape import APE
from .base import NoPE, PositionEncoding
from .fire import FIRE
from .kerple import Kerple
from .rotary import RoPE, RoPEPI, YaRN
from .sandwich import Sandwich
from .t5 import T5Bias

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


def options(name: str) -> dict[str, object]:
    """The keyword options of encoding ``name`` with their defaults."""
    builder = _builder(name)
    func = builder.func if isinstance(builder, functools.partial) else builder
    fixed = builder.keywords if isinstance(builder, functools.partial) else {}
    parameters = list(inspect.signature(func).parameters.values())[2:]  # after num_heads, head_dim
    return {p.name: p.default for p in parameters if p.name not in fixed}


def build(name: str, num_heads: int, head_dim: int, **options_: object) -> PositionEncoding:
    """Build encoding ``name`` (one of ``NAMES``) for ``num_heads`` heads of size ``head_dim``."""
    builder = _builder(name)
    unknown = sorted(set(options_) - set(options(name)))
    if unknown:
        raise ValueError(
            f"encoding {name!r} has no option {', '.join(unknown)}; it takes {sorted(options(name))}"
        )
    return builder(num_heads, head_dim, **options_)


def _builder(name: str) -> Callable[..., PositionEncoding]:
    if name not in _BUILDERS:
        raise ValueError(f"unknown encoding {name!r}; choose one of {', '.join(_BUILDERS)}")
    return _BUILDERS[name]
