"""A random context-free grammar of simple story sentences, expanded with ``str.format_map``.

A grammar is written as sections::

    @name
    one alternative per line, with {slots}
    # comments and blank lines are ignored

A slot names either a role value set per sentence (``{A}`` the actor, ``{B}`` the partner, ``{A_he}`` ...),
a story value (the pet, the current place, a fact placeholder), or another section, which is expanded
recursively with a fresh random choice each time it appears. An empty line is written ``~`` (an empty
alternative, for optional words). Repeating a line weights it.
"""

from __future__ import annotations

import random


def parse_sections(text: str) -> dict[str, tuple[str, ...]]:
    """Sections of a grammar text (see the module docstring) as name -> alternatives."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            name = line[1:].strip()
            if name in sections:
                raise ValueError(f"grammar section @{name} defined twice")
            current = sections[name] = []
        elif current is None:
            raise ValueError(f"grammar line outside a section: {line!r}")
        else:
            current.append("" if line == "~" else line)
    return {name: tuple(options) for name, options in sections.items()}


class Slots(dict):
    """Role and story values of one sentence; any other slot is a grammar section, expanded at random."""

    def __init__(self, values: dict[str, str], table: dict[str, tuple[str, ...]], rng: random.Random):
        super().__init__(values)
        self.table = table
        self.random = rng.random

    def __missing__(self, key: str) -> str:
        options = self.table[key]
        text = options[int(self.random() * len(options))]
        if "{" in text:
            return text.format_map(self)
        return text
