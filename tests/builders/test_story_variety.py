"""Variety of the built-in engine against real TinyStories, and the statistics the card reports about it."""

from __future__ import annotations

from collections import Counter

import pytest

from ltsgen.stories.engine.story import write_story
from ltsgen.stories.plan import target_words
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND
from ltsgen.stories.statistics import add_story, sampled_reuse
from ltsgen.stories.variety import cross_story_reuse, reuse_of_texts, split_sentences


def build(count: int, low: int, high: int, seed: int = 0) -> list[tuple[dict, dict[str, int]]]:
    """(record, sentence counts) of ``count`` stories."""
    return [
        write_story(
            i, seed, target_words(i, seed, low, high), DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND
        )[:2]
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def thousand() -> list[tuple[dict, dict[str, int]]]:
    """1,000 stories of TinyStories' lengths and a little beyond (100-600 words)."""
    return build(1000, 100, 600)


def test_sentence_counts_are_those_of_the_text(thousand):
    for record, sentences in thousand[:200]:
        assert sentences == Counter(split_sentences(record["text"]))


def test_cross_story_reuse_of_a_thousand_stories_is_within_tinystories(thousand):
    from ltsgen.tinystories_reference import TINYSTORIES_REUSE

    exact = reuse_of_texts(record["text"] for record, _ in thousand)
    assert exact["stories"] == 1000 and exact["sentences"] > 10_000
    assert exact["share"] <= TINYSTORIES_REUSE[789], exact


def test_sampled_reuse_estimates_the_exact_share(thousand):
    stats: dict = {}
    for index, (record, sentences) in enumerate(thousand):
        add_story(stats, record, index, sentences)
    exact = reuse_of_texts(record["text"] for record, _ in thousand)["share"]
    assert sampled_reuse(stats)["stories"] == 1000
    assert abs(sampled_reuse(stats)["share"] - exact) < 0.01


def test_cross_story_reuse_definition():
    stories = [{"a": 2, "b": 1}, {"a": 1, "c": 3}, {"d": 1}]
    assert cross_story_reuse(stories) == {"stories": 3, "sentences": 8, "reused": 3, "share": 3 / 8}
    text = "One two three four five six. One two three four five six. Short one."
    assert reuse_of_texts([text, text.replace("six", "seven")])["share"] == 0.0
    assert reuse_of_texts([text, text])["share"] == 1.0
