"""The built-in engine's build: ``build_stories``, one shard job (generate, write, count), the statistics
and the card text."""

from __future__ import annotations

from typing import Any

from ltsgen.stories.build import (
    StoryConfig,
    builder_arguments,
    command_line,
    merge_stats,
    story_build_spec,
    story_jobs,
)


def build_stories(
    config: StoryConfig,
    *,
    engine=None,
    workers: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    card: bool = True,
):
    """Build (or resume, or confirm) a LongTinyStories dataset written by the built-in engine.

    Args:
        config: what to build.
        engine, workers, overwrite, progress, card: as for ``ltsgen.build.run_build``.

    Returns:
        the ``ltsgen.build.BuildResult``.
    """
    from ltsgen.build import run_build
    from ltsgen.stories.engine.story import ENGINE_VERSION

    arguments = builder_arguments(config, "builtin")
    jobs = story_jobs(arguments)
    spec = story_build_spec(config, arguments, jobs, write_story_shard, story_statistics, ENGINE_VERSION)
    result = run_build(
        spec, engine=engine, workers=workers, overwrite=overwrite, progress=progress, card=card
    )
    short = result.manifest.extra.get("statistics", {}).get("Recalls not written")
    if short:
        stories, dropped, why = short["rows"][0]
        result.notes.append(
            f"{dropped:,} recalls in {stories:,} stories were not written, fewer than --recalls-per-1k-words "
            f"asks: {why} (shorter --recall-distances fill the rate)"
        )
    return result


def write_story_shard(job, output) -> dict[str, Any]:
    """Generate the stories of one shard and write them; return the shard's statistics (mergeable sums)."""
    from ltsgen.stories.engine.story import write_story
    from ltsgen.stories.plan import target_words
    from ltsgen.stories.statistics import add_story, variety_sample_stories

    arguments = job.payload["arguments"]
    seed, low, high = arguments["seed"], arguments["min_words"], arguments["max_words"]
    distances, per_thousand = recall_arguments(arguments)
    sample_stories = variety_sample_stories(seed, low, high)
    stats: dict[str, Any] = {
        "stories": 0,
        "words": 0,
        "within_5pct": 0,
        "max_length_error": 0.0,
        "features": {},
    }
    with output.open(job.key) as writer:
        for index in job.payload["indices"]:
            target = target_words(index, seed, low, high)
            record, sentences, dropped = write_story(index, seed, target, distances, per_thousand)
            writer.write(record)
            if dropped:  # counted only where it happens: a build that drops none keeps its statistics
                stats["recalls_dropped"] = stats.get("recalls_dropped", 0) + dropped
                stats["stories_short_of_recalls"] = stats.get("stories_short_of_recalls", 0) + 1
            error = abs(record["num_words"] - target) / target
            stats["stories"] += 1
            stats["words"] += record["num_words"]
            stats["within_5pct"] += error <= 0.05
            stats["max_length_error"] = max(stats["max_length_error"], error)
            for feature in record["meta"]["features"]:
                stats["features"][feature] = stats["features"].get(feature, 0) + 1
            add_story(stats, record, index, sentences)
            if index < sample_stories:  # the text of the build's first stories, for the variety table
                stats.setdefault("variety_sample", []).append([index, record["text"]])
    return stats


def recall_arguments(arguments: dict[str, Any]):
    """(``Distances``, recalls per 1,000 words) of a build's arguments."""
    from ltsgen.stories.recalls import Distances

    return Distances.parse(arguments["recall_distances"]), arguments["recalls_per_1k_words"]


def story_statistics(arguments: dict[str, Any], results) -> dict[str, Any]:
    """``manifest.extra`` of a story build: the card's text and statistics tables, from the shards' stats
    (the variety table's n-grams from the text of the first stories, which the shards kept)."""
    from ltsgen.stories.statistics import fact_tables, variety_table
    from ltsgen.tinystories_reference import REFERENCE_SHA256

    total = merge_stats([result.stats for result in results])
    texts = [text for _, text in sorted(total.pop("variety_sample", []))]
    stories = total["stories"]
    statistics = {
        "Variety: this build and real TinyStories at equal size": variety_table(
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
        **fact_tables(total),
    }
    if total.get("recalls_dropped"):
        statistics["Recalls not written"] = {
            "columns": ["stories", "recalls scheduled but not written", "why"],
            "rows": [[total["stories_short_of_recalls"], total["recalls_dropped"], short_of_keys()]],
        }
    if total["features"]:
        statistics["Story features"] = {
            "columns": ["feature", "stories", "share"],
            "rows": [[f, n, round(n / stories, 3)] for f, n in sorted(total["features"].items())],
        }
    return {"statistics": statistics, "card": story_card(arguments, REFERENCE_SHA256)}


def short_of_keys() -> str:
    """Why a story's recalls can fall short of ``--recalls-per-1k-words`` (said by the card and the build)."""
    from ltsgen.stories.engine.plot import PLANTED_KEYS

    return (
        f"a story holds one planted fact per key, {PLANTED_KEYS} at most; distances long against the story's "
        "span start a new fact for nearly every recall, and the facts beyond the keys are not written"
    )


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
            "a thing was hidden, a promise) are used correctly chapters later, and planted facts (a value "
            "that occurs nowhere else in the story: an invented name, a number, an object) are recalled at "
            f"distances drawn from `{arguments['recall_distances']}` words. Each planted value has a key no "
            "other value of its story shares (the beetle, the old gate, the tree house), stated before the "
            "value when it is planted and named by a cue before the value in every recall. Each story's "
            "`meta` records every fact with the character offsets of its first mention and later uses, the "
            "character span of each use's cue, and each use's distance in words and characters to the "
            "value's previous occurrence."
        ),
        "motivation": (
            "Models trained on short contexts are evaluated on long ones to measure length extrapolation "
            "(position encodings such as RoPE, ALiBi, Kerple, FIRE or APE). Real long documents mix many "
            "skills; these stories keep the language as simple as TinyStories, so a small model can learn "
            "it, and make length matter through long-range facts whose tokens can only be predicted from "
            "text thousands of words back. The planted facts put such tokens at controlled distances, from "
            "inside a short training window to the whole story (the histogram of recall distances per story "
            "length is below), each asked for by a cue that only the right value answers (the table of cued "
            "recalls shows how many a lexical oracle that reads only the text answers, on the stories whose "
            "index is divisible by four); the recorded offsets "
            "let an evaluation score exactly those tokens."
        ),
        "collection": (
            "Every story is generated by the built-in, deterministic story engine of ltsgen (no language "
            "model and no network): a world per story (characters with traits, pets, favourite objects, "
            "homes; places; objects; a goal), a plot in chapters (setup, journey, problems, help, "
            "resolution, moral) and story features sampled as the TinyStories prompts did (dialogue, plot "
            "twist, foreshadowing, conflict, moral, bad ending). Each story's target length is drawn "
            "log-uniformly between the minimum and the maximum; its split (train/validation/test) is fixed "
            "by a hash of its id. Planted facts are scheduled per story: recall distances drawn "
            "stratified from the distribution, packed into one chain per fact and placed where they fit, "
            f"{arguments['recalls_per_1k_words']:g} recalls per 1,000 words. The variety table compares the "
            "build with real TinyStories text (the first stories of the TinyStories validation split, "
            f"sha256 `{reference_sha256[:16]}...`) at equal size: distinct-n and the share of the 1,000 most "
            "frequent 4-grams on the first words of both, cross-story reuse of 6+ word sentences on the "
            "first stories of both (the build's estimated on the quarter of its sentences chosen by a hash)."
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
