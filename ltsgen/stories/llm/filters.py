"""Quality filters for LLM-written stories: length, vocabulary, repeated paragraphs (refusals and empty
answers are caught while writing). Each returns a measure; ``verdict`` names the first filter that fails."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ltsgen.stories.vocabulary import BASIC_WORDS

REJECTIONS = ("refusal", "empty", "length", "vocabulary", "repetition")
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

    def verdict(self, text: str, target: int) -> tuple[str | None, dict[str, Any]]:
        """(the rejection reason or None, the measures behind it)."""
        words = len(text.split())
        measures = {"oov_share": round(oov_share(text), 4), "repeated_share": round(repeated_share(text), 4)}
        if abs(words - target) > self.length_tolerance * target:
            return "length", measures
        if measures["oov_share"] > self.max_oov_share:
            return "vocabulary", measures
        if measures["repeated_share"] > self.max_repeated_share:
            return "repetition", measures
        return None, measures


def oov_share(text: str) -> float:
    """Share of words outside ``BASIC_WORDS``; words always capitalised in the text count as names."""
    words = _WORD.findall(text)
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
