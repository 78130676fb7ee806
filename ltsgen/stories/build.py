"""The built-in LongTinyStories build: shard plan, shard jobs, statistics and card text.

The ``ltsgen stories`` command and the OpenAI backend both build through ``story_build_spec``.
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

from ltsgen import __version__
from ltsgen.loaders.contract import shard_relpath

MAX_WORDS = 32_000
BYTES_PER_WORD = 5.6  # planning estimate of story text bytes per word (for --shard-size-mb)
DEFAULT_SHARD_MB = 32.0
DEFAULT_SPLITS = "train=0.98,validation=0.01,test=0.01"
BUILDER_NAME = "ltsgen stories"
# the arguments that determine a built-in build's output (its identity; never --out or --workers)
OUTPUT_ARGUMENTS = ("num_stories", "min_words", "max_words", "seed", "format", "splits")
OUTPUT_ARGUMENTS += ("samples_per_shard", "shard_size_mb", "backend")


def builder_arguments(args: argparse.Namespace, extra: tuple[str, ...] = ()) -> dict[str, Any]:
    """The arguments that determine the output (the build's identity in the manifest); a backend names
    its own in ``extra``."""
    arguments = {key: getattr(args, key) for key in OUTPUT_ARGUMENTS + extra}
    if arguments.get("samples_per_shard") is None and arguments.get("shard_size_mb") is None:
        arguments["shard_size_mb"] = DEFAULT_SHARD_MB
    return arguments


def command_line(arguments: dict[str, Any]) -> str:
    """The ``ltsgen stories`` command that rebuilds a dataset with ``arguments``."""
    parts = ["ltsgen stories --out DIR"]
    for key, value in sorted(arguments.items()):
        if value is not None and (key, value) != ("backend", "builtin"):
            parts.append(f"--{key.replace('_', '-')} {value}")
    return " ".join(parts)


def plan_story_shards(arguments: dict[str, Any]) -> list[tuple[str, int, list[int]]]:
    """(split, shard index, story indices) of every shard: stories go to splits by a stable hash of their
    id and fill shards in index order, by count or by estimated text size."""
    from ltsgen.build import assign_split, chunk_by_size, parse_splits
    from ltsgen.stories.plan import story_id, target_words

    splits = parse_splits(arguments["splits"])
    seed, low, high = arguments["seed"], arguments["min_words"], arguments["max_words"]
    members: dict[str, list[int]] = {name: [] for name in splits}
    for index in range(arguments["num_stories"]):
        members[assign_split(story_id(index, seed), splits)].append(index)
    plan = []
    for split, indices in members.items():
        if arguments.get("samples_per_shard"):
            step = arguments["samples_per_shard"]
            chunks = [indices[i : i + step] for i in range(0, len(indices), step)]
        else:
            limit = arguments["shard_size_mb"] * 1e6
            chunks = chunk_by_size(
                indices, lambda i: target_words(i, seed, low, high) * BYTES_PER_WORD, limit
            )
        plan += [(split, number, chunk) for number, chunk in enumerate(chunks)]
    return plan


def story_build_spec(
    args: argparse.Namespace, run_job, statistics, name: str = BUILDER_NAME, extra: tuple[str, ...] = ()
):
    """The ``BuildSpec`` of a story build: shards planned by ``plan_story_shards``, each job's payload
    {"split", "shard", "indices", "arguments"}; ``run_job(job, output) -> stats`` writes one shard and
    ``statistics(arguments, results) -> manifest.extra`` runs at the end (the LLM backend passes its own)."""
    from ltsgen.build import BuildSpec, Job, parse_splits

    arguments = builder_arguments(args, extra)
    jobs = [
        Job(
            key=shard_relpath(split, number, args.format),
            payload={"split": split, "shard": number, "indices": indices, "arguments": arguments},
            weight=len(indices),
        )
        for split, number, indices in plan_story_shards(arguments)
    ]
    return BuildSpec(
        directory=args.out,
        builder={"name": name, "version": __version__, "arguments": arguments},
        source="lts",
        fmt=args.format,
        splits=list(parse_splits(args.splits)),
        jobs=jobs,
        run_job=run_job,
        finalize=partial(statistics, arguments),
        unit="stories",
    )


def write_story_shard(job, output) -> dict[str, Any]:
    """Generate the stories of one shard and write them; return the shard's statistics (mergeable sums)."""
    from ltsgen.stories.engine import generate_story
    from ltsgen.stories.plan import target_words
    from ltsgen.stories.variety import variety_stats

    arguments = job.payload["arguments"]
    seed, low, high = arguments["seed"], arguments["min_words"], arguments["max_words"]
    stats = {"stories": 0, "words": 0, "within_5pct": 0, "max_length_error": 0.0, "facts": 0, "fact_uses": 0}
    stats |= {"fact_distance_sum": 0, "fact_distance_max": 0, "features": {}}
    texts = []
    with output.open(job.key) as writer:
        for index in job.payload["indices"]:
            target = target_words(index, seed, low, high)
            record = generate_story(index, seed, target)
            writer.write(record)
            texts.append(record["text"])
            error = abs(record["num_words"] - target) / target
            stats["stories"] += 1
            stats["words"] += record["num_words"]
            stats["within_5pct"] += error <= 0.05
            stats["max_length_error"] = max(stats["max_length_error"], error)
            meta = record.get("meta") or {}
            for feature in meta.get("features", []):
                stats["features"][feature] = stats["features"].get(feature, 0) + 1
            for fact in meta.get("facts", []):
                stats["facts"] += 1
                stats["fact_uses"] += len(fact["uses"])
                for use in fact["uses"]:
                    stats["fact_distance_sum"] += use - fact["first"]
                    stats["fact_distance_max"] = max(stats["fact_distance_max"], use - fact["first"])
    variety = variety_stats(texts, max_words=0)  # per-story sentence statistics only
    stats["sentences"] = variety["sentences"]
    stats["repeated_sentences"] = round(variety["repeated_sentence_share"] * variety["sentences"])
    stats["max_repeats_6plus"] = variety["max_repeats_6plus"]
    return stats


def story_statistics(arguments: dict[str, Any], results) -> dict[str, Any]:
    """``manifest.extra`` of a story build: the card's text and statistics tables, from the shards' stats."""
    from ltsgen.stories.engine import generate_story
    from ltsgen.stories.plan import target_words
    from ltsgen.tinystories_reference import REFERENCE_SHA256

    total = merge_stats([result.stats for result in results])
    seed, low, high = arguments["seed"], arguments["min_words"], arguments["max_words"]
    texts = (
        generate_story(index, seed, target_words(index, seed, low, high))["text"]
        for index in range(arguments["num_stories"])
    )
    stories = total["stories"]
    statistics = {
        "Variety: this build and real TinyStories": variety_table(
            texts, total, "LongTinyStories (this build)"
        ),
        "Length control": {
            "columns": [
                "stories",
                "words",
                "mean words per story",
                "within 5% of target",
                "largest deviation",
            ],
            "rows": [
                [
                    stories,
                    total["words"],
                    round(total["words"] / stories, 1),
                    total["within_5pct"],
                    f"{100 * total['max_length_error']:.2f}%",
                ]
            ],
        },
        "Long-range facts": {
            "columns": [
                "facts",
                "per story",
                "later uses",
                "mean distance (chars)",
                "longest distance (chars)",
            ],
            "rows": [
                [
                    total["facts"],
                    round(total["facts"] / stories, 2),
                    total["fact_uses"],
                    round(total["fact_distance_sum"] / max(total["fact_uses"], 1), 1),
                    total["fact_distance_max"],
                ]
            ],
        },
    }
    if total["features"]:
        statistics["Story features"] = {
            "columns": ["feature", "stories", "share"],
            "rows": [[f, n, round(n / stories, 3)] for f, n in sorted(total["features"].items())],
        }
    return {"statistics": statistics, "card": story_card(arguments, REFERENCE_SHA256)}


def merge_stats(shard_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up per-shard statistics: counts add, ``max_*``/``*_max`` take the maximum, dicts merge by key."""
    total: dict[str, Any] = {}
    for stats in shard_stats:
        for key, value in stats.items():
            if isinstance(value, dict):
                merged = total.setdefault(key, {})
                for name, count in value.items():
                    merged[name] = merged.get(name, 0) + count
            elif key.endswith("_max") or key.startswith("max_"):
                total[key] = max(total.get(key, 0), value)
            else:
                total[key] = total.get(key, 0) + value
    return total


def variety_table(texts, total: dict[str, Any], label: str) -> dict[str, Any]:
    """Distinct-2/3 of the build's first stories and of real TinyStories at the same number of words, with
    the per-story sentence repetition (``total`` holds the merged ``sentences``, ``repeated_sentences``,
    ``max_repeats_6plus`` and ``words`` of the build)."""
    from ltsgen.stories.variety import variety_stats
    from ltsgen.tinystories_reference import TINYSTORIES_DISTINCT, TINYSTORIES_VARIETY, comparison_size

    size = comparison_size(total["words"])

    def first(texts):  # the stories that hold the first ``size`` words
        words = 0
        for text in texts:
            if words >= size:
                return
            words += len(text.split())
            yield text

    sample = variety_stats(first(texts), max_words=size)
    reference = TINYSTORIES_VARIETY
    return {
        "columns": [
            "text",
            "words for distinct-n",
            "distinct-2",
            "distinct-3",
            "repeated sentences",
            "max repeats 6+",
        ],
        "rows": [
            [
                label,
                sample["words"],
                round(sample["distinct_2"], 4),
                round(sample["distinct_3"], 4),
                f"{100 * total['repeated_sentences'] / max(total['sentences'], 1):.2f}%",
                total["max_repeats_6plus"],
            ],
            [
                "TinyStories (real, validation split)",
                size,
                round(TINYSTORIES_DISTINCT[size][0], 4),
                round(TINYSTORIES_DISTINCT[size][1], 4),
                f"{100 * reference['repeated_sentence_share']:.2f}%",
                reference["max_repeats_6plus"],
            ],
        ],
    }


def story_card(arguments: dict[str, Any], reference_sha256: str) -> dict[str, Any]:
    """What the data card says about a built-in engine build."""
    return {
        "pretty_name": "LongTinyStories",
        "license": "apache-2.0",
        "language": ["en"],
        "task_categories": ["text-generation"],
        "tags": ["long-context", "tinystories", "synthetic", "length-extrapolation"],
        "annotations_creators": "machine-generated",
        "language_creators": "machine-generated",
        "source_datasets": ["original"],
        "command": command_line(arguments),
        "summary": (
            "Long stories in the simple English of TinyStories (a young child's vocabulary, short sentences, "
            f"dialogue, named characters), from {arguments['min_words']:,} to {arguments['max_words']:,} "
            "words, in chapters. Facts set early in a story (a pet's name, the colour of a lost key, where "
            "a thing was hidden, a promise) are used correctly chapters later, and each story's `meta` "
            "records them with the character offsets of their first mention and later uses."
        ),
        "motivation": (
            "Models trained on short contexts are evaluated on long ones to measure length extrapolation "
            "(position encodings such as RoPE, ALiBi, Kerple, FIRE or APE). Real long documents mix many "
            "skills; these stories keep the language as simple as TinyStories, so a small model can learn "
            "it, and make length matter through long-range facts whose tokens can only be predicted from "
            "text thousands of words back. The recorded fact offsets let an evaluation measure the loss on "
            "exactly those tokens."
        ),
        "collection": (
            "Every story is generated by the built-in, deterministic story engine of ltsgen (no language "
            "model and no network): a world per story (characters with traits, pets, favourite objects, "
            "homes; places; objects; a goal), a plot in chapters (setup, journey, problems, help, "
            "resolution, moral) and story features sampled as the TinyStories prompts did (dialogue, plot "
            "twist, foreshadowing, conflict, moral, bad ending). Each story's target length is drawn "
            "log-uniformly between the minimum and the maximum; its split (train/validation/test) is fixed "
            "by a hash of its id. The variety table compares the build with real TinyStories text (the "
            f"first stories of the TinyStories validation split, sha256 `{reference_sha256[:16]}...`), "
            "both measured on their first words of equal number."
        ),
        "uses": (
            "Training small language models on short stories and evaluating them on long ones; measuring "
            "the loss on tokens that depend on distant facts; testing long-context data loaders. Not for "
            "training assistants or any use that needs facts about the real world."
        ),
        "limitations": (
            "The text is generated by rules, not written by people or by a language model: its vocabulary "
            "and plots are narrower than real TinyStories (compare the variety table), and a model may "
            "learn the engine's patterns. The long-range facts are simple (names, colours, places, "
            "promises); they test retrieval over distance, not reasoning. English only. The names are "
            "invented: the stories hold no personal data."
        ),
    }
