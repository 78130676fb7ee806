"""The built-in LongTinyStories engine: one story as a pure function of (index, seed, target_words)."""

from __future__ import annotations

from typing import NamedTuple

from ltsgen.stories.engine.plot import CHAPTER_WORDS, Plot
from ltsgen.stories.engine.world import build_world
from ltsgen.stories.plan import MAX_WORDS, sample_features, story_id, story_rng
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND, Distances, use_distances

ENGINE_VERSION = "7"


def generate_story(
    index: int,
    seed: int,
    target_words: int,
    distances: Distances = DEFAULT_DISTANCES,
    recalls_per_thousand: float = DEFAULT_RECALLS_PER_THOUSAND,
) -> dict:
    """Story ``index`` of a build with ``seed``, about ``target_words`` words long, as a contract record
    (``id text source num_words meta``); ``meta`` holds the plan, the features and the long-range facts:
    the setting's and the planted ones, recalled at ``distances`` (``recalls_per_thousand`` per 1,000
    words), each use with its distance to the value's previous occurrence."""
    return write_story(index, seed, target_words, distances, recalls_per_thousand)[0]


class WrittenStory(NamedTuple):
    """``generate_story``'s record, with what the build's statistics take from the writing: the sentence
    counts (as ``variety.split_sentences`` splits the text, which is then not split again) and the recalls
    scheduled but not written, for want of keys (a story has one planted fact per key)."""

    record: dict
    sentences: dict[str, int]
    recalls_dropped: int


def write_story(
    index: int, seed: int, target_words: int, distances: Distances, recalls_per_thousand: float
) -> WrittenStory:
    """``generate_story``'s record and what the build's statistics take from the writing (``WrittenStory``)."""
    if not 1 <= target_words <= MAX_WORDS:
        raise ValueError(f"target_words must be in [1, {MAX_WORDS}] (got {target_words})")
    rng = story_rng(index, seed)
    features = sample_features(rng)
    chapters = max(1, target_words // ((CHAPTER_WORDS[0] + CHAPTER_WORDS[1]) // 2))
    world = build_world(rng, num_places=chapters + 1, num_companions=max(0, chapters // 2))
    plot = Plot(rng, world, features, distances, recalls_per_thousand)
    narrator = plot.write(target_words)
    text = narrator.text()
    facts = world.facts.records()
    use_distances(text, facts)
    record = {
        "id": story_id(index, seed),
        "text": text,
        "source": "lts",
        "num_words": narrator.words,
        "meta": {
            "engine_version": ENGINE_VERSION,
            "target_words": target_words,
            "features": list(features),
            "plan": {
                "goal": plot.goal,
                "theme": plot.theme,
                "hero": world.hero.name,
                "places": plot.visited,
                "chapters": text.count("\n\nChapter ") + text.startswith("Chapter "),
            },
            "facts": facts,
            "recalls": {
                "distances": str(distances),
                "bounds": list(plot.recall_bounds) if plot.recall_bounds else None,
                "per_1k_words": recalls_per_thousand,
                "planted": len(plot.planted),
            },
        },
    }
    return WrittenStory(record, narrator.counts, plot.recalls_dropped)
