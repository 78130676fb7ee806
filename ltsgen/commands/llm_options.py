"""The options of ``ltsgen stories --backend openai``: declared, checked and turned into an ``LLMConfig``."""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from pathlib import Path
from urllib.parse import urlsplit

from ltsgen.commands import number
from ltsgen.errors import UsageError
from ltsgen.stories.llm.backend import LLMConfig, default_cache_dir

BUDGET_EXIT = 3  # exit status when --max-cost stopped the build
DEFAULTS = {field.name: field.default for field in fields(LLMConfig)}


def add_llm_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the options of ``--backend openai`` to the ``ltsgen stories`` parser (defaults: ``LLMConfig``'s)."""
    group = parser.add_argument_group(
        "--backend openai",
        "Write the stories with a language model behind any OpenAI-compatible server (OpenAI, vLLM, "
        "llama.cpp, Ollama): an outline per story, then chapter by chapter. Answers are cached in "
        "--cache-dir, so a rerun resumes without sending a request twice.",
    )

    def add(flag: str, kind: type | None, help: str) -> None:
        name = flag[2:].replace("-", "_")
        limits = LLMConfig.LIMITS.get(name)  # a number out of its range: refused while parsing
        parse = number(kind, limits) if limits else kind
        group.add_argument(flag, type=parse, default=DEFAULTS[name], help=help)

    add(
        "--base-url",
        None,
        "server URL, e.g. http://127.0.0.1:8080/v1 (when not given: $OPENAI_BASE_URL if set, else OpenAI's API)",
    )
    group.add_argument(
        "--model", default=None, help="model name as the server knows it (required with --backend openai)"
    )
    group.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        help="environment variable holding the key (local servers need none)",
    )
    add("--concurrency", int, "stories written at once = requests in flight")
    add("--requests-per-minute", float, "cap on requests per minute (no cap when not given)")
    add("--tokens-per-minute", float, "cap on tokens per minute (no cap when not given)")
    add("--request-timeout", float, "seconds per request before a retry (15 s at most to connect)")
    add("--max-retries", int, "retries of one request before the build stops")
    add(
        "--retry-backoff",
        float,
        "seconds before the first retry, doubled each time, with jitter; Retry-After wins",
    )
    add("--temperature", float, "sampling temperature")
    add("--top-p", float, "nucleus sampling")
    add("--max-tokens", int, "tokens per answer")
    add("--chapter-words", int, "words per chapter the plan aims at")
    add("--max-continuations", int, "extra requests for a short chapter")
    add("--length-tolerance", float, "keep stories within this share of their target length")
    add("--max-oov-share", float, "reject stories with more words outside the simple vocabulary")
    add("--max-repeated-share", float, "reject stories with more repeated paragraphs")
    add(
        "--max-attempts",
        int,
        "tries per story: a rejected story is written again (new seed words, facts and request seed)",
    )
    add("--input-price", float, "USD per million prompt tokens")
    add("--output-price", float, "USD per million completion tokens")
    add(
        "--max-cost",
        float,
        f"stop cleanly (exit status {BUDGET_EXIT}) before this run spends more USD; rerun to go on",
    )
    group.add_argument(
        "--cache-dir",
        type=Path,
        default=default_cache_dir(),
        help="answer cache, shared by builds (default: $XDG_CACHE_HOME/ltsgen/openai, else ~/.cache/ltsgen/openai)",
    )


def check_llm_arguments(args: argparse.Namespace) -> None:
    """One-line errors for options of this backend that cannot make a build."""
    if not args.model:
        raise UsageError("--backend openai needs --model (the model name the server serves)")
    if args.workers not in (None, 1) or args.engine != "local":
        raise UsageError(
            "--workers and --engine apply to --backend builtin; --backend openai uses --concurrency"
        )
    if args.base_url is not None:
        check_base_url(args.base_url, "--base-url")
    elif os.environ.get("OPENAI_BASE_URL"):  # what the client reads instead
        check_base_url(os.environ["OPENAI_BASE_URL"], "$OPENAI_BASE_URL")
    if args.max_cost is not None and not args.input_price and not args.output_price:
        raise UsageError("--max-cost needs --input-price and/or --output-price (USD per million tokens)")


def check_base_url(url: str, given_as: str) -> None:
    """Refuse a server URL (``given_as`` names where it came from) that is not an http(s) URL with a host (and
    a port that is a number)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as error:
        raise UsageError(f"{given_as} {url!r} is not a URL ({error})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(
            f"{given_as} {url!r} is not an http(s) URL with a host (for example http://127.0.0.1:8080/v1)"
        )


def llm_config(args: argparse.Namespace) -> LLMConfig:
    """The ``LLMConfig`` of checked arguments, with the key from ``$--api-key-env``."""
    api_key = os.environ.get(args.api_key_env)
    if not api_key:
        if args.base_url is None and not os.environ.get("OPENAI_BASE_URL"):
            raise UsageError(f"${args.api_key_env} is not set (the key for OpenAI; see --api-key-env)")
        api_key = "none"  # servers without keys accept any
    settings = {name: getattr(args, name) for name in DEFAULTS if name not in ("api_key", "key_source")}
    return LLMConfig(**settings, api_key=api_key, key_source=f"${args.api_key_env} (--api-key-env)")
