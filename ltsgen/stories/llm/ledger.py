"""The token and cost ledger of an LLM build: what the dataset cost, and what this run spent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prices:
    """US dollars per million prompt (input) and completion (output) tokens."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0

    def cost(self, prompt_tokens: float, completion_tokens: float) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


@dataclass
class Usage:
    """Answers and their tokens."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens

    def merge(self, other: dict[str, Any]) -> None:
        self.requests += other.get("requests", 0)
        self.prompt_tokens += other.get("prompt_tokens", 0)
        self.completion_tokens += other.get("completion_tokens", 0)

    def to_dict(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass
class Ledger:
    """This run's traffic: answers sent for (paid), answers replayed from the cache (free), retries.

    ``reserved`` is the worst-case cost of requests in flight, so that ``--max-cost`` is never overshot.
    """

    prices: Prices = field(default_factory=Prices)
    sent: Usage = field(default_factory=Usage)
    cached: Usage = field(default_factory=Usage)
    retries: dict[str, int] = field(default_factory=dict)
    reserved: float = 0.0

    @property
    def spent(self) -> float:
        return self.prices.cost(self.sent.prompt_tokens, self.sent.completion_tokens)

    @property
    def total_retries(self) -> int:
        return sum(self.retries.values())

    def retry(self, reason: str) -> None:
        self.retries[reason] = self.retries.get(reason, 0) + 1

    def summary(self) -> str:
        retries = ", ".join(f"{n} {reason}" for reason, n in sorted(self.retries.items())) or "none"
        return (
            f"this run: {self.sent.requests:,} requests sent ({self.sent.prompt_tokens:,} prompt + "
            f"{self.sent.completion_tokens:,} completion tokens, ${self.spent:.4f}), "
            f"{self.cached.requests:,} answered from the cache, retries: {retries}"
        )


def dataset_ledger(usage: Usage, prices: Prices) -> dict[str, Any]:
    """The manifest's ledger: every answer the dataset was built from (cached or not) and its cost."""
    return {
        **usage.to_dict(),
        "prices_per_million_tokens": {"input": prices.input_per_million, "output": prices.output_per_million},
        "cost_usd": round(prices.cost(usage.prompt_tokens, usage.completion_tokens), 6),
    }
