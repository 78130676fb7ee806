"""What every LongTinyStories build shares: its ``StoryConfig``, identifying arguments, shard plan and
``BuildSpec``.

The built-in engine (``ltsgen.stories.engine.build.build_stories``) and the OpenAI backend
(``ltsgen.stories.llm.backend.build_llm_stories``) both plan with ``story_jobs``, build through
``story_build_spec`` and add up their shards' statistics with ``merge_stats``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ltsgen import __version__
from ltsgen.loaders.contract import shard_relpath
from ltsgen.loaders.storage import Storage
from ltsgen.stories.plan import MAX_WORDS, MIN_TARGET_WORDS
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND

BYTES_PER_WORD = 5.6  # planning estimate of story text bytes per word (for --shard-size-mb)
DEFAULT_SHARD_MB = 32.0
DEFAULT_SPLITS = "train=0.98,validation=0.01,test=0.01"
# the plan holds every story's index before the first is written (about 10 s and 50 MB per million stories)
MAX_STORIES = 10_000_000
BUILDER_NAME = "ltsgen stories"
# the arguments that determine a built-in build's output (its identity; never --out or --workers)
OUTPUT_ARGUMENTS = ("num_stories", "min_words", "max_words", "seed", "format", "splits")
OUTPUT_ARGUMENTS += (
    "samples_per_shard",
    "shard_size_mb",
    "backend",
    "recall_distances",
    "recalls_per_1k_words",
)


@dataclass(frozen=True)
class StoryConfig:
    """What a LongTinyStories build writes and where (never the worker count); the story writer (the
    built-in engine or a language model) is the builder that takes it."""

    out: Path | str | Storage  # a local path, a URL, or a Storage with its options
    num_stories: int
    min_words: int = MIN_TARGET_WORDS
    max_words: int = MAX_WORDS
    seed: int = 0
    format: str = "parquet"
    splits: str = DEFAULT_SPLITS
    samples_per_shard: int | None = None  # shards cut by count; else by estimated size
    shard_size_mb: float | None = DEFAULT_SHARD_MB
    recall_distances: str = str(DEFAULT_DISTANCES)
    recalls_per_1k_words: float = DEFAULT_RECALLS_PER_THOUSAND


def builder_arguments(
    config: StoryConfig, backend: str, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The arguments that determine the output (the build's identity in the manifest): ``config``'s, the
    ``backend`` that writes the stories, and that backend's own in ``extra``."""
    values = {key: getattr(config, key) for key in OUTPUT_ARGUMENTS if key != "backend"}
    arguments = {key: backend if key == "backend" else values[key] for key in OUTPUT_ARGUMENTS}
    arguments |= extra or {}
    if arguments.get("samples_per_shard") is not None:
        arguments["shard_size_mb"] = None  # shards are cut by count; the size (or its default) plays no part
    elif arguments.get("shard_size_mb") is None:
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


def story_jobs(arguments: dict[str, Any]) -> list:
    """The shard jobs of a build with ``arguments`` (``builder_arguments``): shards planned by
    ``plan_story_shards``, each job's payload {"split", "shard", "indices", "arguments"}."""
    from ltsgen.build import Job

    return [
        Job(
            key=relpath,
            payload={"split": split, "shard": number, "indices": indices, "arguments": arguments},
            weight=len(indices),
            shards=(relpath,),
        )
        for split, number, indices in plan_story_shards(arguments)
        for relpath in [shard_relpath(split, number, arguments["format"])]
    ]


def story_build_spec(
    config: StoryConfig,
    arguments: dict[str, Any],
    jobs: list,
    run_job,
    statistics,
    engine_version: str | None = None,
):
    """The ``BuildSpec`` of a story build of ``jobs`` (``story_jobs(arguments)``): ``run_job(job, output)
    -> stats`` writes one shard and ``statistics(arguments, results) -> manifest.extra`` runs at the end
    (each backend passes its own). ``engine_version`` (the built-in engine's) joins the build's identity,
    so that a build is never resumed or kept with stories of another engine version."""
    from ltsgen.build import BuildSpec, parse_splits

    return BuildSpec(
        directory=config.out,
        builder={
            "name": BUILDER_NAME,
            "version": __version__,
            **({"engine_version": engine_version} if engine_version else {}),
            "arguments": arguments,
        },
        source="lts",
        fmt=config.format,
        splits=list(parse_splits(config.splits)),
        jobs=jobs,
        run_job=run_job,
        finalize=partial(statistics, arguments),
        unit="stories",
    )


def merge_stats(shard_stats: list[dict[str, Any]]) -> dict[str, Any]:
    """Add up per-shard statistics: counts add, ``max_*``/``*_max`` take the maximum, dicts merge by key,
    lists concatenate (in shard order)."""
    total: dict[str, Any] = {}
    for stats in shard_stats:
        for key, value in stats.items():
            if isinstance(value, list):
                total.setdefault(key, []).extend(value)
            elif isinstance(value, dict):
                merged = total.setdefault(key, {})
                for name, count in value.items():
                    merged[name] = merged.get(name, 0) + count
            elif key.endswith("_max") or key.startswith("max_"):
                total[key] = max(total.get(key, 0), value)
            else:
                total[key] = total.get(key, 0) + value
    return total
