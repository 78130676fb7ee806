"""The built-in engine's build: one shard job (generate, write, count), the statistics and the card text."""

from __future__ import annotations

from typing import Any

from ltsgen.stories.build import command_line, merge_stats


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
