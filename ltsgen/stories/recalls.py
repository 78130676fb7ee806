"""Planted facts recalled at controlled distances: the distance distribution, a story's schedule, and the
distances of every use of a fact as measured in the text.

A planted fact has a value that appears nowhere else in its story (an invented name, a number, an object
word that no other sentence uses). It is planted once and recalled later, each recall at a distance in
words from the value's previous occurrence drawn from a ``Distances`` distribution, so that between two
occurrences the value never appears.

A story's schedule draws its recall distances stratified (one from each equal-probability stratum of the
distribution), packs them into chains (longest first, each into a random chain that has room left within
half the span and fewer than ``MAX_RECALLS_PER_FACT`` recalls, else a new one), one chain per fact, and
starts each chain at a uniform position where it fits in the story's span. So the realised distances
follow the distribution, for short stories as for long ones.

Shared by the built-in engine and the LLM backend (which recalls at chapter granularity).
"""

from __future__ import annotations

import math
import random
import re
from bisect import bisect_left
from dataclasses import dataclass

KINDS = ("log-uniform", "uniform", "mixed")
DEFAULT_RECALLS_PER_THOUSAND = 8.0  # recalls per 1,000 words of a story's span
MAX_RECALLS_PER_FACT = 6  # a value is recalled at most this often (then a new fact is planted)
# ``mixed``: this share of the recalls is near (log-uniform from LOW to NEAR_WORDS words: inside a short
# training window), the rest far (log-uniform from FAR_WORDS to HIGH)
NEAR_SHARE = 0.25
NEAR_WORDS = 40
FAR_WORDS = 100


@dataclass(frozen=True)
class Distances:
    """Recall distances in words: ``kind`` over ``[low, high]``; ``high=None`` is the story's span."""

    kind: str = "mixed"
    low: int = 10
    high: int | None = None

    @classmethod
    def parse(cls, text: str) -> Distances:
        """``KIND:LOW:HIGH`` (e.g. ``mixed:10:length``, ``uniform:500:4000``); ValueError if malformed."""
        parts = text.split(":")
        if len(parts) != 3 or parts[0] not in KINDS:
            raise ValueError(f"{text!r} is not KIND:LOW:HIGH with KIND one of {', '.join(KINDS)}")
        try:
            low = int(parts[1])
            high = None if parts[2] == "length" else int(parts[2])
        except ValueError:
            raise ValueError(f"{text!r}: LOW is a number of words, HIGH a number or 'length'") from None
        if low < 1 or (high is not None and high < low):
            raise ValueError(f"{text!r}: need 1 <= LOW <= HIGH")
        return cls(parts[0], low, high)

    def __str__(self) -> str:
        return f"{self.kind}:{self.low}:{'length' if self.high is None else self.high}"

    def bounds(self, span: int) -> tuple[int, int] | None:
        """(low, high) for a story whose recalls can spread over ``span`` words; None when none fits."""
        high = span if self.high is None else min(self.high, span)
        return (self.low, high) if high >= self.low else None

    def parts(self, low: int, high: int) -> list[tuple[float, str, int, int]]:
        """The distribution over ``[low, high]`` as (probability, kind, low, high) parts in order."""
        if self.kind != "mixed":
            return [(1.0, self.kind, low, high)]
        near = (NEAR_SHARE, "log-uniform", low, min(NEAR_WORDS, high)) if low <= NEAR_WORDS else None
        far_low = max(FAR_WORDS, low)
        far = (1 - NEAR_SHARE, "log-uniform", far_low, high) if high >= far_low else None
        if near and far:
            return [near, far]
        if near or far:
            return [(1.0, *(near or far)[1:])]
        return [(1.0, "log-uniform", low, high)]  # between the near and the far range

    def quantile(self, u: float, low: int, high: int) -> float:
        """The distance at cumulative probability ``u`` in ``[0, 1]``."""
        *first, last = self.parts(low, high)
        for share, kind, part_low, part_high in first:
            if u <= share:
                return _inverse(kind, u / share, part_low, part_high)
            u -= share
        share, kind, part_low, part_high = last
        return _inverse(kind, min(1.0, u / share), part_low, part_high)

    def cdf(self, distance: float, low: int, high: int) -> float:
        """The cumulative probability of ``distance`` (clipped to [0, 1])."""
        total = 0.0
        for share, kind, part_low, part_high in self.parts(low, high):
            if part_high == part_low:
                u = 1.0 if distance >= part_high else 0.0
            elif kind == "uniform":
                u = (distance - part_low) / (part_high - part_low)
            else:
                u = math.log(max(distance, 1e-9) / part_low) / math.log(part_high / part_low)
            total += share * min(1.0, max(0.0, u))
        return min(1.0, total)


def _inverse(kind: str, u: float, low: int, high: int) -> float:
    """The distance at cumulative probability ``u`` of ``kind`` (uniform or log-uniform) on [low, high]."""
    if kind == "uniform":
        return low + u * (high - low)
    return low * (high / low) ** u


