"""Words per second of the built-in story engine on one core, against the 500k goal and a naive baseline.

The baseline is what a user would hand-write instead: fill a handful of sentence templates with
``random.choice`` per slot and join the sentences (no world, no facts, no repeat guard, no length control).
Both run side by side in this process on the same story lengths; rates are words per CPU-second.

    python benchmarks/stories.py [--stories 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time

from ltsgen.stories.engine import generate_story
from ltsgen.stories.plan import target_words
from ltsgen.stories.vocabulary import ADJECTIVES, NOUNS, VERBS

GOAL_WORDS_PER_SECOND = 500_000

_TEMPLATES = (
    "Once upon a time, there was a {adj} {noun}.",
    "The {noun} liked to {verb} with the {adj} {noun}.",
    "One day, the {noun} saw a {adj} {noun} near the {noun}.",
    '"Let us {verb} together," said the {noun}.',
    "They were very {adj} and went to {verb} by the {noun}.",
)


def naive_story(rng: random.Random, target: int) -> str:
    """The hand-written peer: template filling with random.choice per slot, until the target length."""
    sentences: list[str] = []
    words = 0
    while words < target:
        sentence = rng.choice(_TEMPLATES).format(
            adj=rng.choice(ADJECTIVES), noun=rng.choice(NOUNS), verb=rng.choice(VERBS)
        )
        sentence = sentence.replace("{noun}", rng.choice(NOUNS)).replace("{adj}", rng.choice(ADJECTIVES))
        sentences.append(sentence)
        words += len(sentence.split())
    return " ".join(sentences)


def _rate(make, targets) -> tuple[float, int]:
    """Words per CPU-second of this process (robust to other work on a shared machine)."""
    start = time.process_time()
    words = sum(len(make(i, t).split()) for i, t in enumerate(targets))
    return words / (time.process_time() - start), words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-words", type=int, default=100)
    parser.add_argument("--max-words", type=int, default=32_000)
    args = parser.parse_args()
    targets = [target_words(i, args.seed, args.min_words, args.max_words) for i in range(args.stories)]
    generate_story(0, args.seed, 500)  # warm up imports and caches
    engine_rate, engine_words = _rate(lambda i, t: generate_story(i, args.seed, t)["text"], targets)
    rng = random.Random(args.seed)
    naive_rate, naive_words = _rate(lambda i, t: naive_story(rng, t), targets)
    print(f"{args.stories} stories, targets log-uniform in [{args.min_words}, {args.max_words}], 1 core")
    print(f"{'generator':<34}{'words':>12}{'words/s':>14}")
    print(f"{'ltsgen engine':<34}{engine_words:>12,}{engine_rate:>14,.0f}")
    print(f"{'naive random.choice templates':<34}{naive_words:>12,}{naive_rate:>14,.0f}")
    print(f"ratio engine / naive baseline: {engine_rate / naive_rate:.2f}")
    print(
        f"ratio engine / goal ({GOAL_WORDS_PER_SECOND:,} words/s): {engine_rate / GOAL_WORDS_PER_SECOND:.2f}"
    )


if __name__ == "__main__":
    main()
