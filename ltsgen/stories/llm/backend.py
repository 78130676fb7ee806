"""LongTinyStories through any OpenAI-compatible server: the ``--backend openai`` path of ``ltsgen stories``.

Stories are planned, then written chapter by chapter (``recipe``, ``story``), many at once
(``runner``), through ``openai.AsyncOpenAI`` with retries, rate limits, a response cache and a cost
cap (``client``), and written through the same build driver, shards, manifest and card as the built-in
engine. Every answer is cached by request content, so a killed build resumes without sending any request
twice and a finished build reruns without sending any.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

# the arguments of this backend that determine the output (the build's identity, with the stories ones)
OUTPUT_ARGUMENTS = (
    "model",
    "temperature",
    "top_p",
    "max_tokens",
    "chapter_words",
    "max_continuations",
    "length_tolerance",
    "max_oov_share",
    "max_repeated_share",
    "max_attempts",
    "input_price",
    "output_price",
)
BUDGET_EXIT = 3  # exit status when --max-cost stopped the build


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ltsgen" / "openai"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``--backend openai`` to the ``ltsgen stories`` parser."""
    group = parser.add_argument_group(
        "--backend openai",
        "Write the stories with a language model behind any OpenAI-compatible server (OpenAI, vLLM, "
        "llama.cpp, Ollama): an outline per story, then chapter by chapter. Answers are cached in "
        "--cache-dir, so a rerun resumes without sending a request twice.",
    )
    add = group.add_argument
    add(
        "--base-url",
        default=None,
        help="server URL, e.g. http://127.0.0.1:8080/v1 (OpenAI's API when not given)",
    )
    add("--model", default=None, help="model name as the server knows it (required with --backend openai)")
    add(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable holding the key (local servers need none)",
    )
    add("--concurrency", type=int, default=8, help="stories written at once = requests in flight")
    add(
        "--requests-per-minute",
        type=float,
        default=None,
        help="cap on requests per minute (no cap when not given)",
    )
    add(
        "--tokens-per-minute",
        type=float,
        default=None,
        help="cap on tokens per minute (no cap when not given)",
    )
    add("--request-timeout", type=float, default=300.0, help="seconds per request before a retry")
    add("--max-retries", type=int, default=8, help="retries of one request before the build stops")
    add(
        "--retry-backoff",
        type=float,
        default=1.0,
        help="seconds before the first retry, doubled each time, with jitter; Retry-After wins",
    )
    add("--temperature", type=float, default=0.8, help="sampling temperature")
    add("--top-p", type=float, default=0.95, help="nucleus sampling")
    add("--max-tokens", type=int, default=1024, help="tokens per answer")
    add("--chapter-words", type=int, default=600, help="words per chapter the plan aims at")
    add("--max-continuations", type=int, default=2, help="extra requests for a short chapter")
    add(
        "--length-tolerance",
        type=float,
        default=0.25,
        help="keep stories within this share of their target length",
    )
    add(
        "--max-oov-share",
        type=float,
        default=0.15,
        help="reject stories with more words outside the simple vocabulary",
    )
    add("--max-repeated-share", type=float, default=0.05, help="reject stories with more repeated paragraphs")
    add(
        "--max-attempts",
        type=int,
        default=4,
        help="tries per story: a rejected story is written again (new seed words, facts and request seed)",
    )
    add("--input-price", type=float, default=0.0, help="USD per million prompt tokens")
    add("--output-price", type=float, default=0.0, help="USD per million completion tokens")
    add(
        "--max-cost",
        type=float,
        default=None,
        help=f"stop cleanly (exit status {BUDGET_EXIT}) before this run spends more USD; rerun to go on",
    )
    add("--cache-dir", type=Path, default=default_cache_dir(), help="answer cache, shared by builds")


