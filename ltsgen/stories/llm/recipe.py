"""The LongTinyStories recipe for a language model: seed a story, plan it, then prompt chapter by chapter.

Every prompt is a pure function of the story seed and earlier answers, and its size is bounded whatever
the story's length: a chapter prompt carries the character sheet, the plans of this chapter and the next,
a capped rolling summary and the end of the previous chapter, never the story itself.

Planted facts: the seed fixes values that the story must use (an invented name, a number, an object word),
the chapter where each is planted and the later chapters where it is recalled, at distances drawn as the
built-in engine draws them (``ltsgen.stories.recalls``), at chapter granularity. The outline prompt lists
them, and each chapter prompt asks for its own and names the exact words to write: each value's key (its
cue, which no other value of the story has) and then the value, at the plant as at every recall.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from ltsgen.stories.plan import sample_features, stable_seed, story_id, story_rng, target_words
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND, Distances, schedule
from ltsgen.stories.vocabulary import ADJECTIVES, FEATURES, NOUNS, VERBS

RECIPE_VERSION = "4"  # part of a build's identity: a build is never resumed with another recipe's prompts
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
MAX_EVENTS_PER_CHAPTER = 2  # plants and recalls one chapter is asked for, at most
# what a chapter is asked to tell, per kind of planted fact: (the plant, the first recall, a later recall);
# {cue} is the fact's key, which no other value of the story has: the plant writes it before the value in
# one sentence, and every recall writes it before the value (the filters check that it does)
FACT_EVENTS = {
    "name": (
        "the main character finds a {cue} and names it {V}",
        "the main character remembers the name of the {cue}, {V}",
        "the main character thinks of the {cue} again, {V}",
    ),
    "number": (
        "the main character sees a number on {cue}: {V}",
        "the main character remembers the number on {cue}, {V}",
        "the main character says the number on {cue} again, {V}",
    ),
    "word": (
        "two friends make up a secret word for {cue}: {V}",
        "the main character says the secret word for {cue} again, {V}",
        "the friends whisper their secret word for {cue}, {V}",
    ),
    "hidden": (
        "the main character hides something {cue}: a {V}",
        "the main character looks {cue} and finds the {V} where it was hidden",
        "the main character looks again at the thing from {cue}, the {V}",
    ),
}
KEYS = {"name": "creatures", "number": "signs", "word": "clubs", "hidden": "spots"}  # world.json pools
CUE_BEFORE = "each time, first the words before the arrow, then the word after it, close together"
PLAIN_STORY = "Write only the story, in short sentences and simple words."  # the prompts' last words
EXACT_WORDS = "Write these words exactly as they are: "  # before the cues and values a chapter must contain
_CHAPTER_LINE = re.compile(r"^\W*chapter\s+(\d+)\b[^:\n]*:\s*(.+)$", re.I | re.M)
_HEADING = re.compile(r"^\s*(#+\s*|\*\*\s*)?(chapter\s+\w+|title)\b.*$", re.I)
_SENTENCE_END = re.compile(r"[.!?][\"'”’)]*(?=\s|$)")
_REFUSAL = re.compile(
    r"^\W*(i'?m sorry|i am sorry|i cannot|i can'?t|i'?m unable|i am unable|as an ai)\b", re.I
)


@dataclass(frozen=True)
class PlantedFact:
    """A value the story must plant in chapter ``plant`` and recall in each of ``recalls`` (1-based)."""

    name: str  # "planted_<kind>", as in the engine's records
    kind: str
    value: str
    cue: str  # the key: written before the value at the plant and at every recall
    plant: int
    recalls: tuple[int, ...]
    texts: tuple[str, ...]  # what the plant chapter and each recall chapter are asked to tell


@dataclass(frozen=True)
class StorySeed:
    """What one story is asked to be: TinyStories seed words and features, a length, chapter budgets, the
    planted facts; ``attempt`` numbers the tries of one story (a rejected story is written again)."""

    index: int
    id: str
    noun: str
    verb: str
    adjective: str
    features: tuple[str, ...]
    target_words: int
    budgets: tuple[int, ...]  # words per chapter, summing to target_words
    request_seed: int  # the ``seed`` sent with every request of this story
    attempt: int = 0
    facts: tuple[PlantedFact, ...] = ()
    distances: str = str(DEFAULT_DISTANCES)  # the recall distances' distribution
    recalls_per_thousand: float = DEFAULT_RECALLS_PER_THOUSAND
    recall_bounds: tuple[int, int] | None = None  # the story's recall distance bounds, in words

    @property
    def chapters(self) -> int:
        return len(self.budgets)

    def events(self, k: int) -> list[tuple[PlantedFact, str]]:
        """(fact, what to tell) for chapter ``k``: its plants and recalls."""
        found = []
        for fact in self.facts:
            chapters = (fact.plant, *fact.recalls)
            if k in chapters:
                found.append((fact, fact.texts[chapters.index(k)]))
        return found


@dataclass(frozen=True)
class Outline:
    characters: tuple[str, ...]  # "- Name: who they are" lines
    plans: tuple[str, ...]  # one sentence per chapter ("" where the answer gave none)


def story_seed(
    index: int,
    seed: int,
    min_words: int,
    max_words: int,
    chapter_words: int,
    attempt: int = 0,
    distances: Distances = DEFAULT_DISTANCES,
    recalls_per_thousand: float = DEFAULT_RECALLS_PER_THOUSAND,
) -> StorySeed:
    """The seed of attempt ``attempt`` of story ``index``: a pure function of its arguments. Every attempt
    keeps the story's target length; the seed words, features, facts and request seed are the attempt's."""
    rng = story_rng(index, seed, f"llm-{attempt}" if attempt else "llm")
    target = target_words(index, seed, min_words, max_words)
    chapters = max(1, round(target / chapter_words))
    base, extra = divmod(target, chapters)
    budgets = tuple(base + (1 if k < extra else 0) for k in range(chapters))
    features = sample_features(rng)[:MAX_FEATURES] or (rng.choice(FEATURES),)
    noun, verb, adjective = rng.choice(NOUNS), rng.choice(VERBS), rng.choice(ADJECTIVES)
    facts, bounds = plan_facts(rng, budgets, distances, recalls_per_thousand)
    return StorySeed(
        index=index,
        id=story_id(index, seed),
        noun=noun,
        verb=verb,
        adjective=adjective,
        features=features,
        target_words=target,
        budgets=budgets,
        request_seed=stable_seed("lts-llm-request", seed, index, *([attempt] if attempt else [])) % 2**31,
        attempt=attempt,
        facts=facts,
        distances=str(distances),
        recalls_per_thousand=recalls_per_thousand,
        recall_bounds=bounds,
    )


def plan_facts(
    rng: random.Random, budgets: tuple[int, ...], distances: Distances, per_thousand: float
) -> tuple[tuple[PlantedFact, ...], tuple[int, int] | None]:
    """The planted facts of a story of chapters of ``budgets`` words: the engine's schedule over the whole
    story, each plant and recall moved to the chapter holding its word position; a recall that falls in the
    chapter of the fact's previous event, or in a chapter that is already asked for
    ``MAX_EVENTS_PER_CHAPTER`` events, is left out (and a fact left with no recall too)."""
    from ltsgen.stories.engine.banks import PLANTED_VALUES, WORLD

    ends = list(accumulate(budgets))
    chains, bounds = schedule(rng, distances, 0, ends[-1], per_thousand)
    table = WORLD["planted"]
    pool_of = {"name": "names", "word": "names", "number": "numbers", "hidden": "objects"}
    taken: set[str] = set()
    keys = {kind: list(table[pool]) for kind, pool in KEYS.items()}  # the keys left, per kind
    load = [0] * len(budgets)
    facts = []
    for chain in chains:
        chapters = []
        for position in chain.positions:
            k = min(bisect_right(ends, position), len(budgets) - 1)
            if (not chapters or k > chapters[-1]) and load[k] < MAX_EVENTS_PER_CHAPTER:
                chapters.append(k)
        if len(chapters) < 2:
            continue
        open_kinds = [kind for kind in table["kinds"] if keys[kind]]
        if not open_kinds:  # every key taken: no more planted facts
            break
        kind = rng.choices(open_kinds, [table["kinds"][kind] for kind in open_kinds])[0]
        cue = keys[kind].pop(int(rng.random() * len(keys[kind])))
        value = rng.choice(PLANTED_VALUES[pool_of[kind]])
        while value in taken:
            value = rng.choice(PLANTED_VALUES[pool_of[kind]])
        taken.add(value)
        for k in chapters:
            load[k] += 1
        plant, first, later = (text.format(V=value, cue=cue) for text in FACT_EVENTS[kind])
        facts.append(
            PlantedFact(
                name=f"planted_{kind}",
                kind=kind,
                value=value,
                cue=cue,
                plant=chapters[0] + 1,
                recalls=tuple(k + 1 for k in chapters[1:]),
                texts=(plant, first, *[later] * (len(chapters) - 2)),
            )
        )
    return tuple(facts), bounds


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
    musts = "".join(
        f"- in chapter {k}: {text}\n" for k in range(1, story.chapters + 1) for _, text in story.events(k)
    )
    if musts:
        musts = f"These things must happen in the story:\n{musts}"
    return _messages(
        f"Plan a story of about {story.target_words} words in {story.chapters} chapters. {_premise(story)}\n"
        f"{musts}Answer in exactly this format and nothing else:\n"
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
    context = (
        f"You are writing chapter {k} of {story.chapters} of a story for small children. {_premise(story)}\n"
    )
    if outline.characters:
        context += "Characters:\n" + "\n".join(outline.characters) + "\n"
    if outline.plans[k - 1]:
        context += f"This chapter is about: {outline.plans[k - 1]}\n"
    if events := story.events(k):
        context += f"In this chapter, {'; and '.join(text for _, text in events)}. "
        pairs = ", ".join(f"{fact.cue} -> {fact.value}" for fact, _ in events)
        context += f"{EXACT_WORDS}{pairs} ({CUE_BEFORE}).\n"
    if k == story.chapters:
        return context + "This is the last chapter: end the story.\n"
    return context + f"The next chapter will be about: {outline.plans[k] or 'more of the story'}\n"


def chapter_messages(
    story: StorySeed, outline: Outline, k: int, summary: str, previous_end: str
) -> list[dict[str, str]]:
    """Ask for chapter ``k`` from the outline, the sheet, the rolling summary and the previous chapter's end."""
    context = _chapter_context(story, outline, k)
    if k > 1:
        context += f"The story so far, in short: {_first_words(summary, SUMMARY_WORDS)}\n"
        context += f'The previous chapter ended like this: "...{last_words(previous_end, TAIL_WORDS)}"\n'
    values = " and ".join(fact.value for fact, _ in story.events(k))
    with_values = f", with the words {values}" if values else ""  # said again last: small models forget
    return _messages(
        f"{context}Write chapter {k} now, about {story.budgets[k - 1]} words{with_values}. {PLAIN_STORY}"
    )


