"""The statistics every story build reports, whatever wrote the stories: long-range facts and the distances
of their recalls per story length, and variety against real TinyStories at equal size.

A shard job adds each story to a ``dict`` of sums, maxima, per-key counts and lists
(``ltsgen.stories.build.merge_stats`` adds shards up); the build's ``finalize`` turns the total into the
data card's tables.
"""

from __future__ import annotations

import itertools
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from ltsgen.stories.answerable import cued_uses, recall_answers
from ltsgen.stories.plan import target_words
from ltsgen.stories.variety import cross_story_reuse, long_sentences, variety_stats, words_of
from ltsgen.tinystories_reference import TINYSTORIES_NGRAMS

# story lengths (words) and recall distances (words to the previous occurrence) of the card's histogram
LENGTH_BUCKETS = (0, 1_000, 4_000, 16_000)
DISTANCE_BINS = (0, 100, 300, 1_000, 4_000, 16_000)
CUED_BINS = (0, 40, 100, 300, 1_000, 4_000, 16_000)  # of cued recalls: the first fits a short window
LONG_STORY_WORDS = 16_000  # a story at least this long ...
FAR_RECALL_WORDS = 4_000  # ... should hold many recalls from at least this far back
REUSE_STORIES = 1_000  # cross-story reuse is measured over a build's first stories (by index) ...
REUSE_SAMPLE = 4  # ... on the sentences whose hash is divisible by this (the same sentences in every story)
# the lexical oracle reads the cued recalls of the stories whose index is divisible by this (a share, not a
# count: one story in four estimates it closely, at a quarter of the oracle's time, a tenth of a build's)
ORACLE_EVERY = 4
_FACT_KEYS = {  # the running statistics of each kind of fact
    kind: (
        f"{kind}_facts",
        f"{kind}_uses",
        f"{kind}_distance_sum",
        f"{kind}_far_uses",
        f"max_{kind}_distance",
    )
    for kind in ("setting", "planted")
}
# the shard jobs keep the text of a build's first stories (by index) whose targets start within this many
# words, twice the largest variety comparison: the n-gram columns need the first 100,000 words at most
VARIETY_SAMPLE_TARGET_WORDS = 2 * max(TINYSTORIES_NGRAMS)


def _label(edges: tuple[int, ...], value: int) -> str:
    """The label of the bin of ``edges`` (ascending) that holds ``value`` (at least the first edge)."""
    position = bisect_right(edges, value) - 1
    if position < 0:
        raise ValueError(f"{value} is below the first bin, which starts at {edges[0]}")
    return _labels(edges)[position]


@cache
def _labels(edges: tuple[int, ...]) -> tuple[str, ...]:
    """The label of each bin of ``edges``: ``low-high``, the last ``low+``."""
    return tuple(f"{low:,}-{high:,}" for low, high in itertools.pairwise(edges)) + (f"{edges[-1]:,}+",)


def add_story(
    stats: dict[str, Any], record: dict[str, Any], index: int, sentences: Mapping[str, int]
) -> None:
    """Add one story's facts, recalls and sentences to ``stats`` (a shard's running statistics);
    ``sentences`` are the story's sentence counts (``Counter(split_sentences(text))``)."""
    words = record["num_words"]
    bucket = _label(LENGTH_BUCKETS, words)
    histogram = stats.setdefault("recall_histogram", {})
    stories = stats.setdefault("stories_per_length", {})
    stories[bucket] = stories.get(bucket, 0) + 1
    far = 0
    for fact in record["meta"].get("facts", []):
        kind = "planted" if fact.get("planted") else "setting"
        facts_key, uses_key, sum_key, far_key, max_key = _FACT_KEYS[kind]
        distances = fact.get("distance_words", [])
        stats[facts_key] = stats.get(facts_key, 0) + 1
        stats[uses_key] = stats.get(uses_key, 0) + len(distances)
        stats[sum_key] = stats.get(sum_key, 0) + sum(distances)
        far_uses = sum(distance >= FAR_RECALL_WORDS for distance in distances)
        stats[far_key] = stats.get(far_key, 0) + far_uses
        stats[max_key] = max([stats.get(max_key, 0), *distances])
        if kind == "planted":  # recalls: the setting's later uses are no recalls (they have no cue)
            for distance in distances:
                key = f"{bucket}|{_label(DISTANCE_BINS, distance)}"
                histogram[key] = histogram.get(key, 0) + 1
            far += far_uses
    add_cued_recalls(stats, record, oracle=index % ORACLE_EVERY == 0)
    if words >= LONG_STORY_WORDS:
        long_stories = stats.setdefault("far_recalls_of_long_stories", {})
        long_stories[str(far)] = long_stories.get(str(far), 0) + 1
    total = sum(sentences.values())
    stats["sentences"] = stats.get("sentences", 0) + total
    stats["repeated_sentences"] = stats.get("repeated_sentences", 0) + total - len(sentences)
    most = stats.get("max_repeats_6plus", 0)
    if max(sentences.values(), default=0) > most:  # only a sentence repeated more often can raise it
        repeated = {sentence: count for sentence, count in sentences.items() if count > most}
        most = max([most, *long_sentences(repeated).values()])
    stats["max_repeats_6plus"] = most
    if index < REUSE_STORIES:
        sample = []
        for sentence, count in long_sentences(sentences).items():
            key = zlib.crc32(sentence.encode("utf-8"))
            if key % REUSE_SAMPLE == 0:
                sample.append((key, count))  # a tuple of numbers: the garbage collector skips it
        stats.setdefault("reuse_sample", []).append([index, sample])


