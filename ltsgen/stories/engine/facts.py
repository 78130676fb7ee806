"""Long-range facts: values set early in a story and used again chapters later, with their offsets.

A sentence refers to a fact through a one-character placeholder (a private-use code point); the story
text resolves it to the value and records where the value lands, so every recorded offset is exact.
Two sorts: the story's setting (the pet's name, the colours, the hiding place: used all along, in any
sentence), and planted facts (``planted=True``): a value that no other sentence contains, recalled at
scheduled distances (``ltsgen.stories.recalls``).
"""

from __future__ import annotations

import re

_BASE = 0xE000
# A sentence split at its placeholders: text, placeholder, text, ..., text (one part when it has none).
split_placeholders = re.compile("([\ue000-\ue3ff])").split


class FactBook:
    """The facts of one story: names, values, and the offsets of the value in the text."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.values: list[str] = []
        self.offsets: list[list[int]] = []
        self.planted: list[bool] = []

    def add(self, name: str, value: str, planted: bool = False) -> str:
        """Register a fact; returns its placeholder (a format-slot value for sentences)."""
        if len(self.names) >= 0x400:
            raise ValueError("a story holds at most 1,024 facts")
        self.names.append(name)
        self.values.append(value)
        self.offsets.append([])
        self.planted.append(planted)
        return chr(_BASE + len(self.names) - 1)

    def mentioned(self, placeholder: str) -> bool:
        return bool(self.offsets[ord(placeholder) - _BASE])

    def resolve(self, parts: list[str]) -> tuple[str, list[tuple[int, int]]]:
        """The sentence split into ``parts`` by ``split_placeholders``, with placeholders replaced by values,
        and (offset in sentence, fact index) pairs."""
        values = self.values
        if len(parts) == 3:  # one placeholder: no loop
            head, placeholder, tail = parts
            fact = ord(placeholder) - _BASE
            return head + values[fact] + tail, [(len(head), fact)]
        out = [parts[0]]
        marks: list[tuple[int, int]] = []
        length = len(parts[0])
        for at in range(1, len(parts), 2):
            fact = ord(parts[at]) - _BASE
            marks.append((length, fact))
            value = values[fact]
            segment = parts[at + 1]
            out.append(value)
            out.append(segment)
            length += len(value) + len(segment)
        return "".join(out), marks

    def records(self) -> list[dict]:
        """``meta["facts"]``: every mentioned fact with its first mention and later uses (character offsets
        of the value), and whether it was planted."""
        return [
            {"name": name, "value": value, "first": offsets[0], "uses": offsets[1:], "planted": planted}
            for name, value, offsets, planted in zip(
                self.names, self.values, self.offsets, self.planted, strict=True
            )
            if offsets
        ]
