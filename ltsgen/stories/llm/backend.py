"""LongTinyStories through any OpenAI-compatible server: ``build_llm_stories``, the ``--backend openai`` path
of ``ltsgen stories``.

Stories are planned, then written chapter by chapter (``recipe``, ``story``), many at once
(``runner``), through ``openai.AsyncOpenAI`` with retries, rate limits, a response cache and a cost
cap (``client``), and written through the same build driver, shards, manifest and card as the built-in
engine. Every answer is cached by request content, so a killed build resumes without sending any request
twice and a finished build reruns without sending any.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from ltsgen.errors import UsageError, out_of_limits
from ltsgen.stories.build import (
    StoryConfig,
    builder_arguments,
    command_line,
    merge_stats,
    story_build_spec,
    story_jobs,
)
from ltsgen.stories.llm.ledger import Ledger, Prices, Usage, dataset_ledger

# the settings of this backend that determine the output (the build's identity, with the stories ones)
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


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ltsgen" / "openai"


@dataclass(frozen=True)
class LLMConfig:
    """How a language model behind an OpenAI-compatible server writes the stories: the server and its
    limits, the sampling, the chapter recipe, the filters, the prices and the budget."""

    model: str
    base_url: str | None = None  # OpenAI's API when None
    api_key: str = field(default="none", repr=False)  # servers without keys accept any
    key_source: str = "$OPENAI_API_KEY"  # where the key came from, for the error of a refused key
    concurrency: int = 8  # stories written at once = requests in flight
    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    request_timeout: float = 300.0  # seconds per request before a retry
    max_retries: int = 8
    retry_backoff: float = 1.0  # seconds before the first retry, doubled each time
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 1024  # tokens per answer
    chapter_words: int = 600
    max_continuations: int = 2  # extra requests for a short chapter
    length_tolerance: float = 0.25
    max_oov_share: float = 0.15
    max_repeated_share: float = 0.05
    max_attempts: int = 4  # tries per story
    input_price: float = 0.0  # USD per million prompt tokens
    output_price: float = 0.0  # USD per million completion tokens
    max_cost: float | None = None  # USD this run may spend before BudgetExhausted stops it
    cache_dir: Path = field(default_factory=default_cache_dir)  # answer cache, shared by builds

    #: the range of each number (``ltsgen.errors.out_of_limits``), checked by ``check`` and by the CLI's parser
    LIMITS: ClassVar[dict[str, dict[str, float]]] = {
        "concurrency": {"at_least": 1}, "requests_per_minute": {"above": 0}, "tokens_per_minute": {"above": 0},
        "request_timeout": {"above": 0}, "max_retries": {"at_least": 0}, "retry_backoff": {"above": 0},
        "temperature": {"at_least": 0}, "top_p": {"at_least": 0, "at_most": 1}, "max_tokens": {"at_least": 1},
        "chapter_words": {"at_least": 1}, "max_continuations": {"at_least": 0}, "length_tolerance": {"at_least": 0},
        "max_oov_share": {"at_least": 0, "at_most": 1}, "max_repeated_share": {"at_least": 0, "at_most": 1},
        "max_attempts": {"at_least": 1}, "input_price": {"at_least": 0}, "output_price": {"at_least": 0},
        "max_cost": {"at_least": 0},  # 0: spend nothing, answer from the cache alone
    }  # fmt: skip

    def check(self) -> None:
        """Refuse a number out of its range (``LIMITS``) in one line naming its option."""
        for name, limits in self.LIMITS.items():
            value = getattr(self, name)
            problem = None if value is None else out_of_limits(value, limits)
            if problem:
                raise UsageError(f"--{name.replace('_', '-')} {problem} (got {value})")

    def arguments(self) -> dict[str, Any]:
        """The settings that determine the output."""
        return {key: getattr(self, key) for key in OUTPUT_ARGUMENTS}

    def new_ledger(self) -> Ledger:
        """An empty ``Ledger`` at this configuration's prices."""
        return Ledger(Prices(self.input_price, self.output_price))