def add_cued_recalls(stats: dict[str, Any], record: dict[str, Any], oracle: bool = True) -> None:
    """Count a story's cued recalls by distance in words to the previous occurrence, and the uses of planted
    facts without a cue; with ``oracle``, also the cued recalls the lexical oracle (``answerable``) reads
    and those it answers."""
    facts = record["meta"].get("facts", [])
    cued = stats.setdefault("cued_recalls", {})
    count = 0
    for number, use, _, _ in cued_uses(facts):
        label = _label(CUED_BINS, facts[number]["distance_words"][use])
        cued[label] = cued.get(label, 0) + 1
        count += 1
    uses = sum(len(fact["uses"]) for fact in facts if fact.get("planted"))
    stats["uncued_planted_uses"] = stats.get("uncued_planted_uses", 0) + uses - count
    if not oracle:
        return
    read = stats.setdefault("oracle_recalls", {})
    answerable = stats.setdefault("answerable_recalls", {})
    for number, use, _, right in recall_answers(record["text"], facts):
        label = _label(CUED_BINS, facts[number]["distance_words"][use])
        read[label] = read.get(label, 0) + 1
        answerable[label] = answerable.get(label, 0) + right


def cued_recall_table(total: dict[str, Any]) -> dict[str, Any]:
    """The card's table of cued recalls by distance: how many, how many the lexical oracle read (those of
    one story in ``ORACLE_EVERY``), and the share of those it answers."""
    cued, read = total.get("cued_recalls", {}), total.get("oracle_recalls", {})
    answerable = total.get("answerable_recalls", {})
    rows = []
    for label in [*(_label(CUED_BINS, edge) for edge in CUED_BINS), "all"]:
        if label == "all":
            count, checked, right = (sum(counts.values()) for counts in (cued, read, answerable))
        else:
            count, checked, right = cued.get(label, 0), read.get(label, 0), answerable.get(label, 0)
        rows.append([label, count, checked, right, f"{100 * right / checked:.1f}%" if checked else "-"])
    rows.append(
        [
            "uses of planted facts without a cue (not scored)",
            total.get("uncued_planted_uses", 0),
            "-",
            "-",
            "-",
        ]
    )
    columns = ["distance in words", "cued recalls", f"read by the oracle (1 story in {ORACLE_EVERY})"]
    return {"columns": [*columns, "answerable", "answerable share"], "rows": rows}


def fact_tables(total: dict[str, Any]) -> dict[str, Any]:
    """The card's tables of long-range facts and of the recall distances per story length."""
    rows = []
    for kind, label in (("setting", "the setting's (pet, friend, colours, ...)"), ("planted", "planted")):
        facts, uses = total.get(f"{kind}_facts", 0), total.get(f"{kind}_uses", 0)
        rows.append(
            [
                label,
                facts,
                uses,
                round(total.get(f"{kind}_distance_sum", 0) / max(uses, 1), 1),
                total.get(f"{kind}_far_uses", 0),
                total.get(f"max_{kind}_distance", 0),
            ]
        )
    tables: dict[str, Any] = {
        "Long-range facts (distance: words to the value's previous occurrence)": {
            "columns": [
                "facts",
                "count",
                "later uses",
                "mean distance",
                f"uses from {FAR_RECALL_WORDS:,}+ back",
                "longest",
            ],
            "rows": rows,
        }
    }
    histogram = total.get("recall_histogram", {})
    per_length = total.get("stories_per_length", {})
    bins = [_label(DISTANCE_BINS, edge) for edge in DISTANCE_BINS]
    buckets = [
        _label(LENGTH_BUCKETS, edge) for edge in LENGTH_BUCKETS if _label(LENGTH_BUCKETS, edge) in per_length
    ]
    tables["Recalls of planted facts: distance in words to the previous occurrence, per story length"] = {
        "columns": ["story words", "stories", "recalls", *bins],
        "rows": [
            [
                bucket,
                per_length[bucket],
                sum(histogram.get(f"{bucket}|{b}", 0) for b in bins),
                *(histogram.get(f"{bucket}|{b}", 0) for b in bins),
            ]
            for bucket in buckets
        ],
    }
    tables[
        "Cued recalls: answerable from the text alone (lexical oracle), by distance to the previous occurrence"
    ] = cued_recall_table(total)
    long_stories = total.get("far_recalls_of_long_stories", {})
    if long_stories:
        counts = sorted(int(far) for far in long_stories)
        tables[f"Recalls from {FAR_RECALL_WORDS:,}+ words back in stories of {LONG_STORY_WORDS:,}+ words"] = {
            "columns": ["stories", "fewest in one story", "most in one story"],
            "rows": [[sum(long_stories.values()), counts[0], counts[-1]]],
        }
    return tables


