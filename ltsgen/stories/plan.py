"""Per-story plan: stable seeding, story ids, target lengths and story features.

Everything here is a pure function of ``(index, seed)``: a stable hash (BLAKE2b, never Python's salted
``hash()``) seeds one ``random.Random`` per purpose, so any worker can produce any story on its own.
"""

from __future__ import annotations

import hashlib
import math
import random

from ltsgen.stories.vocabulary import FEATURES

MAX_WORDS = 32_000  # the longest story target
# The shortest target the built-in engine lands near (its setup and ending need this many words);
# tests/builders/test_story_engine.py checks that stories of this target land within 5% of it.
MIN_TARGET_WORDS = 100


def stable_seed(*parts: object) -> int:
    """A 64-bit integer from ``parts``, the same on every machine and Python process."""
    key = "\x1f".join(str(part) for part in parts).encode()
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


def story_rng(index: int, seed: int, purpose: str = "story") -> random.Random:
    """The random generator of one story (``purpose`` separates independent streams)."""
    return random.Random(stable_seed("lts", purpose, seed, index))


def story_id(index: int, seed: int) -> str:
    """The record id of story ``index`` of a build with ``seed``, e.g. ``lts-0-00000042``."""
    if index < 0 or seed < 0:
        raise ValueError(f"story index and seed must be >= 0 (got index={index}, seed={seed})")
    return f"lts-{seed}-{index:08d}"


def target_words(index: int, seed: int, min_words: int = MIN_TARGET_WORDS, max_words: int = MAX_WORDS) -> int:
    """The word count story ``index`` aims at: log-uniform in ``[min_words, max_words]``."""
    if not 1 <= min_words <= max_words:
        raise ValueError(f"need 1 <= min_words <= max_words (got {min_words}, {max_words})")
    u = story_rng(index, seed, "length").random()
    return min(
        max_words, round(math.exp(math.log(min_words) + u * (math.log(max_words) - math.log(min_words))))
    )


# How often each feature is asked for, roughly as the TinyStories prompts mixed them (each prompt asked for
# a random subset of these features); "moral" and "bad ending" exclude each other's happy closing.
FEATURE_RATES = {
    "dialogue": 0.7,
    "plot twist": 0.35,
    "foreshadowing": 0.35,
    "conflict": 0.35,
    "moral": 0.4,
    "bad ending": 0.12,
}


def sample_features(rng: random.Random) -> tuple[str, ...]:
    """A subset of ``FEATURES`` for one story, in ``FEATURES`` order."""
    return tuple(feature for feature in FEATURES if rng.random() < FEATURE_RATES[feature])
