"""The story text as it grows: sentences from the grammar, a guard against repeats, offsets of facts."""

from __future__ import annotations

import random
import re

from ltsgen.stories.engine.facts import CUE_MARKS, FactBook, split_placeholders
from ltsgen.stories.engine.grammar import Slots
from ltsgen.stories.variety import LONG_SENTENCE_WORDS
from ltsgen.stories.vocabulary import NAMES

MAX_REPEATS = 3  # a sentence of LONG_SENTENCE_WORDS or more words appears at most this often in a story
_TRIES = 6
_FRESH = ("find", "describe", "animal_meet")  # the widest sections, for when a section is used up
# The same sentence boundaries as ``variety.split_sentences`` uses within one line.
_TAG = re.compile(r'\." (?=[a-z])')  # "Hi." said Sam -> "Hi," said Sam
# Sentences of these sections may get an opening and/or a closing phrase from the grammar, by kind:
# a character acts ("Mia ran"), a happy moment, or a scene ("The park was big"); None: no closing phrase.
_KINDS = {
    ("opener_actor", "tail_actor"): "travel think fav_use spots_use promise_use find short wonder memory",
    ("opener_actor", "tail_happy"): "play fixed rest hobby travel_bit deed_do weather_react",
    ("opener_actor", "tail_scene"): "feel",
    ("opener_actor", None): "try",
    ("opener_scene", "tail_scene"): "describe sky arrive animal_meet pet_act night likeness",
}
EXTENDABLE = {key: kind for kind, keys in _KINDS.items() for key in keys.split()}
_CONNECTIVES = frozenset(("Now", "So", "And", "Then", "But", "Then,", "Soon,", "Next,", "Later,", "Still,"))
_KEEP_CASE = frozenset(NAMES) | {"I", "I'm", "I'll"}
JOIN_RATE = 0.5  # how often a short plain statement joins the plain statement before it ...
_JOIN_WORDS = 12  # ... when it has at most this many words
_UNPLAIN = re.compile('["!?;:]').search  # a quote, an exclamation, a question, a clause
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z\"“])|(?<=[.!?][\"”])\s+(?=[A-Z\"“])").split


