"""Whether the cued recalls of a story can be answered from its text: a lexical oracle that knows nothing of
how the story was written, only the contract (``meta["facts"]``: planted values, their uses and the cue
span before each use).

For a cued recall, every planted value that occurs before the cue is a candidate. A candidate's evidence at
one of its earlier occurrences is the text of the sentence that holds it, up to the value (at most
``WINDOW`` characters). Each of the cue's content words (``content_words``) weighs one over the number of
candidates whose evidence holds it (a word every candidate has tells nothing), and a candidate scores the
largest weight of cue words that the evidence of one of its occurrences holds. The recall is answerable
when the right value scores more than every other candidate (a tie is not).
"""

from __future__ import annotations

import re
from bisect import bisect_left

import numpy as np

WINDOW = 200  # characters of evidence before a value's occurrence, and of a cue's reach before its use
STOP_WORDS = frozenset(
    "the and was were for with that this you your our they them their his her its him she had has have not "
    "but from what who all are did does one then there here said asked into out about again still just "
    "would could will may can know knew remember remembered think thought".split()
)
_LONG_WORD = re.compile(r"[a-z]{3,}")
_UP_TO_SENTENCE_END = re.compile(r'(?s:.*)(?:[.!?]["”]? |\n)')  # greedy: up to the last sentence end
_KEY = 3  # characters of a value's start that its hash covers
_MIX = tuple(np.uint32(odd) for odd in (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D))  # multipliers of the hash


def _codes(text: str) -> np.ndarray:
    """The code point of each character of ``text``."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _hash(codes: np.ndarray, width: int) -> np.ndarray:
    """A 16-bit hash of the ``width`` character codes from each offset of ``codes`` that has them all."""
    count = len(codes) - width + 1
    mixed = codes[:count] * _MIX[0]
    for shift in range(1, width):
        mixed ^= codes[shift : shift + count] * _MIX[shift]
    return (mixed * _MIX[0]) >> np.uint32(16)


def value_offsets(text: str, values: set[str]) -> dict[str, list[int]]:
    """The character offsets of each of ``values`` in ``text`` as a whole word or phrase (not inside a longer
    word), as ``recalls.occurrences`` finds them (an empty value has none), in one pass over the text for all
    values: a value is tried only at the offsets whose next characters hash as its start does."""
    found: dict[str, list[int]] = {value: [] for value in values}
    searched = [value for value in values if value]
    width = min(_KEY, *map(len, searched)) if searched else 0
    if not searched or len(text) < width:
        return found
    starts: dict[int, list[str]] = {}  # hash -> the values whose first ``width`` characters hash to it
    heads = _hash(_codes("".join(value[:width] for value in searched)), width)[::width]
    for value, key in zip(searched, heads.tolist(), strict=True):
        starts.setdefault(key, []).append(value)
    table = np.zeros(1 << 16, dtype=bool)
    table[list(starts)] = True
    hashes = _hash(_codes(text), width)
    hits = np.flatnonzero(table[hashes])
    size = len(text)
    for at, key in zip(hits.tolist(), hashes[hits].tolist(), strict=True):
        for value in starts[key]:
            end = at + len(value)
            if (
                text.startswith(value, at)
                and (at == 0 or not text[at - 1].isalnum())
                and (end == size or not text[end].isalnum())
            ):
                found[value].append(at)
    return found


def content_words(text: str) -> frozenset[str]:
    """The lowercased words of ``text`` of three or more letters, stop words left out."""
    return frozenset(word for word in _LONG_WORD.findall(text.lower()) if word not in STOP_WORDS)


def evidence(text: str, offset: int) -> str:
    """The text before ``offset`` within its sentence, at most ``WINDOW`` characters."""
    start = max(0, offset - WINDOW)
    last = _UP_TO_SENTENCE_END.match(text, start, offset)
    return text[last.end() if last else start : offset]


def recall_answers(text: str, facts: list[dict]) -> list[tuple[int, int, int, bool]]:
    """(fact index in ``facts``, use index, characters from the cue's end to the value, answerable) for every
    cued use of a planted fact, in the order of the facts and their uses."""
    values = {fact["value"] for fact in facts if fact.get("planted")}
    planted = sorted(
        (offset, value) for value, offsets in value_offsets(text, values).items() for offset in offsets
    )
    postings: dict[str, list[tuple[int, str]]] = {}  # content word -> (offset, value) whose evidence holds it
    for key in planted:
        for word in content_words(evidence(text, key[0])):
            postings.setdefault(word, []).append(key)
    answers = []
    for number, fact in enumerate(facts):
        if not fact.get("planted"):
            continue
        for index, (use, span) in enumerate(zip(fact["uses"], fact.get("cues", ()), strict=False)):
            if span is None:
                continue
            scores: dict[tuple[int, str], float] = {}  # (offset, value) -> weight of the cue words it holds
            for word in content_words(text[span[0] : span[1]]):
                found = postings.get(word, [])
                earlier = found[: bisect_left(found, (span[0], ""))]  # the postings before the cue
                if earlier:  # the word weighs one over the number of values whose evidence holds it
                    weight = 1 / len({value for _, value in earlier})
                    for key in earlier:
                        scores[key] = scores.get(key, 0) + weight
            best: dict[str, float] = {}
            for (_, value), score in scores.items():
                if score > best.get(value, 0.0):
                    best[value] = score
            right = best.pop(fact["value"], 0.0)
            answers.append((number, index, use - span[1], right > max(best.values(), default=0.0)))
    return answers