def check_arguments(args: argparse.Namespace) -> None:
    """One-line errors for options of this backend that cannot make a build."""
    from ltsgen.errors import UsageError

    if not args.model:
        raise UsageError("--backend openai needs --model (the model name the server serves)")
    if args.workers not in (None, 1) or args.engine != "local":
        raise UsageError(
            "--workers and --engine apply to --backend builtin; --backend openai uses --concurrency"
        )
    positive = (
        "concurrency",
        "max_tokens",
        "chapter_words",
        "request_timeout",
        "retry_backoff",
        "max_attempts",
    )
    positive += ("requests_per_minute", "tokens_per_minute")
    for name in positive:
        value = getattr(args, name)
        if value is not None and not value > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be positive, not {value}")
    for name in ("max_retries", "max_continuations", "input_price", "output_price", "length_tolerance"):
        if getattr(args, name) < 0:
            raise UsageError(f"--{name.replace('_', '-')} must be >= 0, not {getattr(args, name)}")
    if args.max_cost is not None and not args.input_price and not args.output_price:
        raise UsageError("--max-cost needs --input-price and/or --output-price (USD per million tokens)")


def build(args: argparse.Namespace) -> int:
    """Build (or resume) a LongTinyStories dataset with a language model; returns the exit status."""
    from ltsgen.errors import UsageError, require

    openai = require("openai", "llm", "stories from --backend openai")
    from ltsgen.build import BuildError, run_build
    from ltsgen.loaders.contract import ContractError
    from ltsgen.stories.build import story_build_spec
    from ltsgen.stories.llm.cache import ResponseCache
    from ltsgen.stories.llm.client import BudgetExhausted, ChatClient, LLMError, RetryPolicy, Sampling
    from ltsgen.stories.llm.filters import Filters
    from ltsgen.stories.llm.ledger import Ledger, Prices
    from ltsgen.stories.llm.recipe import RECIPE_VERSION, story_seed
    from ltsgen.stories.llm.runner import StoryRunner
    from ltsgen.stories.llm.story import Recipe
    from ltsgen.stories.recalls import Distances

    check_arguments(args)
    api_key = os.environ.get(args.api_key_env)
    if not api_key:
        if args.base_url is None:
            raise UsageError(f"${args.api_key_env} is not set (the key for OpenAI; see --api-key-env)")
        api_key = "none"  # servers without keys accept any
    ledger = Ledger(Prices(args.input_price, args.output_price))
    cache = ResponseCache(args.cache_dir)
    sampling = Sampling(args.temperature, args.top_p, args.max_tokens)

    def make_chat(on_answer) -> ChatClient:
        client = openai.AsyncOpenAI(
            base_url=args.base_url, api_key=api_key, max_retries=0, timeout=args.request_timeout
        )
        return ChatClient(
            client,
            args.model,
            sampling,
            cache,
            ledger,
            retry=RetryPolicy(args.max_retries, args.retry_backoff),
            requests_per_minute=args.requests_per_minute,
            tokens_per_minute=args.tokens_per_minute,
            max_cost=args.max_cost,
            on_answer=on_answer,
            key_source=f"${args.api_key_env} (--api-key-env)",
        )

    try:
        spec = story_build_spec(
            args,
            run_job=None,
            statistics=llm_statistics,
            extra=OUTPUT_ARGUMENTS,
            engine_version=f"openai-recipe-{RECIPE_VERSION}",
        )
        runner = StoryRunner(
            make_chat,
            lambda index, attempt: story_seed(
                index,
                args.seed,
                args.min_words,
                args.max_words,
                args.chapter_words,
                attempt,
                Distances.parse(args.recall_distances),
                args.recalls_per_1k_words,
            ),
            Recipe(args.chapter_words, args.max_continuations),
            Filters(args.length_tolerance, args.max_oov_share, args.max_repeated_share),
            spec.jobs,
            args.concurrency,
            args.max_attempts,
            progress=not args.no_progress,
        )
        spec.run_job = runner.write_shard
        with runner:
            result = run_build(
                spec, workers=1, overwrite=args.overwrite, progress=False, card=not args.no_card
            )
    except (BuildError, ContractError, LLMError, OSError) as error:  # OSError: e.g. an unwritable --cache-dir
        raise UsageError(str(error)) from None
    except BudgetExhausted:
        print(ledger.summary())
        print(
            f"{args.out}: stopped before spending more than --max-cost ${args.max_cost:g}; finished shards "
            f"and every answer are kept (answers in {cache.directory}): rerun to go on"
        )
        return BUDGET_EXIT
    print(result.summary(args.out, "stories"))
    print(filters_summary(result.manifest.extra["llm"]["filters"], args.num_stories, args.max_attempts))
    print(ledger.summary())
    dataset = result.manifest.extra["llm"]["ledger"]
    print(
        f"dataset: {dataset['requests']:,} answers, {dataset['prompt_tokens']:,} prompt + "
        f"{dataset['completion_tokens']:,} completion tokens, ${dataset['cost_usd']:.4f}"
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


def llm_statistics(arguments: dict[str, Any], results: list) -> dict[str, Any]:
    """``manifest.extra`` of an LLM build: the ledger, the filter counts and the card's tables."""
    from ltsgen.stories.build import merge_stats
    from ltsgen.stories.llm.filters import REJECTIONS
    from ltsgen.stories.llm.ledger import Prices, Usage, dataset_ledger
    from ltsgen.stories.statistics import fact_tables, variety_table

    total = merge_stats([result.stats for result in results])
    usage = Usage(total["requests"], total["prompt_tokens"], total["completion_tokens"])
    ledger = dataset_ledger(usage, Prices(arguments["input_price"], arguments["output_price"]))
    stories = total["stories"]
    rejected = {reason: total["rejected"].get(reason, 0) for reason in REJECTIONS}
    sampling = {key: arguments[key] for key in ("temperature", "top_p", "max_tokens")}
    llm = {
        "model": arguments["model"],
        "sampling": sampling,
        "ledger": ledger,
        "filters": {
            "kept": stories,
            "attempts": total["attempts"],
            "gave_up": total["gave_up"],
            "rejected": rejected,
        },
        "finish_reasons": total["finish_reasons"],
    }
    statistics: dict[str, Any] = {
        "Language model and token ledger": {
            "model": arguments["model"],
            **sampling,
            "answers": ledger["requests"],
            "prompt tokens": ledger["prompt_tokens"],
            "completion tokens": ledger["completion_tokens"],
            "USD per million prompt / completion tokens": f"{arguments['input_price']:g} / "
            f"{arguments['output_price']:g}",
            "cost (USD)": ledger["cost_usd"],
            **{f"answers ending with {reason!r}": n for reason, n in sorted(total["finish_reasons"].items())},
        },
        "Filters": {
            "stories asked for": arguments["num_stories"],
            "kept": stories,
            "attempts written": total["attempts"],
            f"stories rejected at all {arguments['max_attempts']} attempts": total["gave_up"],
            f"rejected: length outside ±{arguments['length_tolerance']:g} of the target": rejected["length"],
            f"rejected: over {arguments['max_oov_share']:g} of words outside the simple vocabulary": rejected[
                "vocabulary"
            ],
            f"rejected: over {arguments['max_repeated_share']:g} of paragraphs repeated": rejected[
                "repetition"
            ],
            "rejected: a planted fact not written where the outline put it": rejected["recall"],
            "rejected: a plant or recall without its cue (the fact's key) before the value": rejected["cue"],
            "rejected: refusals": rejected["refusal"],
            "rejected: empty answers": rejected["empty"],
        },
        **fact_tables(total),
        # the text is not at hand here (a resumed build does not rewrite its finished shards): cross-story
        # reuse and repetition from the shards' statistics, no distinct-n
        "Variety: this build and real TinyStories at equal size": variety_table(None, total, "this build"),
    }
    if stories:
        statistics["Length control"] = {
            "stories": stories,
            "words": total["words"],
            "mean words per story": round(total["words"] / stories, 1),
            "stories within 10% of their target": total["within_10pct"],
            "largest relative distance to the target": total["max_length_error"],
            "mean chapters per story": round(total["chapters"] / stories, 2),
            "continuations of short chapters": total["continuations"],
            "words cut from chapters past their budget": total["cut_words"],
            "mean share of words outside the simple vocabulary": round(total["oov_share_sum"] / stories, 4),
        }
        statistics["Story features"] = {
            feature: {"stories": count, "share": round(count / stories, 3)}
            for feature, count in sorted(total["features"].items())
        }
    return {"llm": llm, "statistics": statistics, "card": llm_card(arguments)}


def llm_card(arguments: dict[str, Any]) -> dict[str, Any]:
    """What the data card says about a build written by a language model."""
    from ltsgen.stories.build import command_line

    model = arguments["model"]
    return {
        "pretty_name": "LongTinyStories",
        "license": "apache-2.0",
        "language": ["en"],
        "task_categories": ["text-generation"],
        "tags": ["long-context", "tinystories", "synthetic", "length-extrapolation", "llm-generated"],
        "annotations_creators": "machine-generated",
        "language_creators": "machine-generated",
        "source_datasets": ["original"],
        "command": command_line(arguments),
        "summary": (
            f"Long stories in the simple English of TinyStories, written by the language model `{model}` "
            f"chapter by chapter, from {arguments['min_words']:,} to {arguments['max_words']:,} words. Each "
            "record's `meta` keeps the story's seed words and features, its outline and character sheet, "
            "the rolling summaries the model wrote between chapters, and its token usage."
        ),
        "motivation": (
            "Models trained on short contexts are evaluated on long ones to measure length extrapolation. "
            "Following the APE paper's LongTinyStories, a language model is asked, with the TinyStories "
            "recipe, for very long stories of several chapters, so that a small model can learn the "
            "language and long documents still carry long-range structure (characters, plot, callbacks)."
        ),
        "collection": (
            "Each story is seeded as TinyStories prompts were: a random noun, verb and adjective from a "
            "young child's vocabulary and one to three features (dialogue, plot twist, foreshadowing, "
            "conflict, moral, bad ending), plus a target length (log-uniform between the minimum and the "
            "maximum) and a chapter count. The model first writes a character sheet and a one-sentence "
            "plan per chapter (with a word budget), then each chapter from the sheet, the plan, a rolling "
            "summary of the earlier chapters and the end of the previous chapter; a chapter that ends "
            "short is continued, one that runs past its budget is cut at the sentence end nearest it, and "
            "writing stops at the target length. The prompt never grows with the "
            "story. Planted facts (an invented name, a number, an object word) are fixed by the seed with the "
            "chapter where each is planted and the chapters where it is recalled, at distances drawn from "
            f"`{arguments['recall_distances']}` at chapter granularity, each with a key no other value of the "
            "story has (the beetle, the old gate); the outline and each chapter prompt ask for them, the key "
            "written before the value, and `meta.facts` records where each value occurs and the span of the "
            "key (the cue) before each use. Stories are then filtered (length, vocabulary, repeated "
            "paragraphs, planted facts missing from their chapters or written without their cue, refusals "
            "and empty answers); a rejected story is written again as a new attempt (new seed words, facts "
            f"and request seed), up to {arguments['max_attempts']} attempts, and the Filters table counts "
            "the rejections by cause. Sampling parameters and the token ledger are in the tables below and "
            "in `manifest.json`."
        ),
        "uses": (
            "Training small language models on short stories and evaluating them on long ones; testing "
            "long-context data loaders. Not for training assistants or any use that needs facts about the "
            "real world."
        ),
        "limitations": (
            f"The text is written by `{model}` and carries its errors, repetitions and biases; small "
            "models drift from the plan over long stories. The vocabulary filter counts words outside a "
            "fixed list of about 1,800 word forms, so it measures simplicity only roughly. English only; "
            "the characters are invented."
        ),
    }
