"""The LongTinyStories recipe for a language model: seed a story, plan it, then prompt chapter by chapter.

Every prompt is a pure function of the story seed and earlier answers, and its size is bounded whatever
the story's length: a chapter prompt carries the character sheet, the plans of this chapter and the next,
a capped rolling summary and the end of the previous chapter, never the story itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ltsgen.stories.plan import sample_features, stable_seed, story_id, story_rng, target_words
from ltsgen.stories.vocabulary import ADJECTIVES, FEATURES, NOUNS, VERBS

SYSTEM_PROMPT = (
    "You write long stories for small children. Use only simple words that a 3 to 4 year old understands. "
    "Write plain text: no titles, no headings, no lists, no notes."
)
FEATURE_INSTRUCTIONS = {
    "dialogue": "some dialogue",
    "plot twist": "a plot twist (something unexpected changes the story)",
    "foreshadowing": "foreshadowing (an early hint of what happens later)",
    "conflict": "a conflict (a problem the characters must face)",
    "moral": "a moral (a lesson the characters learn)",
    "bad ending": "a bad ending",
}
MAX_FEATURES = 3
TAIL_WORDS = 120  # words of the previous chapter (or of the chapter so far) shown to the model
SUMMARY_WORDS = 150  # the rolling summary asked for, and kept (capped) in prompts
SHEET_LINES, SHEET_LINE_WORDS, PLAN_WORDS = 6, 30, 40
_CHAPTER_LINE = re.compile(r"^\W*chapter\s+(\d+)\b[^:\n]*:\s*(.+)$", re.I | re.M)
_HEADING = re.compile(r"^\s*(#+\s*|\*\*\s*)?(chapter\s+\w+|title)\b.*$", re.I)
_REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|i cannot|i can'?t|i'?m unable|i am unable|as an ai)\b", re.I
)


@dataclass(frozen=True)
class StorySeed:
    """What one story is asked to be: TinyStories seed words and features, a length, chapter budgets."""

    index: int
    id: str
    noun: str
    verb: str
    adjective: str
    features: tuple[str, ...]
    target_words: int
    budgets: tuple[int, ...]  # words per chapter, summing to target_words
    request_seed: int  # the ``seed`` sent with every request of this story

    @property
    def chapters(self) -> int:
        return len(self.budgets)


@dataclass(frozen=True)
class Outline:
    characters: tuple[str, ...]  # "- Name: who they are" lines
    plans: tuple[str, ...]  # one sentence per chapter ("" where the answer gave none)


def story_seed(index: int, seed: int, min_words: int, max_words: int, chapter_words: int) -> StorySeed:
    """The seed of story ``index``: a pure function of its arguments."""
    rng = story_rng(index, seed, "llm")
    target = target_words(index, seed, min_words, max_words)
    chapters = max(1, round(target / chapter_words))
    base, extra = divmod(target, chapters)
    features = sample_features(rng)[:MAX_FEATURES] or (rng.choice(FEATURES),)
    return StorySeed(
        index=index,
        id=story_id(index, seed),
        noun=rng.choice(NOUNS),
        verb=rng.choice(VERBS),
        adjective=rng.choice(ADJECTIVES),
        features=features,
        target_words=target,
        budgets=tuple(base + (1 if k < extra else 0) for k in range(chapters)),
        request_seed=stable_seed("lts-llm-request", seed, index) % 2**31,
    )


def _premise(story: StorySeed) -> str:
    features = "; ".join(FEATURE_INSTRUCTIONS[f] for f in story.features)
    return (
        f'The story uses the verb "{story.verb}", the noun "{story.noun}" and the adjective '
        f'"{story.adjective}". It has {features}.'
    )


def _messages(prompt: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": prompt}]


def outline_messages(story: StorySeed) -> list[dict[str, str]]:
    """Ask for a character sheet and a one-sentence plan per chapter, with our word budgets."""
    chapters = "\n".join(
        f"Chapter {k} (about {words} words): what happens, in one sentence"
        for k, words in enumerate(story.budgets, 1)
    )
    return _messages(
        f"Plan a story of about {story.target_words} words in {story.chapters} chapters. {_premise(story)}\n"
        "Answer in exactly this format and nothing else:\n"
        "CHARACTERS:\n- Name: who they are, in one short line (two to four characters)\n"
        f"OUTLINE:\n{chapters}"
    )


def parse_outline(text: str, chapters: int) -> Outline:
    """The character sheet and chapter plans of an outline answer, capped so prompts stay bounded."""
    head, _, _ = text.partition("OUTLINE:")
    sheet = [line.strip() for line in head.splitlines() if line.strip().startswith(("-", "*"))]
    plans = [""] * chapters
    for number, plan in _CHAPTER_LINE.findall(text):
        if 1 <= int(number) <= chapters and not plans[int(number) - 1]:
            plans[int(number) - 1] = _first_words(plan.strip(" *_"), PLAN_WORDS)
    return Outline(tuple(_first_words(line, SHEET_LINE_WORDS) for line in sheet[:SHEET_LINES]), tuple(plans))


def _chapter_context(story: StorySeed, outline: Outline, k: int) -> str:
    sheet = "\n".join(outline.characters) or "- (choose them yourself)"
    plan = outline.plans[k - 1] or "go on with the story"
    if k == story.chapters:
        after = "This is the last chapter: end the story."
    else:
        after = f"The next chapter will be about: {outline.plans[k] or 'more of the story'}"
    return (
        f"You are writing chapter {k} of {story.chapters} of a story for small children. {_premise(story)}\n"
        f"Characters:\n{sheet}\nThis chapter is about: {plan}\n{after}\n"
    )


def chapter_messages(
    story: StorySeed, outline: Outline, k: int, summary: str, previous_end: str
) -> list[dict[str, str]]:
    """Ask for chapter ``k`` from the outline, the sheet, the rolling summary and the previous chapter's end."""
    context = _chapter_context(story, outline, k)
    if k > 1:
        context += f"The story so far, in short: {_first_words(summary, SUMMARY_WORDS)}\n"
        context += f'The previous chapter ended like this: "...{last_words(previous_end, TAIL_WORDS)}"\n'
    return _messages(f"{context}Write chapter {k} now, about {story.budgets[k - 1]} words.")


