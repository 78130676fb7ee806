"""``ltsgen stories``: build LongTinyStories, long TinyStories-style stories, into a dataset directory."""

from __future__ import annotations

import argparse
from typing import Any

from ltsgen.commands import (
    add_command,
    add_engine_arguments,
    add_storage_argument,
    engine_from,
    number,
    storage_options,
)
from ltsgen.commands.llm_options import BUDGET_EXIT, add_llm_arguments, check_llm_arguments, llm_config
from ltsgen.errors import UsageError
from ltsgen.loaders.contract import FORMATS
from ltsgen.loaders.storage import Storage
from ltsgen.stories.build import DEFAULT_SHARD_MB, DEFAULT_SPLITS, MAX_STORIES, StoryConfig
from ltsgen.stories.plan import MAX_WORDS, MIN_TARGET_WORDS
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND, Distances

SUMMARY = "build LongTinyStories (long, simple-English stories with long-range facts)"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers,
        "stories",
        summary=SUMMARY,
        description="Build a LongTinyStories dataset directory: TinyStories-style stories of a child's vocabulary, "
        "from --min-words to --max-words words (log-uniform), whose facts set early are used chapters "
        "later. Deterministic: the same arguments give byte-identical shards for any --workers. "
        "Resumable: rerun the same command after an interruption to finish the build.",
        examples=[
            "ltsgen stories --out lts --num-stories 1000",
            "ltsgen stories --out lts --num-stories 100 --min-words 2000 --max-words 32000 --workers 2",
            "ltsgen stories --out s3://bucket/lts --num-stories 100000 --engine ray --ray-address auto",
            "ltsgen stories --out lts-llm --num-stories 10 --backend openai --base-url http://127.0.0.1:8080/v1 --model smollm2",
        ],
    )
    parser.add_argument(
        "--out",
        required=True,
        help="dataset directory to create or resume: a local path, or s3://, gs:// or file:// URL",
    )
    parser.add_argument("--num-stories", required=True, type=int, help="number of stories")
    parser.add_argument(
        "--min-words",
        type=int,
        default=MIN_TARGET_WORDS,
        help=f"shortest story target (the built-in engine needs {MIN_TARGET_WORDS} or more)",
    )
    parser.add_argument("--max-words", type=int, default=MAX_WORDS, help="longest story target")
    parser.add_argument(
        "--seed", type=number(int, {"at_least": 0}), default=0, help="seed of the whole build"
    )
    parser.add_argument("--format", choices=list(FORMATS), default="parquet", help="shard format")
    add_engine_arguments(parser, "shards written")
    parser.add_argument("--splits", default=DEFAULT_SPLITS, help="split fractions, assigned by story id hash")
    parser.add_argument(
        "--recall-distances",
        default=str(DEFAULT_DISTANCES),
        metavar="KIND:LOW:HIGH",
        help="distances in words at which planted facts are recalled: KIND log-uniform, uniform or mixed (a "
        "quarter log-uniform from LOW to 40 words, the rest from 100 words to HIGH), HIGH a number or 'length' "
        "(the story's length); the distances drawn, which a few recalls miss (docs/story-engine.md): each "
        "records its real one",
    )
    parser.add_argument(
        "--recalls-per-1k-words",
        type=float,
        default=DEFAULT_RECALLS_PER_THOUSAND,
        help="recalls of planted facts per 1,000 words of the story's span, after its opening and before its last "
        "40 words (stories under about 250 words have none; 0: none at all)",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--samples-per-shard", type=int, default=None, help="stories per shard")
    size.add_argument(
        "--shard-size-mb",
        type=float,
        default=DEFAULT_SHARD_MB,
        help="about this many MB of story text per shard, before compression (unless --samples-per-shard)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace a build with other arguments in --out"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (the summary stays)")
    parser.add_argument("--quiet", dest="no_progress", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--no-card", action="store_true", help="skip the data card (`ltsgen card DIR` writes it later)"
    )
    parser.add_argument("--backend", choices=["builtin", "openai"], default="builtin", help="story engine")
    add_storage_argument(parser)
    add_llm_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    config = StoryConfig(
        out=Storage(args.out, storage_options(args)),
        num_stories=args.num_stories,
        min_words=args.min_words,
        max_words=args.max_words,
        seed=args.seed,
        format=args.format,
        splits=args.splits,
        samples_per_shard=args.samples_per_shard,
        shard_size_mb=args.shard_size_mb,
        recall_distances=args.recall_distances,
        recalls_per_1k_words=args.recalls_per_1k_words,
    )
    if args.backend == "openai":
        return run_llm(args, config)
    from ltsgen.stories.engine.build import build_stories

    with engine_from(args) as engine:
        result = build_stories(
            config,
            engine=engine,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            card=not args.no_card,
        )
    print(result.summary(config.out, "stories"))
    return 0


def run_llm(args: argparse.Namespace, config: StoryConfig) -> int:
    """``--backend openai``: build, then say what was kept, filtered and spent; exit status ``BUDGET_EXIT``
    when ``--max-cost`` stopped the build."""
    from ltsgen.build import BuildError
    from ltsgen.stories.llm.backend import build_llm_stories
    from ltsgen.stories.llm.client import BudgetExhausted

    check_llm_arguments(args)
    llm = llm_config(args)
    ledger = llm.new_ledger()
    try:
        result = build_llm_stories(
            config,
            llm,
            ledger,
            overwrite=args.overwrite,
            progress=not args.no_progress,
            card=not args.no_card,
        )
    except BudgetExhausted:
        print(ledger.summary())
        print(
            f"{config.out}: stopped before spending more than --max-cost ${llm.max_cost:g}; finished shards "
            f"and every answer are kept (answers in {llm.cache_dir}): rerun to go on"
        )
        return BUDGET_EXIT
    print(result.summary(config.out, "stories"))
    print(filters_summary(result.manifest.extra["llm"]["filters"], config.num_stories, llm.max_attempts))
    print(ledger.summary())
    dataset = result.manifest.extra["llm"]["ledger"]
    print(
        f"dataset: {dataset['requests']:,} answers, {dataset['prompt_tokens']:,} prompt + "
        f"{dataset['completion_tokens']:,} completion tokens, ${dataset['cost_usd']:.4f}"
    )
    if not result.manifest.extra["llm"]["filters"]["kept"]:  # a build of nothing: no script should go on
        raise BuildError(
            f"{config.out}: no story was kept, every one rejected at all {llm.max_attempts} attempts (the causes "
            "are above: a base model rather than an instruction model, a server that cuts answers short, or "
            "filters too strict for this model)"
        )
    return 0


def filters_summary(filters: dict[str, Any], asked: int, max_attempts: int) -> str:
    """One line: stories kept of those asked for, attempts, rejections by cause, stories given up."""
    causes = ", ".join(f"{n} {reason}" for reason, n in filters["rejected"].items() if n) or "none"
    line = f"filters: {filters['kept']:,} of {asked:,} stories kept after {filters['attempts']:,} attempts; "
    line += f"rejected attempts: {causes}"
    if filters["gave_up"]:
        line += f"; {filters['gave_up']:,} stories rejected at all {max_attempts} attempts (--max-attempts)"
    return line


SETUP_AND_ENDING_WORDS = 1_000  # more than the built-in engine's setup, ending and recall margin take


def _room_for_recalls(args: argparse.Namespace, distances) -> bool:
    """Whether recalls at ``distances`` fit in the built-in engine's longest stories: checked by writing three
    stories of ``--max-words`` when LOW comes within ``SETUP_AND_ENDING_WORDS`` of it."""
    if distances.bounds(args.max_words - SETUP_AND_ENDING_WORDS) is not None:
        return True
    from ltsgen.stories.engine.story import generate_story

    stories = (
        generate_story(i, args.seed, args.max_words, distances, args.recalls_per_1k_words) for i in range(3)
    )
    return any(story["meta"]["recalls"]["bounds"] for story in stories)


def check_arguments(args: argparse.Namespace) -> None:
    """One-line errors for arguments that cannot make a build (shared with ``--backend openai``)."""
    from ltsgen.build import parse_splits

    if args.num_stories < 1:
        raise UsageError(f"--num-stories must be at least 1, not {args.num_stories}")
    if args.num_stories > MAX_STORIES:
        raise UsageError(
            f"--num-stories {args.num_stories:,} is more than one build plans: at most {MAX_STORIES:,} (the plan "
            "holds every story in memory before the first is written)"
        )
    if args.min_words < 1:
        raise UsageError(f"--min-words must be at least 1, not {args.min_words}")
    if args.backend == "builtin" and args.min_words < MIN_TARGET_WORDS:
        raise UsageError(
            f"--min-words {args.min_words:,} is below the {MIN_TARGET_WORDS} words the built-in engine "
            f"writes at the least (its setup and ending); use --min-words {MIN_TARGET_WORDS} or more"
        )
    if args.max_words > MAX_WORDS:
        raise UsageError(
            f"--max-words {args.max_words:,} is above the limit of {MAX_WORDS:,} words per story"
        )
    if args.min_words > args.max_words:
        raise UsageError(f"--min-words {args.min_words:,} is above --max-words {args.max_words:,}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1, not {args.workers}")
    if args.samples_per_shard is not None and args.samples_per_shard < 1:
        raise UsageError(f"--samples-per-shard must be at least 1, not {args.samples_per_shard}")
    if args.shard_size_mb is not None and not args.shard_size_mb > 0:
        raise UsageError(f"--shard-size-mb must be positive, not {args.shard_size_mb}")
    if not 0 <= args.recalls_per_1k_words <= 50:
        raise UsageError(f"--recalls-per-1k-words must be in [0, 50], not {args.recalls_per_1k_words:g}")
    try:
        distances = Distances.parse(args.recall_distances)
    except ValueError as error:
        raise UsageError(f"--recall-distances: {error}") from None
    if args.recalls_per_1k_words and distances.bounds(args.max_words) is None:
        raise UsageError(
            f"--recall-distances {distances}: no recall fits in a story of --max-words {args.max_words:,} "
            f"(LOW is {distances.low:,} words)"
        )
    if args.backend == "builtin" and args.recalls_per_1k_words and not _room_for_recalls(args, distances):
        raise UsageError(
            f"--recall-distances {distances}: no recall fits in a story of --max-words {args.max_words:,}: "
            f"its setup and ending leave less than LOW ({distances.low:,} words) between a plant and the end"
        )
    parse_splits(args.splits)  # a BuildError naming --splits
