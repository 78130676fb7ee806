"""The engine's phrase banks and world tables: package data files, read once per process.

``data/sentences.txt`` and ``data/structure.txt`` hold the sentence grammar (notation: ``grammar.py``),
``data/themes.txt`` the sentences of each theme, ``data/world.json`` the places, kinds, objects and names
a world is sampled from.

Grammar slots: ``A`` is the one who acts in a sentence and ``B`` the one beside them (``A_he A_He A_his
A_His A_him A_kind`` and the same for ``B``); ``H``/``F`` are always the hero and the friend. Story slots:
``P`` a reference to the pet and ``Pn`` its name, ``PK`` its kind; ``here``/``next`` places and ``pthing
psound psmell pplay`` what is found there; ``quest`` the thing looked for, ``home`` the hero's home; ``QC HC
FC`` colours, ``HID`` a hiding place, ``PROM`` a promise, ``WORD`` a secret word, ``NUM`` a count, ``G`` the
helper, ``C`` a companion met on the way. Upper-case fact slots hold placeholders resolved to values.
"""

from __future__ import annotations

import json
from importlib.resources import files
from typing import Any

from ltsgen.stories.engine.grammar import parse_sections

_DATA = files("ltsgen.stories.engine") / "data"


def read_data(name: str) -> str:
    """The text of the package data file ``data/<name>``."""
    return (_DATA / name).read_text(encoding="utf-8")


def _tuples(value: Any) -> Any:
    """JSON lists as tuples (immutable, and what ``random.choice`` indexes fastest), recursively."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


SECTIONS: dict[str, tuple[str, ...]] = {
    **parse_sections(read_data("sentences.txt")),
    **parse_sections(read_data("structure.txt")),
}
THEME_SECTIONS: dict[str, tuple[str, ...]] = parse_sections(read_data("themes.txt"))
THEMES: tuple[str, ...] = tuple(name for name in THEME_SECTIONS if not name.endswith("_love"))
WORLD: dict[str, Any] = _tuples(json.loads(read_data("world.json")))