def continue_messages(
    story: StorySeed, outline: Outline, k: int, chapter_so_far: str, words_left: int, cut: bool
) -> list[dict[str, str]]:
    """Ask to go on with a chapter that ended short (or was cut at the token limit)."""
    stop = "It stops in the middle of a sentence. " if cut else ""
    return _messages(
        f"{_chapter_context(story, outline, k)}"
        f'Chapter {k} so far ends like this: "...{last_words(chapter_so_far, TAIL_WORDS)}"\n'
        f"{stop}Go on writing chapter {k} from exactly where it stops, about {words_left} words more. "
        f"Do not repeat what is already written. {PLAIN_STORY}"
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


def cut_to_budget(text: str, budget: int, most: int) -> str:
    """``text`` when it has at most ``most`` words, else cut at the sentence end nearest ``budget`` words among
    those within ``most`` words (at ``most`` words when no sentence ends there)."""
    word_ends = [match.end() for match in re.finditer(r"\S+", text)]
    if len(word_ends) <= most:
        return text
    limit = word_ends[most - 1]
    ends = [(bisect_right(word_ends, m.end()), m.end()) for m in _SENTENCE_END.finditer(text, 0, limit)]
    if not ends:
        return text[:limit]
    return text[: min(ends, key=lambda end: abs(end[0] - budget))[1]]


def is_refusal(text: str) -> bool:
    return bool(_REFUSAL.match(text))


def last_words(text: str, count: int) -> str:
    return " ".join(text.split()[-count:])


def _first_words(text: str, count: int) -> str:
    return " ".join(text.split()[:count])
