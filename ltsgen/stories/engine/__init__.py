"""The built-in LongTinyStories engine: one story as a pure function of ``(index, seed, target_words)``.

``story`` assembles a story from a ``world`` (characters, places, facts), a ``plot`` (setup, chapters,
episodes, ending) and a ``narrator`` (sentences from the ``grammar`` over the phrase banks of ``banks``,
a repeat guard, fact offsets); ``build`` writes a build's shards and statistics.
"""

from ltsgen.stories.engine.story import ENGINE_VERSION, generate_story

__all__ = ["ENGINE_VERSION", "generate_story"]