def variety_sample_stories(seed: int, min_words: int, max_words: int) -> int:
    """How many of a build's first stories (by index) its shard jobs keep the text of, for the variety
    table: story ``i`` is kept when the targets of the stories before it add up to less than
    ``VARIETY_SAMPLE_TARGET_WORDS`` (a function of the arguments alone, the same in every job)."""
    stories = words = 0
    while words < VARIETY_SAMPLE_TARGET_WORDS:
        words += target_words(stories, seed, min_words, max_words)
        stories += 1
    return stories


def sampled_reuse(total: dict[str, Any]) -> dict[str, Any]:
    """Cross-story reuse of the build's first ``REUSE_STORIES`` stories from the shards' hashed samples."""
    ordered = sorted(total.get("reuse_sample", []), key=lambda item: item[0])[:REUSE_STORIES]
    return cross_story_reuse({key: count for key, count in sample} for _, sample in ordered)


def variety_table(sample_texts: Iterable[str] | None, total: dict[str, Any], label: str) -> dict[str, Any]:
    """The build against real TinyStories at equal size: distinct-2/3 and the top-4-gram share over the
    first words of both (the largest reference size the build reaches), cross-story reuse over the first
    stories of both, and the per-story repetition of the whole build. ``sample_texts`` are the build's
    first stories in index order (read only as far as the comparison needs; a build keeps those of
    ``variety_sample_stories``); None where the text is not at hand (the n-gram columns then stay empty)."""
    from ltsgen.tinystories_reference import (
        TINYSTORIES_NGRAMS,
        TINYSTORIES_REUSE,
        TINYSTORIES_VARIETY,
        comparison_stories,
        comparison_words,
    )

    words = total.get("words", 0)
    size = comparison_words(words) if sample_texts is not None else None
    sample_texts = list(_first_words(sample_texts, size)) if size else []
    ngrams = {"words": words, "distinct_2": "-", "distinct_3": "-", "top_4gram_share": "-"}
    while size is not None:  # (punctuation-only tokens are no words: the sample may fall a little short)
        ngrams = variety_stats(sample_texts, max_words=size)
        if ngrams["words"] == size:
            break
        size = comparison_words(size - 1)
    reuse = sampled_reuse(total)
    reference_stories = comparison_stories(reuse["stories"])
    columns = ["text", "words", "distinct-2", "distinct-3", "top-1,000 4-gram share", "stories"]
    columns += ["cross-story reuse", "repeated sentences", "max repeats 6+"]
    build = [
        label,
        ngrams["words"],
        *(_rounded(ngrams[key]) for key in ("distinct_2", "distinct_3", "top_4gram_share")),
        reuse["stories"],
        f"{100 * reuse['share']:.2f}%",
        f"{100 * total.get('repeated_sentences', 0) / max(total.get('sentences', 0), 1):.2f}%",
        total.get("max_repeats_6plus", 0),
    ]
    reference = ["TinyStories (real, validation split)", size or "-"]
    reference += [round(value, 4) for value in TINYSTORIES_NGRAMS[size]] if size else ["-", "-", "-"]
    reference += [reference_stories or "-"]
    reference += [f"{100 * TINYSTORIES_REUSE[reference_stories]:.2f}%" if reference_stories else "-"]
    reference += [
        f"{100 * TINYSTORIES_VARIETY['repeated_sentence_share']:.2f}%",
        TINYSTORIES_VARIETY["max_repeats_6plus"],
    ]
    return {"columns": columns, "rows": [build, reference]}


def _rounded(value: Any) -> Any:
    return round(value, 4) if isinstance(value, float) else value


def _first_words(texts: Iterable[str], size: int) -> Iterable[str]:
    """The texts that hold the first ``size`` words (as ``variety.words_of`` counts them)."""
    words = 0
    for text in texts:
        if words >= size:
            return
        words += len(words_of(text))
        yield text
