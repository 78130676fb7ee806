"""The engine's phrase banks and world tables: package data files, read once per process.

``data/sentences.txt`` and ``data/structure.txt`` hold the sentence grammar (notation: ``grammar.py``),
``data/themes.txt`` the sentences of each theme, ``data/recalls.txt`` the plants and cued recalls of
planted facts, ``data/world.json`` the places, kinds, objects and names a world is sampled from, and the pools of
planted values: invented names, numbers and object words that no other sentence can produce.

Grammar slots: ``A`` is the one who acts in a sentence and ``B`` the one beside them (``A_he A_He A_his
A_His A_him A_kind`` and the same for ``B``); ``H``/``F`` are always the hero and the friend. Story slots:
``P`` a reference to the pet and ``Pn`` its name, ``PK`` its kind; ``here``/``next`` places and ``pthing
psound psmell pplay`` what is found there; ``quest`` the thing looked for, ``home`` the hero's home; ``QC HC
FC`` colours, ``HID`` a hiding place, ``PROM`` a promise, ``WORD`` a secret word, ``NUM`` a count, ``G`` the
helper, ``C`` a companion met on the way. Upper-case fact slots hold placeholders resolved to values.
"""

from __future__ import annotations

import json
import re
from importlib.resources import files
from typing import Any

from ltsgen.stories.engine.facts import CUE_CLOSE, CUE_OPEN
from ltsgen.stories.engine.grammar import parse_sections
from ltsgen.stories.vocabulary import BASIC_WORDS, NAMES

_DATA = files("ltsgen.stories.engine") / "data"


def read_data(name: str) -> str:
    """The text of the package data file ``data/<name>``."""
    return (_DATA / name).read_text(encoding="utf-8")


def _tuples(value: Any) -> Any:
    """JSON lists as tuples (immutable, and what ``random.choice`` indexes fastest), recursively."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        return {key: _tuples(item) for key, item in value.items()}
    return value


def _synonym_rules() -> list[tuple[str, re.Pattern[str], str, tuple[str, ...]]]:
    """(original, pattern, section name, alternatives) of ``data/synonyms.txt``, longest first."""
    rules = []
    for line in read_data("synonyms.txt").splitlines():
        if line.strip() and not line.startswith("#"):
            original, _, alternatives = line.partition("=")
            original = original.strip()
            options = tuple(option.strip() for option in alternatives.split("|"))
            pattern = re.compile(r"(?<![\w{}'-])" + re.escape(original) + r"(?![\w}'-])")
            rules.append((original, pattern, "syn_" + re.sub(r"\W+", "_", original), options))
    return sorted(rules, key=lambda rule: -len(rule[3][0]))


def _rules_by_first_word() -> dict[str, tuple[int, ...]]:
    """The indices in ``_RULES`` of the rules whose original begins with each word (braces aside)."""
    by_word: dict[str, list[int]] = {}
    for index, (original, *_) in enumerate(_RULES):
        by_word.setdefault(_WORD.search(original).group(), []).append(index)
    return {word: tuple(indices) for word, indices in by_word.items()}


def with_synonyms(sections: dict[str, tuple[str, ...]]) -> dict[str, tuple[str, ...]]:
    """``sections`` with every original of a synonym rule made a choice among its alternatives, the rules
    applied in their order. An option is tried only against the rules whose first word it holds whole: an
    original's first word is whole wherever its pattern matches, and the ``{syn_...}`` a rule writes begins
    no original."""
    out = {}
    for name, options in sections.items():
        rewritten = []
        for option in options:
            words = set(_WORD.findall(option))
            for index in sorted({index for word in words for index in _FIRST_WORDS.get(word, ())}):
                original, pattern, section, _ = _RULES[index]
                if original in option:  # the pattern holds the original literally: skip the regex when absent
                    option = pattern.sub("{" + section + "}", option)
            rewritten.append(option)
        out[name] = tuple(rewritten)
    return out


_WORD = re.compile(r"[\w'-]+")  # a word as the patterns bound it: a run of what may not border an original
_RULES = _synonym_rules()
_FIRST_WORDS = _rules_by_first_word()
SYNONYM_SECTIONS: dict[str, tuple[str, ...]] = {section: options for _, _, section, options in _RULES}
SECTIONS: dict[str, tuple[str, ...]] = (
    with_synonyms(
        {**parse_sections(read_data("sentences.txt")), **parse_sections(read_data("structure.txt"))}
    )
    | SYNONYM_SECTIONS
)
THEME_SECTIONS: dict[str, tuple[str, ...]] = with_synonyms(parse_sections(read_data("themes.txt")))
THEMES: tuple[str, ...] = tuple(name for name in THEME_SECTIONS if not name.endswith("_love"))
WORLD: dict[str, Any] = _tuples(json.loads(read_data("world.json")))
# A cue is written [in square brackets] in recalls.txt: the brackets become the marks a sentence's cue
# is recorded by (``facts.CUE_OPEN`` and ``CUE_CLOSE``), which the text resolves to nothing.
RECALL_SECTIONS: dict[str, tuple[str, ...]] = with_synonyms(
    parse_sections(read_data("recalls.txt").translate({ord("["): CUE_OPEN, ord("]"): CUE_CLOSE}))
)


def bank_words() -> frozenset[str]:
    """Every word (lowercased) that a story can contain apart from planted values: the words of every
    grammar section and world table, and the names of characters."""
    texts = [
        option
        for sections in (SECTIONS, THEME_SECTIONS, RECALL_SECTIONS)
        for options in sections.values()
        for option in options
    ]
    texts.append(json.dumps({key: value for key, value in WORLD.items() if key != "planted"}))
    words = {
        word.lower() for text in texts for word in re.findall(r"[A-Za-z]+", re.sub(r"\{\w+\}", " ", text))
    }
    return frozenset(words | {name.lower() for name in NAMES})


def _planted_values() -> dict[str, tuple[str, ...]]:
    """The pools of planted values, each value a word that no other sentence of a story contains, not even
    inside a longer word ("slipper" in "slippery"); invented names are no English word either."""
    written = " ".join(sorted(bank_words()))
    english = " ".join(sorted(BASIC_WORDS))
    table = WORLD["planted"]
    invented = (start + end for start in table["name_starts"] for end in table["name_ends"])
    names = tuple(
        name
        for name in invented
        if name.lower() not in written and name.lower() not in english and not re.search(r"(.)\1\1", name)
    )
    return {
        "names": names,
        "objects": tuple(word for word in table["objects"] if word not in written),
        "numbers": tuple(str(number) for number in range(100, 1000)),  # no chapter heading reaches 100
    }


PLANTED_VALUES: dict[str, tuple[str, ...]] = _planted_values()
