"""The built-in LongTinyStories engine: one story as a pure function of (index, seed, target_words)."""

from __future__ import annotations

from ltsgen.stories.engine.plot import CHAPTER_WORDS, Plot
from ltsgen.stories.engine.world import build_world
from ltsgen.stories.plan import MAX_WORDS, sample_features, story_id, story_rng

ENGINE_VERSION = "1"


def generate_story(index: int, seed: int, target_words: int) -> dict:
    """Story ``index`` of a build with ``seed``, about ``target_words`` words long, as a contract record
    (``id text source num_words meta``); ``meta`` holds the plan, the features and the long-range facts."""
    if not 1 <= target_words <= MAX_WORDS:
        raise ValueError(f"target_words must be in [1, {MAX_WORDS}] (got {target_words})")
    rng = story_rng(index, seed)
    features = sample_features(rng)
    chapters = max(1, target_words // ((CHAPTER_WORDS[0] + CHAPTER_WORDS[1]) // 2))
    world = build_world(rng, num_places=chapters + 1, num_companions=max(0, chapters // 2))
    plot = Plot(rng, world, features)
    narrator = plot.write(target_words)
    text = narrator.text()
    return {
        "id": story_id(index, seed),
        "text": text,
        "source": "lts",
        "num_words": len(text.split()),
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
            "facts": world.facts.records(),
        },
    }
