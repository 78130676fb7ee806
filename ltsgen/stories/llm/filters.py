"""Quality filters for LLM-written stories: length, vocabulary, repeated paragraphs, the planted facts'
recalls and their cues (refusals and empty answers are caught while writing). Each returns a measure;
``verdict`` names the first filter that fails."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ltsgen.stories.vocabulary import BASIC_WORDS

REJECTIONS = ("refusal", "empty", "length", "vocabulary", "repetition", "recall", "cue")
CUE_REACH = 200  # characters: a cue ends at most this far before the value it asks for
MIN_PARAGRAPH_WORDS = 8  # shorter paragraphs ("Yes!" said Tom.) may repeat naturally
_WORD = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")


@dataclass(frozen=True)
class Filters:
    length_tolerance: float = 0.25  # keep |words - target| <= tolerance * target
    max_oov_share: float = 0.15  # share of words outside the simple vocabulary (names excepted)
    max_repeated_share: float = 0.05  # share of paragraphs that repeat an earlier one

    def to_dict(self) -> dict[str, float]:
        return {
            "length_tolerance": self.length_tolerance,
            "max_oov_share": self.max_oov_share,
            "max_repeated_share": self.max_repeated_share,
        }

    def verdict(
        self, text: str, target: int, missed_recalls: int = 0, missed_cues: int = 0
    ) -> tuple[str | None, dict[str, Any]]:
        """(the rejection reason or None, the measures behind it); ``missed_recalls`` counts the plants and
        recalls of planted facts that the chapters asked for did not write (see ``missed_events``),
        ``missed_cues`` those written without their key before the value (see ``cue_span``)."""
        words = len(text.split())
        measures = {"oov_share": round(oov_share(text), 4), "repeated_share": round(repeated_share(text), 4)}
        measures["missed_recalls"] = missed_recalls
        measures["missed_cues"] = missed_cues
        if abs(words - target) > self.length_tolerance * target:
            return "length", measures
        if measures["oov_share"] > self.max_oov_share:
            return "vocabulary", measures
        if measures["repeated_share"] > self.max_repeated_share:
            return "repetition", measures
        if missed_recalls:
            return "recall", measures
        if missed_cues:
            return "cue", measures
        return None, measures


def missed_events(
    occurrences: list[int], spans: list[tuple[int, int]], plant: int, recalls: tuple[int, ...]
) -> int:
    """How many of a planted fact's events did not happen: the value (at ``occurrences``, character offsets)
    must first occur in chapter ``plant`` and occur in each chapter of ``recalls`` (1-based chapters whose
    character ``spans`` are given)."""

    def within(k: int) -> bool:
        start, end = spans[k - 1]
        return any(start <= offset < end for offset in occurrences)

    planted = bool(occurrences) and spans[plant - 1][0] <= occurrences[0] < spans[plant - 1][1]
    return (not planted) + sum(not within(k) for k in recalls)


def cue_span(text: str, cue: str, value_at: int, after: int) -> list[int] | None:
    """The [start, end] span of the last ``cue`` (a fact's key, any case, as whole words) that ends before
    the value at ``value_at``, at most ``CUE_REACH`` characters before it and after character ``after`` (the
    previous occurrence of the value); None when there is none."""
    start = max(after, value_at - CUE_REACH - len(cue))
    found = None
    for match in re.finditer(r"(?<!\w)" + re.escape(cue) + r"(?!\w)", text[start:value_at], re.I):
        found = [start + match.start(), start + match.end()]
    return found if found and value_at - found[1] <= CUE_REACH else None


def oov_share(text: str) -> float:
    """Share of words outside ``BASIC_WORDS``; words always capitalised in the text count as names. The
    typographic apostrophe is an apostrophe (``didn’t`` is ``didn't``)."""
    words = _WORD.findall(text.replace("\u2019", "'"))
    lower = {w for w in words if w[0].islower()}
    names = {w for w in words if w[0].isupper() and w.lower() not in lower and w.lower() not in BASIC_WORDS}
    counted = [w.lower().removesuffix("'s") for w in words if w not in names]
    if not counted:
        return 0.0
    return sum(1 for w in counted if w not in BASIC_WORDS) / len(counted)


def repeated_share(text: str) -> float:
    """Share of paragraphs (of at least ``MIN_PARAGRAPH_WORDS`` words) identical to an earlier one."""
    seen: set[str] = set()
    repeats = total = 0
    for paragraph in re.split(r"\n\s*\n", text):
        words = paragraph.lower().split()
        if len(words) < MIN_PARAGRAPH_WORDS:
            continue
        total += 1
        key = " ".join(words)
        repeats += key in seen
        seen.add(key)
    return repeats / total if total else 0.0
