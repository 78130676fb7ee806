"""The world of one story: characters, pet, home, places on the way, the quest, and the long-range facts."""

from __future__ import annotations

import random
from dataclasses import dataclass

from ltsgen.stories.engine.banks import WORLD
from ltsgen.stories.engine.facts import FactBook
from ltsgen.stories.vocabulary import BOY_NAMES, COLOURS, GIRL_NAMES, PET_NAMES

PLACES: dict[str, dict[str, tuple[str, ...]]] = WORLD["places"]  # place -> things, sounds, smells, plays
HERO_KINDS: tuple[tuple[str, str | None], ...] = WORLD["hero_kinds"]  # (kind, pronoun or None: either)
PET_KINDS: dict[str, tuple[str, ...]] = WORLD["pet_kinds"]  # kind -> what it does (sounds)
TRAITS: tuple[str, ...] = WORLD["traits"]
FAV_OBJECTS: tuple[str, ...] = WORLD["fav_objects"]
QUEST_OBJECTS: tuple[str, ...] = WORLD["quest_objects"]
HIDING_PLACES: tuple[str, ...] = WORLD["hiding_places"]
PROMISES: tuple[str, ...] = WORLD["promises"]
SECRET_WORDS: tuple[str, ...] = WORLD["secret_words"]
NUMBERS: tuple[str, ...] = WORLD["numbers"]
HELPER_KINDS: tuple[tuple[str, str], ...] = WORLD["helper_kinds"]  # (kind, how the story introduces it)
COMPANION_KINDS: tuple[str, ...] = WORLD["companion_kinds"]
HOME_PEOPLE: tuple[str, ...] = WORLD["home_people"]

PRONOUNS = {"she": ("she", "She", "her", "Her", "her"), "he": ("he", "He", "his", "His", "him")}


@dataclass
class Character:
    name: str  # the name as written, or a fact placeholder that resolves to it
    kind: str
    pronoun: str  # "she" or "he"

    def slots(self, role: str) -> dict[str, str]:
        he, he_cap, his, his_cap, him = PRONOUNS[self.pronoun]
        return {
            role: self.name,
            f"{role}_he": he,
            f"{role}_He": he_cap,
            f"{role}_his": his,
            f"{role}_His": his_cap,
            f"{role}_him": him,
            f"{role}_kind": self.kind,
        }


@dataclass
class World:
    hero: Character
    friend: Character
    helper: Character
    helper_intro: str  # "an old owl"
    pet: Character
    pet_sounds: tuple[str, ...]
    home_person: str
    fav_object: str
    quest_object: str
    places: list[str]  # journey order, places repeat in long stories
    companions: list[Character]  # met on the way, one fact each
    facts: FactBook
    placeholders: dict[str, str]  # fact slot -> placeholder
    colours: tuple[str, ...]  # colours free for descriptions (fact colours excluded)


def _pick_name(rng: random.Random, pool: tuple[str, ...], used: set[str]) -> str:
    name = rng.choice(pool)
    while name in used:
        name = rng.choice(pool)
    used.add(name)
    return name


def build_world(rng: random.Random, num_places: int, num_companions: int) -> World:
    """Sample the world of one story and register its long-range facts (in the order they are introduced)."""
    used: set[str] = set()
    kind, pronoun = rng.choice(HERO_KINDS)
    pronoun = pronoun or rng.choice(("she", "he"))
    hero_pool = GIRL_NAMES if pronoun == "she" else BOY_NAMES
    hero = Character(_pick_name(rng, hero_pool, used), kind, pronoun)
    facts = FactBook()
    ph: dict[str, str] = {}
    fact_colours = rng.sample([c for c in COLOURS if c[0] not in "aeiou"], 4)  # "a red", never "a orange"
    pet_kind = rng.choice(tuple(k for k in PET_KINDS if k != kind))
    pet_pronoun = rng.choice(("she", "he"))
    pet_name = _pick_name(rng, PET_NAMES, used)
    ph["Pn"] = facts.add("pet_name", pet_name)
    ph["NUM"] = facts.add("pet_spots", rng.choice(NUMBERS))
    ph["HC"] = facts.add("home_colour", fact_colours[0])
    friend_pronoun = rng.choice(("she", "he"))
    friend_name = _pick_name(rng, GIRL_NAMES if friend_pronoun == "she" else BOY_NAMES, used)
    ph["F"] = facts.add("friend_name", friend_name)
    ph["FC"] = facts.add("favourite_colour", fact_colours[1])
    ph["QC"] = facts.add("quest_colour", fact_colours[2])
    ph["HID"] = facts.add("hiding_place", rng.choice(HIDING_PLACES))
    ph["PROM"] = facts.add("promise", rng.choice(PROMISES))
    ph["WORD"] = facts.add("secret_word", rng.choice([w for w in SECRET_WORDS if w != pet_name.lower()]))
    helper_kind, helper_intro = rng.choice(HELPER_KINDS)
    helper_pronoun = "she" if helper_kind == "lady" else rng.choice(("she", "he"))
    helper_name = _pick_name(rng, GIRL_NAMES if helper_pronoun == "she" else BOY_NAMES, used)
    ph["G"] = facts.add("helper_name", helper_name)
    companions = []
    for number in range(num_companions):
        pronoun_c = rng.choice(("she", "he"))
        name = _pick_name(rng, GIRL_NAMES + BOY_NAMES if len(used) < 60 else PET_NAMES, used)
        placeholder = facts.add(f"companion_{number + 1}_name", name)
        companions.append(Character(placeholder, rng.choice(COMPANION_KINDS), pronoun_c))
    names = list(PLACES)
    rng.shuffle(names)
    places = [names[i % len(names)] for i in range(num_places)]
    return World(
        hero=hero,
        friend=Character(
            ph["F"],
            ("girl" if friend_pronoun == "she" else "boy") if kind in ("girl", "boy") else kind,
            friend_pronoun,
        ),
        helper=Character(ph["G"], helper_kind, helper_pronoun),
        helper_intro=helper_intro,
        pet=Character(ph["Pn"], pet_kind, pet_pronoun),
        pet_sounds=PET_KINDS[pet_kind],
        home_person=rng.choice(HOME_PEOPLE),
        fav_object=rng.choice(FAV_OBJECTS),
        quest_object=rng.choice(QUEST_OBJECTS),
        places=places,
        companions=companions,
        facts=facts,
        placeholders=ph,
        colours=tuple(c for c in COLOURS if c not in fact_colours[:3] and c[0] not in "aeiou"),
    )