class Narrator:
    """Appends sentences to one story and keeps its word count, fact offsets and ``counts``: how often each
    sentence occurs, split exactly as ``variety.split_sentences`` splits the finished text."""

    def __init__(self, rng: random.Random, table: dict[str, tuple[str, ...]], facts: FactBook):
        self.rng = rng
        self.random = rng.random
        self.table = table
        self.facts = facts
        self.parts: list[str] = []
        self.pos = 0  # characters written so far
        self.words = 0
        self.counts: dict[str, int] = {}
        self.separator = ""
        self.joinable: str | None = None  # the last sentence, when a plain statement may join it
        self.split = ("", [""])  # the last sentence ``candidate`` split, and its parts (for ``add``)

    def slots(self, values: dict[str, str]) -> Slots:
        return Slots(values, self.table, self.rng)

    def render(self, slots: Slots, key: str) -> tuple[str, int, list[tuple[int, int]] | None]:
        """One sentence from section ``key``: text (placeholders resolved), word count, fact marks."""
        text = slots[key]
        extend = EXTENDABLE.get(key)
        if extend is not None:
            draw = self.random()
            if draw < 0.3:
                if text[-1:] == "." and '"' not in text and extend[1]:
                    tail = slots[extend[1]]
                    text = text[:-1] + (tail if tail[0] == "," else " " + tail) + "."
            elif draw < 0.55 and text[:1] != '"' and "," not in text[:24]:
                first, _, rest = text.partition(" ")
                if first not in _CONNECTIVES:
                    if first.partition("'")[0] not in _KEEP_CASE and first[:1] < "\ue000":
                        first = first.lower()
                    text = f"{slots[extend[0]]} {first} {rest}"
        if '." ' in text:
            text = _TAG.sub('," ', text)
        if "  " in text or text[:1] == " " or text[-1:] == " ":
            text = " ".join(text.split())
        first = text[:1]
        if first.islower():
            text = first.upper() + text[1:]
        marks = None
        if not text.isascii():  # placeholders are private-use characters
            parts = split_placeholders(text)
            if len(parts) > 1:
                text, marks = self.facts.resolve(parts)
        return text, text.count(" ") + 1, marks

    def candidate(
        self, slots: Slots, key: str, keep_section: bool = False
    ) -> tuple[str, int, list[tuple[int, int]] | None]:
        """A sentence of ``key`` that keeps every 6+ word sentence within MAX_REPEATS, preferring one not
        used before in this story; else an unused sentence of a wide section, else the least used acceptable
        try, else a two-word sentence. ``keep_section``: always a sentence of ``key`` (a planted fact's
        plant or recall), the least used try. Not yet written: ``add`` writes it."""
        counts = self.counts
        best = None
        best_seen = 1 << 30
        for _ in range(_TRIES):
            sentence = self.render(slots, key)
            text = sentence[0]
            if ". " in text or "! " in text or "? " in text or '" ' in text:
                seen = 0
                parts = _SPLIT(text)
                self.split = (text, parts)
                for part in parts:
                    count = counts.get(part, 0)
                    if count >= MAX_REPEATS and part.count(" ") + 1 >= LONG_SENTENCE_WORDS:
                        seen = 1 << 30
                        break
                    if count > seen:
                        seen = count
            else:
                seen = counts.get(text, 0)
                if seen >= MAX_REPEATS and sentence[1] >= LONG_SENTENCE_WORDS:
                    seen = 1 << 30
            if not seen:
                return sentence
            if seen < best_seen:
                best, best_seen = sentence, seen
        if keep_section:
            return best or sentence
        for section in _FRESH:  # every try was seen before: a sentence from a wide section instead
            sentence = self.render(slots, section)
            if sentence[1] < LONG_SENTENCE_WORDS or not any(
                counts.get(part, 0) for part in _SPLIT(sentence[0])
            ):
                if not counts.get(sentence[0], 0):
                    return sentence
        if best is None:  # every try would exceed MAX_REPEATS: a sentence too short to count
            return self.render(slots, "tiny")
        return best

    def add(self, sentence: tuple[str, int, list[tuple[int, int]] | None]) -> None:
        """Append a rendered sentence (as from ``candidate``) to the text; a short plain statement may join
        the plain statement before it (", and ...")."""
        text, words, marks = sentence
        plain = words <= _JOIN_WORDS and text[-1:] == "." and ". " not in text and not _UNPLAIN(text)
        if plain and self.joinable and self.separator == " " and self.random() < JOIN_RATE:
            if self._join(text, words, marks):
                return
        counts = self.counts
        if ". " in text or "! " in text or "? " in text or '" ' in text:
            split_text, parts = self.split
            for part in parts if split_text is text else _SPLIT(text):
                counts[part] = counts.get(part, 0) + 1
        else:
            counts[text] = counts.get(text, 0) + 1
        separator = self.separator
        self.separator = " "
        pos = self.pos + len(separator)
        if marks:
            self._record(marks, pos)
        self.parts.append(separator + text if separator else text)
        self.pos = pos + len(text)
        self.words += words
        self.joinable = text if plain else None

    def _join(self, text: str, words: int, marks: list[tuple[int, int]] | None) -> bool:
        """Write ``text`` as the second half of the last sentence ("A. B." becomes "A, and b."); False
        when its opening does not allow it (a connective, a comma, a fact's value first)."""
        first, _, rest = text.partition(" ")
        if first in _CONNECTIVES or "," in first or (marks and marks[0][0] == 0):
            return False
        if first.partition("'")[0] not in _KEEP_CASE:
            text = first[:1].lower() + first[1:] + " " + rest
        counts = self.counts
        previous = self.joinable
        counts[previous] -= 1
        if not counts[previous]:
            del counts[previous]
        joined = previous[:-1] + ", and " + text
        counts[joined] = counts.get(joined, 0) + 1
        self.parts[-1] = self.parts[-1][: -len(previous)] + joined
        pos = self.pos + 5  # "." became ", and "
        if marks:
            self._record(marks, pos)
        self.pos = pos + len(text)
        self.words += words + 1
        self.joinable = None
        return True

    def _record(self, marks: list[tuple[int, int]], pos: int) -> None:
        """Record the offsets of the fact values (and cues) of a sentence written at character ``pos``."""
        facts = self.facts
        offsets, planted = facts.offsets, facts.planted
        for offset, fact in marks:
            if fact < CUE_MARKS and not planted[fact]:
                offsets[fact].append(pos + offset)
            else:
                facts.record(pos + offset, fact)

    def say(self, slots: Slots, key: str, keep_section: bool = False) -> int:
        """Render a sentence of ``key`` (guarded against repeats) and append it; returns its word count."""
        sentence = self.candidate(slots, key, keep_section)
        self.add(sentence)
        return sentence[1]

    def heading(self, text: str) -> None:
        """A line of its own (a chapter title), with a blank line before and after."""
        self.paragraph()
        self.add((text, text.count(" ") + 1, None))
        self.separator = "\n\n"

    def paragraph(self) -> None:
        """Start a new paragraph at the next sentence."""
        if self.parts:
            self.separator = "\n\n"

    def text(self) -> str:
        return "".join(self.parts)
