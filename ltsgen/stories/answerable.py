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

from ltsgen.stories.recalls import occurrences

WINDOW = 200  # characters of evidence before a value's occurrence, and of a cue's reach before its use
STOP_WORDS = frozenset(
    "the and was were for with that this you your our they them their his her its him she had has have not "
    "but from what who all are did does one then there here said asked into out about again still just "
    "would could will may can know knew remember remembered think thought".split()
)
_WORD = re.compile(r"[a-z]+")
_SENTENCE_END = re.compile(r'[.!?]["”]? |\n')


def content_words(text: str) -> frozenset[str]:
    """The lowercased words of ``text`` of three or more letters, stop words left out."""
    return frozenset(word for word in _WORD.findall(text.lower()) if len(word) > 2 and word not in STOP_WORDS)


def evidence(text: str, offset: int) -> str:
    """The text before ``offset`` within its sentence, at most ``WINDOW`` characters."""
    start = max(0, offset - WINDOW)
    ends = [match.end() for match in _SENTENCE_END.finditer(text, start, offset)]
    return text[ends[-1] if ends else start : offset]


def recall_answers(text: str, facts: list[dict]) -> list[tuple[int, int, int, bool]]:
    """(fact index in ``facts``, use index, characters from the cue's end to the value, answerable) for every
    cued use of a planted fact, in the order of the facts and their uses."""
    values = {fact["value"] for fact in facts if fact.get("planted")}
    postings: dict[str, list[tuple[int, str]]] = {}  # content word -> (offset, value) whose evidence holds it
    for value in values:
        for offset in occurrences(text, value):
            for word in content_words(evidence(text, offset)):
                postings.setdefault(word, []).append((offset, value))
    holders: dict[str, list[int]] = {}  # content word -> the values among its first 1, 2, ... postings
    for word, found in postings.items():
        found.sort()
        seen: set[str] = set()
        holders[word] = []
        for _, value in found:
            seen.add(value)
            holders[word].append(len(seen))
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
                before = bisect_left(found, (span[0], ""))  # the postings before the cue
                if before:  # the word weighs one over the number of values whose evidence holds it
                    weight = 1 / holders[word][before - 1]
                    for key in found[:before]:
                        scores[key] = scores.get(key, 0) + weight
            best: dict[str, float] = {}
            for (_, value), score in scores.items():
                best[value] = max(best.get(value, 0.0), score)
            right = best.pop(fact["value"], 0.0)
            answers.append((number, index, use - span[1], right > max(best.values(), default=0.0)))
    return answers
