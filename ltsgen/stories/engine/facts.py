"""Long-range facts: values set early in a story and used again chapters later, with their offsets.

A sentence refers to a fact through a one-character placeholder (a private-use code point); the story
text resolves it to the value and records where the value lands, so every recorded offset is exact.
Two sorts: the story's setting (the pet's name, the colours, the hiding place: used all along, in any
sentence), and planted facts (``planted=True``): a value that no other sentence contains, recalled at
scheduled distances (``ltsgen.stories.recalls``). A recall sentence marks its cue (the words that ask for
the value, before it) between ``CUE_OPEN`` and ``CUE_CLOSE``; the marks resolve to nothing and the cue's
span is recorded with the value's next use (``cues``, aligned with the uses; None for an uncued use).
"""

from __future__ import annotations

import re

_BASE = 0xE000
_CUE_OPEN, _CUE_CLOSE = 0x3FE, 0x3FF  # fact numbers of the cue marks (placeholders no fact uses)
CUE_OPEN, CUE_CLOSE = chr(_BASE + _CUE_OPEN), chr(_BASE + _CUE_CLOSE)
CUE_MARKS = _CUE_OPEN  # the fact numbers from here on are cue marks
# A sentence split at its placeholders: text, placeholder, text, ..., text (one part when it has none).
split_placeholders = re.compile("([\ue000-\ue3ff])").split


class FactBook:
    """The facts of one story: names, values, and the offsets of the value in the text."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.values: list[str] = []
        self.offsets: list[list[int]] = []
        self.planted: list[bool] = []
        self.cues: list[list[list[int] | None]] = []  # per planted fact, the cue span of each offset or None
        self.cue_start = 0  # where the last cue opened
        self.cue: list[int] | None = None  # the last cue's span, until the value it asks for is written

    def add(self, name: str, value: str, planted: bool = False) -> str:
        """Register a fact; returns its placeholder (a format-slot value for sentences)."""
        if len(self.names) >= _CUE_OPEN:
            raise ValueError(f"a story holds at most {_CUE_OPEN:,} facts")
        self.names.append(name)
        self.values.append(value)
        self.offsets.append([])
        self.cues.append([])
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
            value = values[fact] if fact < _CUE_OPEN else ""
            segment = parts[at + 1]
            out.append(value)
            out.append(segment)
            length += len(value) + len(segment)
        return "".join(out), marks

    def record(self, offset: int, fact: int) -> None:
        """Record a mark of a sentence at character ``offset`` of the text: a cue's start or end, or a
        planted fact's value (with the cue that closed before it, if any). A setting fact's value goes
        to ``offsets`` directly: it has no cues."""
        if fact == _CUE_OPEN:
            self.cue_start = offset
        elif fact == _CUE_CLOSE:
            self.cue = [self.cue_start, offset]
        else:
            self.offsets[fact].append(offset)
            self.cues[fact].append(self.cue)
            self.cue = None

    def records(self) -> list[dict]:
        """``meta["facts"]``: every mentioned fact with its first mention and later uses (character offsets
        of the value), the cue span before each use (None: an uncued use, not a scored recall), and
        whether it was planted."""
        return [
            {
                "name": name,
                "value": value,
                "first": offsets[0],
                "uses": offsets[1:],
                "cues": cues[1:] if planted else [None] * (len(offsets) - 1),
                "planted": planted,
            }
            for name, value, offsets, cues, planted in zip(
                self.names, self.values, self.offsets, self.cues, self.planted, strict=True
            )
            if offsets
        ]
