"""Words per second of the built-in story engine on one core, against the 500k goal and a naive baseline,
and of a whole ``ltsgen stories`` build (writing, statistics, card) against the engine alone.

The baseline is what a user would hand-write instead: fill a handful of sentence templates with
``random.choice`` per slot and join the sentences (no world, no facts, no repeat guard, no length control).
Engine and baseline run side by side in this process on the same story lengths (words per CPU-second). The
build runs as a user runs it, ``ltsgen stories --workers 1`` in a fresh process (imports included), and is
timed by its CPU time too (user + system, from the child's resource usage), so that other work on a shared
machine does not count. It is compared with the engine on the same stories twice: in this process (imports
and warm-up left out: the strict ratio), and in a fresh process that imports the engine and writes the
stories without keeping them (the same start-up as the build's: the like-for-like ratio). Each round runs
the engine, then the fresh engine process, then the build; a ratio is taken within each round (the rates
move with the load between rounds) and the table gives medians of ``--rounds``.

    python benchmarks/stories.py [--stories 200] [--build-stories 2000] [--rounds 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ltsgen.stories.engine import generate_story
from ltsgen.stories.plan import target_words
from ltsgen.stories.vocabulary import ADJECTIVES, NOUNS, VERBS

GOAL_WORDS_PER_SECOND = 500_000
GOAL_BUILD_SHARE = 0.8  # the whole build at no less than this share of the engine's rate

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


def build_rate(stories: int, seed: int, work: Path) -> tuple[float, float, int]:
    """(words per CPU-second of the whole build, CPU seconds, words) of ``ltsgen stories``."""
    out = work / f"lts-{time.monotonic_ns()}"
    command = [sys.executable, "-m", "ltsgen", "stories", "--out", str(out), "--num-stories", str(stories)]
    seconds, _ = _child([*command, "--seed", str(seed), "--workers", "1", "--no-progress"])
    manifest = json.loads((out / "manifest.json").read_text())
    words = sum(shard["words"] for shards in manifest["splits"].values() for shard in shards)
    return words / seconds, seconds, words


def fresh_engine_rate(stories: int, seed: int) -> float:
    """Words per CPU-second of a fresh process that imports the engine and writes the build's stories."""
    seconds, words = _child([sys.executable, __file__, "--engine-only", str(stories), "--seed", str(seed)])
    return int(words) / seconds


def _child(command: list[str]) -> tuple[float, str]:
    """(CPU seconds, user + system, of running ``command`` to its end; its standard output)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=200, help="stories for engine and baseline")
    parser.add_argument("--build-stories", type=int, default=2000, help="stories of the timed builds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--min-words", type=int, default=100)
    parser.add_argument("--max-words", type=int, default=32_000)
    parser.add_argument("--engine-only", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine_only is not None:  # the fresh engine process: the build's stories, their word count out
        targets = [target_words(i, args.seed) for i in range(args.engine_only)]
        print(_rate(lambda i, t: generate_story(i, args.seed, t)["text"], targets)[1])
        return
    targets = [target_words(i, args.seed, args.min_words, args.max_words) for i in range(args.stories)]
    build_targets = [target_words(i, args.seed) for i in range(args.build_stories)]
    generate_story(0, args.seed, 500)  # warm up imports and caches
    engine, naive, builds, engine_on_build, fresh = [], [], [], [], []
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            engine.append(_rate(lambda i, t: generate_story(i, args.seed, t)["text"], targets))
            naive.append(_rate(lambda i, t: naive_story(rng, t), targets))
            engine_on_build.append(
                _rate(lambda i, t: generate_story(i, args.seed, t)["text"], build_targets)[0]
            )
            fresh.append(fresh_engine_rate(args.build_stories, args.seed))
            builds.append(build_rate(args.build_stories, args.seed, Path(tmp)))
    engine_rate, naive_rate = (statistics.median(r for r, _ in runs) for runs in (engine, naive))
    build, seconds = statistics.median(r for r, _, _ in builds), statistics.median(s for _, s, _ in builds)
    words = builds[0][2]
    print(f"{args.stories} stories, targets log-uniform in [{args.min_words}, {args.max_words}], 1 core, ")
    print(f"median of {args.rounds} rounds\n")
    print("| generator | words | words/s |")
    print("|---|---:|---:|")
    print(f"| ltsgen engine (CPU time) | {engine[0][1]:,} | {engine_rate:,.0f} |")
    print(f"| naive random.choice templates (CPU time) | {naive[0][1]:,} | {naive_rate:,.0f} |")
    stories = args.build_stories
    print(
        f"| ltsgen engine, the build's {stories} stories (CPU time) | {words:,} | "
        f"{statistics.median(engine_on_build):,.0f} |"
    )
    print(
        f"| ltsgen engine, the build's {stories} stories in a fresh process (CPU time, imports included) | "
        f"{words:,} | {statistics.median(fresh):,.0f} |"
    )
    print(
        f"| `ltsgen stories --num-stories {stories} --workers 1` (CPU time, {seconds:.1f}s) | {words:,} | "
        f"{build:,.0f} |"
    )
    print(f"\nratio engine / naive baseline: {engine_rate / naive_rate:.2f}")
    print(
        f"ratio engine / goal ({GOAL_WORDS_PER_SECOND:,} words/s): {engine_rate / GOAL_WORDS_PER_SECOND:.2f}"
    )
    for name, engines in (("in this process", engine_on_build), ("in a fresh process", fresh)):
        ratios = [b[0] / e for b, e in zip(builds, engines, strict=True)]
        print(
            f"ratio whole build / engine on the same stories {name}: {statistics.median(ratios):.2f} "
            f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}; goal {GOAL_BUILD_SHARE})"
        )


if __name__ == "__main__":
    main()