def build_llm_stories(
    config: StoryConfig,
    llm: LLMConfig,
    ledger: Ledger | None = None,
    *,
    overwrite: bool = False,
    progress: bool = True,
    card: bool = True,
):
    """Build (or resume, or confirm) a LongTinyStories dataset written by a language model.

    Args:
        config: what to build.
        llm: the model, its server and how it writes.
        ledger: counts this run's answers, tokens and cost (``llm.new_ledger()`` when None); the caller
            reads it after the build, or after ``BudgetExhausted``.
        overwrite, progress, card: as for ``ltsgen.build.run_build``.

    Returns:
        the ``ltsgen.build.BuildResult``.

    Raises:
        BudgetExhausted: the next request would spend more than ``llm.max_cost``; finished shards and every
            answer are kept, and a rerun goes on.
        BuildError, LoaderError: one-line failures (an unwritable cache folder is a BuildError).
        UsageError: a number of ``llm`` out of its range (``LLMConfig.LIMITS``).
    """
    from ltsgen.build import BuildError, run_build
    from ltsgen.errors import require
    from ltsgen.stories.llm.recipe import RECIPE_VERSION

    openai = require("openai", "llm", "stories from --backend openai")
    ledger = llm.new_ledger() if ledger is None else ledger
    llm.check()
    arguments = builder_arguments(config, "openai", llm.arguments())
    jobs = story_jobs(arguments)
    try:
        with _story_runner(openai, config, llm, ledger, jobs, progress) as runner:
            spec = story_build_spec(
                config,
                arguments,
                jobs,
                runner.write_shard,
                llm_statistics,
                engine_version=f"openai-recipe-{RECIPE_VERSION}",
            )
            return run_build(spec, workers=1, overwrite=overwrite, progress=False, card=card)
    except OSError as error:  # e.g. an unwritable cache folder
        raise BuildError(str(error)) from None


def _story_runner(openai, config: StoryConfig, llm: LLMConfig, ledger: Ledger, jobs: list, progress: bool):
    """The ``StoryRunner`` that writes ``jobs``' stories through ``llm``, counting in ``ledger``."""
    from ltsgen.stories.llm.cache import ResponseCache
    from ltsgen.stories.llm.client import CONNECT_TIMEOUT, ChatClient, RetryPolicy, Sampling
    from ltsgen.stories.llm.filters import Filters
    from ltsgen.stories.llm.recipe import story_seed
    from ltsgen.stories.llm.runner import StoryRunner
    from ltsgen.stories.llm.story import Recipe
    from ltsgen.stories.recalls import Distances

    cache = ResponseCache(llm.cache_dir)
    sampling = Sampling(llm.temperature, llm.top_p, llm.max_tokens)
    distances = Distances.parse(config.recall_distances)

    def make_chat(on_answer, on_retry) -> ChatClient:
        timeout = openai.Timeout(llm.request_timeout, connect=min(CONNECT_TIMEOUT, llm.request_timeout))
        client = openai.AsyncOpenAI(
            base_url=llm.base_url, api_key=llm.api_key, max_retries=0, timeout=timeout
        )
        return ChatClient(
            client,
            llm.model,
            sampling,
            cache,
            ledger,
            retry=RetryPolicy(llm.max_retries, llm.retry_backoff),
            requests_per_minute=llm.requests_per_minute,
            tokens_per_minute=llm.tokens_per_minute,
            max_cost=llm.max_cost,
            on_answer=on_answer,
            on_retry=on_retry,
            key_source=llm.key_source,
        )

    def seed_of(index: int, attempt: int):
        return story_seed(
            index,
            config.seed,
            config.min_words,
            config.max_words,
            llm.chapter_words,
            attempt,
            distances,
            config.recalls_per_1k_words,
        )

    return StoryRunner(
        make_chat,
        seed_of,
        Recipe(llm.chapter_words, llm.max_continuations),
        Filters(llm.length_tolerance, llm.max_oov_share, llm.max_repeated_share),
        jobs,
        llm.concurrency,
        llm.max_attempts,
        progress=progress,
    )


def llm_statistics(arguments: dict[str, Any], results: list) -> dict[str, Any]:
    """``manifest.extra`` of an LLM build: the ledger, the filter counts and the card's tables."""
    from ltsgen.stories.llm.filters import REJECTIONS
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