def continue_messages(
    story: StorySeed, outline: Outline, k: int, chapter_so_far: str, words_left: int, cut: bool
) -> list[dict[str, str]]:
    """Ask to go on with a chapter that ended short (or was cut at the token limit)."""
    stop = "It stops in the middle of a sentence. " if cut else ""
    return _messages(
        f"{_chapter_context(story, outline, k)}"
        f'Chapter {k} so far ends like this: "...{last_words(chapter_so_far, TAIL_WORDS)}"\n'
        f"{stop}Go on writing chapter {k} from exactly where it stops, about {words_left} words more. "
        "Do not repeat what is already written."
    )


def summary_messages(story: StorySeed, summary: str, chapter: str) -> list[dict[str, str]]:
    """Ask for the new rolling summary: the old one plus the chapter just written."""
    before = _first_words(summary, SUMMARY_WORDS) or "(nothing yet: this was the first chapter)"
    return _messages(
        f"Summary of a story so far: {before}\nThe next chapter: {chapter}\n"
        f"Write a new summary of the whole story so far in at most {SUMMARY_WORDS} words. "
        "Keep the names of the characters and the facts that matter later."
    )


def clean_answer(text: str) -> str:
    """An answer without leading headings or titles, paragraphs separated by one blank line."""
    lines = text.strip().splitlines()
    while lines and (_HEADING.match(lines[0]) or not lines[0].strip()):
        lines.pop(0)
    paragraphs = re.split(r"\n\s*\n", "\n".join(lines).strip())
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text))


def last_words(text: str, count: int) -> str:
    return " ".join(text.split()[-count:])


def _first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])
