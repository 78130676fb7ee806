"""The vocabulary of a small child, in the spirit of TinyStories (Eldan & Li, 2023).

``NOUNS``, ``VERBS`` and ``ADJECTIVES`` are the headwords the stories are built from (the LLM backend samples
one of each to seed a prompt, as TinyStories did). ``BASIC_WORDS`` holds every lowercase word form a story
may contain apart from names: the headwords with their regular and irregular inflections plus the function
words, numbers, adverbs and time words of simple English. ``NAMES`` are the names of people and animals;
``PET_NAMES`` the names given to pets.

The word lists are package data, ``data/vocabulary.json``, read once at import; this module derives the
inflected forms from them.
"""

from __future__ import annotations

import json
from importlib.resources import files

_LISTS = json.loads((files("ltsgen.stories") / "data" / "vocabulary.json").read_text(encoding="utf-8"))

FEATURES: tuple[str, ...] = tuple(_LISTS["features"])
NOUNS: tuple[str, ...] = tuple(_LISTS["nouns"])
VERBS: tuple[str, ...] = tuple(_LISTS["verbs"])
ADJECTIVES: tuple[str, ...] = tuple(_LISTS["adjectives"])
COLOURS: tuple[str, ...] = tuple(_LISTS["colours"])
GIRL_NAMES: tuple[str, ...] = tuple(_LISTS["girl_names"])
BOY_NAMES: tuple[str, ...] = tuple(_LISTS["boy_names"])
PET_NAMES: tuple[str, ...] = tuple(_LISTS["pet_names"])
NAMES = tuple(dict.fromkeys(GIRL_NAMES + BOY_NAMES + PET_NAMES))

# function words, numbers, adverbs and time words; other simple words; the engine's typed pools' word forms
_FUNCTION_WORDS: list[str] = _LISTS["function_words"]
_EXTRA_WORDS: list[str] = _LISTS["extra_words"]
_POOL_WORDS: list[str] = _LISTS["pool_words"]
_IRREGULAR_PAST: dict[str, list[str]] = _LISTS["irregular_past"]  # verb -> past (and participle)
_DOUBLE_FINAL = frozenset(_LISTS["double_final"])  # verbs that double their last letter: hop -> hopped
_IRREGULAR_PLURAL: dict[str, str] = _LISTS["irregular_plural"]


def plural(noun: str) -> str:
    """The plural of a basic noun."""
    if noun in _IRREGULAR_PLURAL:
        return _IRREGULAR_PLURAL[noun]
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


def verb_forms(verb: str) -> tuple[str, ...]:
    """Base, third person, past (and participle) and -ing forms of a basic verb."""
    double = verb in _DOUBLE_FINAL
    if verb == "lie":
        ing = "lying"
    elif verb.endswith("e") and verb not in ("be", "see"):
        ing = verb[:-1] + "ing"
    else:
        ing = verb + (verb[-1] if double else "") + "ing"
    if verb.endswith(("s", "x", "ch", "sh", "o")):
        third = verb + "es"
    elif verb.endswith("y") and verb[-2] not in "aeiou":
        third = verb[:-1] + "ies"
    else:
        third = verb + "s"
    if verb in _IRREGULAR_PAST:
        past: tuple[str, ...] = tuple(_IRREGULAR_PAST[verb])
    elif verb.endswith("e"):
        past = (verb + "d",)
    elif verb.endswith("y") and verb[-2] not in "aeiou":
        past = (verb[:-1] + "ied",)
    else:
        past = (verb + (verb[-1] if double else "") + "ed",)
    return (verb, third, ing, *past)


def _all_forms() -> frozenset[str]:
    words = set(_FUNCTION_WORDS) | set(_EXTRA_WORDS) | set(_POOL_WORDS)
    words |= set(COLOURS) | set(ADJECTIVES)
    words |= {form for verb in VERBS for form in verb_forms(verb)}
    words |= set(NOUNS) | {plural(noun) for noun in NOUNS}
    return frozenset(word.lower() for word in words)


BASIC_WORDS: frozenset[str] = _all_forms()
