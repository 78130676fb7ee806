"""Chat completions through ``openai.AsyncOpenAI`` with the cache, retries, rate limits and budget of a build.

The client's own retries are off (``max_retries=0``): ``ChatClient`` retries 408, 409, 429, 5xx, timeouts,
dropped connections and malformed answers with exponential backoff and jitter, waiting at least what a
``Retry-After`` header asks. 401, 403, 404 and other 4xx answers stop the build with ``BuildError``, and so
does a server that cannot be connected to before it has answered once (``UNREACHED_RETRIES``).
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from typing import Any

from ltsgen.build import BuildError
from ltsgen.errors import require
from ltsgen.stories.llm.cache import ResponseCache, request_key
from ltsgen.stories.llm.ledger import Ledger

openai = require("openai", "llm", "stories from --backend openai")
RETRYABLE_STATUS = (408, 409, 429)
CHARS_PER_TOKEN = 4  # for estimates before the server counts (rate limits and the cost cap)
# a chat template's own tokens around the messages, at most: with the prompt's UTF-8 bytes (a token has at
# least one), a bound on the prompt tokens a server can count
TEMPLATE_TOKENS = 1_024
# retries of a connection that fails before the server has answered once: a wrong --base-url or a server
# not running is said within seconds instead of after minutes of backoff
UNREACHED_RETRIES = 2
CONNECT_TIMEOUT = 15.0  # seconds to open a connection (a request's answer may take --request-timeout)


class BudgetExhausted(Exception):
    """``--max-cost`` would be exceeded by the next request."""


@dataclass(frozen=True)
class Sampling:
    temperature: float = 0.8
    top_p: float = 0.95
    max_tokens: int = 1024

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Answer:
    text: str
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int


class RateLimiter:
    """Spaces out spending so that at most ``per_minute`` units go per minute (a GCRA without burst)."""

    def __init__(self, per_minute: float) -> None:
        self.interval = 60.0 / per_minute
        self.next_free = 0.0

    async def acquire(self, amount: float = 1.0) -> None:
        now = time.monotonic()
        start = max(now, self.next_free)
        self.next_free = start + amount * self.interval
        if start > now:
            await asyncio.sleep(start - now)

    def adjust(self, amount: float) -> None:
        """Correct an earlier estimate by ``amount`` units (positive: more was spent)."""
        self.next_free += amount * self.interval


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 8
    backoff: float = 1.0  # seconds before the first retry; doubles each time, times a jitter in [0.5, 1.5)
    max_backoff: float = 60.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        delay = min(self.max_backoff, self.backoff * 2**attempt) * (0.5 + random.random())
        return max(delay, retry_after) if retry_after is not None else delay


class ChatClient:
    """One ``complete(messages, seed)`` per request: from the cache when answered before, else from the server."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        model: str,
        sampling: Sampling,
        cache: ResponseCache,
        ledger: Ledger,
        *,
        retry: RetryPolicy | None = None,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_cost: float | None = None,
        on_answer: Callable[[Answer, bool], None] | None = None,
        on_retry: Callable[[str, float], None] | None = None,
        key_source: str = "the API key",
    ) -> None:
        self.client = client
        self.model = model
        self.sampling = sampling
        self.cache = cache
        self.ledger = ledger
        self.retry = retry or RetryPolicy()
        self.rpm = RateLimiter(requests_per_minute) if requests_per_minute else None
        self.tpm = RateLimiter(tokens_per_minute) if tokens_per_minute else None
        self.max_cost = max_cost
        self.exhausted = False
        self.on_answer = on_answer
        self.on_retry = on_retry  # (reason, seconds it waits) before each retry
        self.key_source = key_source
        self.reached = False  # whether the server has answered (anything, errors included) in this process

    def request(self, messages: list[dict[str, str]], seed: int) -> dict[str, Any]:
        """The request body, which is also the cache key's content."""
        return {"model": self.model, "messages": messages, **self.sampling.to_dict(), "seed": seed}

    async def complete(self, messages: list[dict[str, str]], seed: int) -> Answer:
        request = self.request(messages, seed)
        key = request_key(request)
        cached = _cached_answer(self.cache.get(key), _prompt_limit(request), self.sampling.max_tokens)
        if cached is not None:
            answer = cached
            self.ledger.cached.add(answer.prompt_tokens, answer.completion_tokens)
        else:
            answer = await self._fetch(request)
            self.cache.put(key, request, asdict(answer))
            self.ledger.sent.add(answer.prompt_tokens, answer.completion_tokens)
        if self.on_answer:
            self.on_answer(answer, cached is not None)
        return answer

    async def _fetch(self, request: dict[str, Any]) -> Answer:
        estimate = sum(len(m["content"]) for m in request["messages"]) / CHARS_PER_TOKEN
        worst = self.ledger.prices.cost(estimate, self.sampling.max_tokens)
        if self.exhausted or (
            self.max_cost is not None and self.ledger.spent + self.ledger.reserved + worst > self.max_cost
        ):
            self.exhausted = True
            raise BudgetExhausted
        self.ledger.reserved += worst
        try:
            for attempt in range(self.retry.max_retries + 1):
                if self.rpm:
                    await self.rpm.acquire()
                if self.tpm:
                    await self.tpm.acquire(estimate + self.sampling.max_tokens)
                try:
                    response = await self.client.chat.completions.create(**request)
                    answer = _answer(response, estimate, _prompt_limit(request), self.sampling.max_tokens)
                except (
                    openai.APIStatusError,
                    openai.APIConnectionError,
                    openai.APIResponseValidationError,
                    ValueError,
                ) as error:
                    reason, retry_after = self._classify(error)
                    self.reached |= not _not_connected(error)
                    if not self.reached and attempt >= min(UNREACHED_RETRIES, self.retry.max_retries):
                        raise BuildError(
                            f"{self.client.base_url}: cannot connect ({_describe(error)}); is the server "
                            "running, and is --base-url its API root?"
                        ) from None
                    if attempt == self.retry.max_retries:
                        raise BuildError(
                            f"{self.client.base_url}: gave up after {attempt} retries; last error: "
                            f"{_describe(error)}"
                        ) from None
                    self.ledger.retry(reason)
                    delay = self.retry.delay(attempt, retry_after)
                    if self.on_retry:
                        self.on_retry(reason, delay)
                    await asyncio.sleep(delay)
                    continue
                self.reached = True
                if self.tpm:
                    self.tpm.adjust(
                        answer.prompt_tokens + answer.completion_tokens - estimate - self.sampling.max_tokens
                    )
                return answer
            raise AssertionError("unreachable")
        finally:
            self.ledger.reserved -= worst

    def _classify(self, error: Exception) -> tuple[str, float | None]:
        """(retry reason, Retry-After seconds), or raise ``BuildError`` when retrying cannot help."""
        if isinstance(error, openai.APIStatusError):
            status = error.status_code
            if status in RETRYABLE_STATUS or status >= 500:
                return str(status), retry_after_seconds(error.response.headers)
            hint = {
                401: f"check {self.key_source}",
                403: "the key may not use this model",
                404: f"is --model {self.model!r} served at --base-url {self.client.base_url}?",
            }.get(status, "the server rejected the request")
            raise BuildError(f"{self.client.base_url} answered {_describe(error)}; {hint}") from None
        if isinstance(error, openai.APITimeoutError) and not _connect_timeout(error):
            return "timeout", None
        if isinstance(error, openai.APIConnectionError):
            return "connection", None
        return "malformed", None


