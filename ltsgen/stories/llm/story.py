"""Write one LongTinyStories story with a language model: outline, then chapter by chapter."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ltsgen.loaders.contract import count_words
from ltsgen.stories.llm.client import Answer, ChatClient
from ltsgen.stories.llm.filters import Filters, cue_span, missed_events
from ltsgen.stories.llm.ledger import Usage
from ltsgen.stories.llm.recipe import (
    StorySeed,
    chapter_messages,
    clean_answer,
    continue_messages,
    cut_to_budget,
    is_refusal,
    outline_messages,
    parse_outline,
    summary_messages,
)
from ltsgen.stories.recalls import occurrences, use_distances


@dataclass(frozen=True)
class Recipe:
    chapter_words: int = 600  # words per chapter the plan aims at
    max_continuations: int = 2  # extra requests for a chapter that ends short
    short_share: float = 0.8  # a chapter below this share of its budget is continued
    long_share: float = 1.2  # a chapter above this share is cut at the sentence end nearest its budget

    def to_dict(self) -> dict[str, Any]:
        return {
            "chapter_words": self.chapter_words,
            "max_continuations": self.max_continuations,
            "short_share": self.short_share,
            "long_share": self.long_share,
        }


@dataclass
class StoryResult:
    """A finished story: its record when kept, else the reason it was rejected; its usage either way."""

    seed: StorySeed
    record: dict[str, Any] | None
    rejected: str | None
    usage: Usage
    finish_reasons: Counter[str] = field(default_factory=Counter)


class _Rejected(Exception):
    def __init__(self, reason: str) -> None:
        self.reason = reason


async def write_story(story: StorySeed, chat: ChatClient, recipe: Recipe, filters: Filters) -> StoryResult:
    """Plan and write ``story``; the same answers always give the same result."""
    usage, finishes = Usage(), Counter()

    async def ask(messages: list[dict[str, str]], required: bool = True) -> tuple[str, Answer]:
        answer = await chat.complete(messages, story.request_seed)
        usage.add(answer.prompt_tokens, answer.completion_tokens)
        finishes[answer.finish_reason] += 1
        text = clean_answer(answer.text)
        if is_refusal(text):
            raise _Rejected("refusal")
        if required and not text:
            raise _Rejected("empty")
        return text, answer

    try:
        outline_text, _ = await ask(outline_messages(story))
        outline = parse_outline(outline_text, story.chapters)
        texts, chapters, summaries = await _write_chapters(ask, story, outline, recipe)
    except _Rejected as rejection:
        return StoryResult(story, None, rejection.reason, usage, finishes)

    text = "\n\n".join(texts)
    facts, missed, uncued = planted_facts(text, texts, story)
    rejected, measures = filters.verdict(text, story.target_words, missed, uncued)
    meta = {
        "backend": "openai",
        "model": chat.model,
        "seed_words": {"noun": story.noun, "verb": story.verb, "adjective": story.adjective},
        "features": list(story.features),
        "target_words": story.target_words,
        "chapters": chapters,
        "outline": {"characters": list(outline.characters), "plans": list(outline.plans)},
        "summaries": summaries,
        "usage": usage.to_dict(),
        "attempt": story.attempt,
        "facts": facts,
        "recalls": {
            "distances": story.distances,
            "bounds": list(story.recall_bounds) if story.recall_bounds else None,
            "per_1k_words": story.recalls_per_thousand,
            "planted": len(story.facts),
        },
        **measures,
    }
    record = {"id": story.id, "text": text, "source": "lts", "num_words": count_words(text), "meta": meta}
    return StoryResult(story, None if rejected else record, rejected, usage, finishes)


async def _write_chapters(ask, story: StorySeed, outline, recipe: Recipe):
    """(texts, records, rolling summaries) of the chapters, written until the story reaches its target
    length or its last chapter; a summary of the story so far is asked for between chapters."""
    chapters: list[dict[str, Any]] = []
    texts: list[str] = []
    summaries: list[str] = []
    total = 0
    for k, budget in enumerate(story.budgets, 1):
        previous = texts[-1] if texts else ""
        summary = summaries[-1] if summaries else ""
        text, chapter = await _write_chapter(ask, story, outline, recipe, k, budget, summary, previous, total)
        texts.append(text)
        chapters.append(chapter)
        total += chapter["words"]
        if total >= story.target_words or k == story.chapters:
            break
        summary_text, _ = await ask(summary_messages(story, summary, text))
        summaries.append(summary_text)
    return texts, chapters, summaries


async def _write_chapter(
    ask,
    story: StorySeed,
    outline,
    recipe: Recipe,
    k: int,
    budget: int,
    summary: str,
    previous: str,
    total: int,
) -> tuple[str, dict[str, Any]]:
    """Chapter ``k`` (``total`` words written before it) and its record: asked for, continued while it is
    short (at most ``recipe.max_continuations`` times), then cut to its ``budget``."""
    text, answer = await ask(chapter_messages(story, outline, k, summary, previous))
    cut, continuations = answer.finish_reason == "length", 0
    while continuations < recipe.max_continuations and total + len(text.split()) < story.target_words:
        words = len(text.split())
        if words >= (budget if cut else recipe.short_share * budget):
            break  # long enough (a chapter cut at the token limit loses its last sentence below)
        more, answer = await ask(
            continue_messages(story, outline, k, text, max(budget - words, 50), cut), required=False
        )
        continuations += 1
        if not more:
            break
        text = f"{text} {more}" if cut else f"{text}\n\n{more}"
        cut = answer.finish_reason == "length"
    written = len(text.split())
    most = int(recipe.long_share * budget)
    text = cut_to_budget(text, budget, min(most, max(written - 1, 1)) if cut else most)
    words = len(text.split())
    return text, {
        "budget": budget,
        "words": words,
        "continuations": continuations,
        "cut_words": written - words,
    }


def planted_facts(text: str, chapters: list[str], story: StorySeed) -> tuple[list[dict[str, Any]], int, int]:
    """The records of the story's planted facts (as the engine's: every occurrence of the value after the
    first is a use, each with its distance to the previous one, and the span of its cue: the fact's key
    before it, or None), how many asked-for plants and recalls the chapters missed, and how many of those
    they wrote lack their cue (the plant's key before the value, a recall chapter's cued use). Events of
    chapters the story never reached (it ended on length) were not asked."""
    spans, start = [], 0
    for chapter in chapters:
        spans.append((start, start + len(chapter)))
        start += len(chapter) + 2
    records, missed, uncued = [], 0, 0
    for fact in story.facts:
        if fact.plant > len(spans):
            continue
        recalls = tuple(k for k in fact.recalls if k <= len(spans))
        found = occurrences(text, fact.value)
        missed += missed_events(found, spans, fact.plant, recalls)
        if not found:
            continue
        ends = [offset + len(fact.value) for offset in found]
        cues = [cue_span(text, fact.cue, use, after) for use, after in zip(found[1:], ends, strict=False)]
        uncued += cue_span(text, fact.cue, found[0], 0) is None
        for k in recalls:
            start, end = spans[k - 1]
            uses = [cue for use, cue in zip(found[1:], cues, strict=True) if start <= use < end]
            uncued += bool(uses) and all(cue is None for cue in uses)
        records.append(
            {
                "name": fact.name,
                "value": fact.value,
                "first": found[0],
                "uses": found[1:],
                "cues": cues,
                "planted": True,
            }
            | {"plant_chapter": fact.plant, "recall_chapters": list(fact.recalls)}
        )
    use_distances(text, records, search=True)
    return records, missed, uncued