DEFAULT_DISTANCES = Distances()  # a quarter from 10 to 40 words, the rest log-uniform from 100 to the span


@dataclass(frozen=True)
class Chain:
    """One planted fact's schedule: planted at word ``start``, recalled after each of ``gaps`` words."""

    start: int
    gaps: list[int]

    @property
    def positions(self) -> list[int]:
        """Word positions of the plant and of each recall."""
        positions = [self.start]
        for gap in self.gaps:
            positions.append(positions[-1] + gap)
        return positions


def schedule(
    rng: random.Random, distances: Distances, start: int, end: int, per_thousand: float
) -> tuple[list[Chain], tuple[int, int] | None]:
    """The chains of one story whose recalls may go between word ``start`` and word ``end``:
    ``per_thousand`` recalls per 1,000 words of that span, distances stratified from ``distances``.
    Returns the chains (in order of their start) and the distance bounds used (None: no recall fits)."""
    span = end - start
    bounds = distances.bounds(span)
    count = round(per_thousand * span / 1000) if bounds else 0
    if count < 1:
        return [], bounds
    low, high = bounds
    gaps = [max(1, round(distances.quantile((k + rng.random()) / count, low, high))) for k in range(count)]
    # a chain fills at most half the span (or holds one longer gap), so that chain starts spread out
    capacity = span // 2
    packed: list[list[int]] = []
    room: list[int] = []  # capacity left in each chain of ``packed``
    open_chains: list[int] = []  # indices of the chains with fewer than MAX_RECALLS_PER_FACT gaps, in order
    for gap in sorted(gaps, reverse=True):
        fitting = [number for number in open_chains if gap <= room[number]]
        if fitting:
            number = rng.choice(fitting)
            packed[number].append(gap)
            room[number] -= gap
            if len(packed[number]) == MAX_RECALLS_PER_FACT:
                open_chains.remove(number)
        else:
            packed.append([gap])
            room.append(capacity - gap)
            open_chains.append(len(packed) - 1)
    chains = []
    for members in packed:
        rng.shuffle(members)
        chains.append(Chain(start + round(rng.random() * (span - sum(members))), members))
    chains.sort(key=lambda chain: chain.start)
    return chains, bounds


def _regular_spacing(text: str) -> bool:
    """Whether the words of ``text`` are separated by single spaces and single blank lines only."""
    if not text.isascii() or text[:1].isspace():
        return False
    if any(bad in text for bad in ("  ", " \n", "\n ", "\n\n\n", "\t", "\r", "\x0b", "\x0c")):
        return False
    return text.count("\n") == 2 * text.count("\n\n")


def word_index(text: str, offsets: list[int]) -> list[int]:
    """The index of the whitespace-separated word that holds each of ``offsets`` (ascending); fast for text
    whose words are separated by single spaces and blank lines (the stories')."""
    if not _regular_spacing(text):
        starts = [match.start() for match in re.finditer(r"\S+", text)]
        return [bisect_left(starts, offset) for offset in offsets]
    indices, words, previous = [], 0, 0
    for offset in offsets:
        words += text.count(" ", previous, offset) + text.count("\n\n", previous, offset)
        indices.append(words)
        previous = offset
    return indices


def occurrences(text: str, value: str) -> list[int]:
    """Character offsets of ``value`` in ``text`` as a whole word or phrase (not inside a longer word)."""
    found, size, length, find = [], len(value), len(text), text.find
    at = find(value)
    while at >= 0:
        end = at + size
        if (at == 0 or not text[at - 1].isalnum()) and (end == length or not text[end].isalnum()):
            found.append(at)
        at = find(value, at + 1)
    return found


def use_distances(text: str, facts: list[dict], search: bool = False) -> None:
    """Add to each fact record its uses' distances to the nearest previous occurrence of the value in the
    text, ``distance_chars`` and ``distance_words`` (one per use). The built-in engine writes a planted
    fact's value only where it records it; any other value (and every value with ``search``) is searched
    for in the whole text, recorded as a use or not."""
    needed: set[int] = set()
    previous: list[list[int]] = []
    for fact in facts:
        if fact.get("planted") and not search:
            before = [fact["first"], *fact["uses"]][: len(fact["uses"])]
        else:
            found = occurrences(text, fact["value"])
            before = [found[bisect_left(found, use) - 1] for use in fact["uses"]]
        previous.append(before)
        needed.update(before)
        needed.update(fact["uses"])
    ordered = sorted(needed)
    index = dict(zip(ordered, word_index(text, ordered), strict=True))
    for fact, before in zip(facts, previous, strict=True):
        uses = fact["uses"]
        fact["distance_chars"] = [use - prior for use, prior in zip(uses, before, strict=True)]
        fact["distance_words"] = [index[use] - index[prior] for use, prior in zip(uses, before, strict=True)]