def _connect_timeout(error: Exception) -> bool:
    """Whether a timeout came while opening the connection (no server answered), not while awaiting an
    answer: the ``ConnectTimeout`` of the HTTP library under ``openai`` (httpx, or httpx2 in later releases)."""
    return type(error.__cause__).__name__ == "ConnectTimeout"


def _not_connected(error: Exception) -> bool:
    """Whether a request failed before a connection was open (refused, no such host, none opened in time),
    not after (a response cut, a server that dropped it): the HTTP library's ``ConnectError`` or
    ``ConnectTimeout``."""
    return isinstance(error, openai.APIConnectionError) and type(error.__cause__).__name__ in (
        "ConnectError",
        "ConnectTimeout",
    )


def _answer(response: Any, prompt_estimate: float, prompt_limit: int, max_tokens: int) -> Answer:
    """Check a chat completion and reduce it to an ``Answer``; ValueError when it is malformed. Token counts
    the server leaves out (or gives as no count) are estimated; counts beyond what the request allows
    (``prompt_limit`` prompt tokens, ``max_tokens`` completion tokens) are taken at that limit."""
    if isinstance(response, str | bytes):  # the client's body of an answer that is not JSON
        excerpt = (response if isinstance(response, str) else response.decode("utf-8", "replace"))[:60]
        raise ValueError(
            f"an answer that is not a chat completion ({excerpt!r}); is --base-url the API root?"
        )
    choices = getattr(response, "choices", None)
    if not choices or getattr(choices[0], "message", None) is None:
        raise ValueError("answer without choices")
    text = choices[0].message.content or ""
    if not isinstance(text, str):
        raise ValueError(f"answer whose content is a {type(text).__name__}, not text")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:  # a lone surrogate, escaped in the JSON: no story, nor cache file
        raise ValueError(
            f"answer whose text is not Unicode ({error.reason} at character {error.start})"
        ) from None
    usage = getattr(response, "usage", None)
    prompt_tokens = _count(getattr(usage, "prompt_tokens", None), round(prompt_estimate), prompt_limit)
    completion_tokens = _count(
        getattr(usage, "completion_tokens", None), -(-len(text) // CHARS_PER_TOKEN), max_tokens
    )
    reason = choices[0].finish_reason
    return Answer(
        text, reason if isinstance(reason, str) and reason else "stop", prompt_tokens, completion_tokens
    )


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _count(value: Any, estimate: int, limit: int) -> int:
    """A token count as the server gave it, at most ``limit``; ``estimate`` when it gave no count."""
    return min(value, limit) if _is_count(value) else estimate


def _prompt_limit(request: dict[str, Any]) -> int:
    """The most prompt tokens a server can count for ``request``: its messages' UTF-8 bytes and a template."""
    return sum(len(message["content"].encode("utf-8")) for message in request["messages"]) + TEMPLATE_TOKENS


def _cached_answer(entry: Any, prompt_limit: int, max_tokens: int) -> Answer | None:
    """A cache entry's answer (its counts at most the request's limits, as an answer's), or None (a miss)
    for one that an earlier version stored unchecked."""
    if not isinstance(entry, dict) or set(entry) != {f.name for f in fields(Answer)}:
        return None
    counts = (entry["prompt_tokens"], entry["completion_tokens"])
    texts = (entry["text"], entry["finish_reason"])
    if not all(isinstance(v, str) for v in texts) or not all(_is_count(v) for v in counts):
        return None
    return Answer(*texts, min(counts[0], prompt_limit), min(counts[1], max_tokens))


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds asked by ``Retry-After-Ms`` or ``Retry-After`` (seconds or an HTTP date), if any."""
    if value := headers.get("retry-after-ms"):
        try:
            return float(value) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def _describe(error: Exception) -> str:
    if isinstance(error, openai.APIStatusError):
        body = error.body
        message = body.get("message") if isinstance(body, dict) else None
        return f"{error.status_code} {message or error.message}".replace("\n", " ")
    if isinstance(error, json.JSONDecodeError):
        return f"an answer that is not JSON ({error}); is --base-url the API root?"
    detail = ""
    if isinstance(error, openai.APIConnectionError):  # what lies under it: refused, unknown host, ...
        cause: BaseException = error
        seen = {id(cause)}
        while (cause.__cause__ or cause.__context__) and id(cause.__cause__ or cause.__context__) not in seen:
            cause = cause.__cause__ or cause.__context__
            seen.add(id(cause))
        if cause is not error:
            known = isinstance(cause, OSError) and isinstance(cause.errno, int) and cause.errno > 0
            detail = f" ({os.strerror(cause.errno)}: {cause.strerror})" if known else f" ({cause})"
    return f"{type(error).__name__}: {error}{detail}".replace("\n", " ")
