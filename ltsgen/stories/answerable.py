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
from collections.abc import Iterator

import numpy as np

WINDOW = 200  # characters of evidence before a value's occurrence, and of a cue's reach before its use
STOP_WORDS = frozenset(
    "the and was were for with that this you your our they them their his her its him she had has have not "
    "but from what who all are did does one then there here said asked into out about again still just "
    "would could will may can know knew remember remembered think thought".split()
)
_LONG_WORD = re.compile(r"[a-z]{3,}")
_UP_TO_SENTENCE_END = re.compile(r'(?s:.*)(?:[.!?]["”]? |\n)')  # greedy: up to the last sentence end
# ASCII letters lowercased, every other byte a space: runs of letters become the text's words
_LETTERS = bytes(code | 0x20 if chr(code).isascii() and chr(code).isalpha() else 0x20 for code in range(256))
_KEY = 3  # characters of a value's start that its hash covers
_MIX = tuple(np.uint32(odd) for odd in (0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D))  # multipliers of the hash


def _codes(text: str) -> np.ndarray:
    """The code point of each character of ``text`` (a byte each when the text is ASCII)."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _hash(codes: np.ndarray, width: int) -> np.ndarray:
    """A 16-bit hash of the ``width`` character codes from each offset of ``codes`` that has them all."""
    count = len(codes) - width + 1
    mixed = np.multiply(codes[:count], _MIX[0], dtype=np.uint32)
    term = np.empty_like(mixed)
    for shift in range(1, width):
        mixed ^= np.multiply(codes[shift : shift + count], _MIX[shift], out=term)
    mixed *= _MIX[0]
    mixed >>= np.uint32(16)
    return mixed


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
    return text[_evidence_start(text, offset) : offset]


def _evidence_start(text: str, offset: int) -> int:
    start = max(0, offset - WINDOW)
    last = _UP_TO_SENTENCE_END.match(text, start, offset)
    return last.end() if last else start


def _postings(text: str, planted: list[tuple[int, str]], words: frozenset[str]) -> dict[str, list[int]]:
    """Each of the content ``words`` -> the indices in ``planted`` (ascending) of the occurrences whose
    evidence holds it. ASCII text is read as its runs of letters, lowercased in one pass; those of three or
    more letters are the words ``content_words`` finds."""
    ascii = text.isascii()
    if ascii:
        letters = text.encode("ascii").translate(_LETTERS).decode("ascii")
    postings: dict[str, list[int]] = {}
    for number, (offset, _) in enumerate(planted):
        start = _evidence_start(text, offset)
        if ascii:
            held = words.intersection(letters[start:offset].split())
        else:
            held = words.intersection(_LONG_WORD.findall(text[start:offset].lower()))
        for word in held:
            postings.setdefault(word, []).append(number)
    return postings


def cued_uses(facts: list[dict]) -> Iterator[tuple[int, int, int, list[int]]]:
    """(fact index in ``facts``, use index, the use's character offset, its cue's span) of every cued use of
    a planted fact (a use whose cue is not null), in the order of the facts and their uses."""
    for number, fact in enumerate(facts):
        if fact.get("planted"):
            for index, (use, span) in enumerate(zip(fact["uses"], fact.get("cues", ()), strict=False)):
                if span is not None:
                    yield number, index, use, span


def recall_answers(text: str, facts: list[dict]) -> list[tuple[int, int, int, bool]]:
    """(fact index in ``facts``, use index, characters from the cue's end to the value, answerable) for every
    cued use of a planted fact (``cued_uses``), in the order of the facts and their uses."""
    values = {fact["value"] for fact in facts if fact.get("planted")}
    planted = sorted(
        (offset, value) for value, offsets in value_offsets(text, values).items() for offset in offsets
    )
    cues = [
        (number, index, use, span, content_words(text[span[0] : span[1]]))
        for number, index, use, span in cued_uses(facts)
    ]
    postings = _postings(text, planted, frozenset().union(*(words for *_, words in cues)))
    offsets = {word: [planted[number][0] for number in found] for word, found in postings.items()}
    distinct: dict[str, list[int]] = {}  # word -> values among the first n of its postings, for each n
    answers = []
    for number, index, use, span, words in cues:
        scores: dict[int, float] = {}  # occurrence (index in planted) -> weight of the cue words it holds
        for word in words:
            if word not in postings:
                continue
            earlier = bisect_left(offsets[word], span[0])  # the postings before the cue
            if earlier:  # the word weighs one over the number of values whose evidence holds it
                if word not in distinct:
                    distinct[word] = _distinct_counts(planted, postings[word])
                weight = 1 / distinct[word][earlier]
                for key in postings[word][:earlier]:
                    scores[key] = scores.get(key, 0) + weight
        best: dict[str, float] = {}
        for key, score in scores.items():
            value = planted[key][1]
            if score > best.get(value, 0.0):
                best[value] = score
        right = best.pop(facts[number]["value"], 0.0)
        answers.append((number, index, use - span[1], right > max(best.values(), default=0.0)))
    return answers


def _distinct_counts(planted: list[tuple[int, str]], found: list[int]) -> list[int]:
    """The number of distinct values among the first n occurrences of ``found``, for n from 0."""
    seen: set[str] = set()
    counts = [0]
    for number in found:
        seen.add(planted[number][1])
        counts.append(len(seen))
    return counts
