"""The plot of one story: a setup that sets the facts, chapters of journey, problems and help, an ending.

The ending is rendered first (so its length is known) and written last; the setup and the chapters fill
the words in between, and the last sentences are chosen to fit, so a story lands on its target length.
"""

from __future__ import annotations

import random

from ltsgen.stories.engine.banks import (
    PLANTED_VALUES,
    RECALL_SECTIONS,
    SECTIONS,
    THEME_SECTIONS,
    THEMES,
    WORLD,
)
from ltsgen.stories.engine.narrator import Narrator
from ltsgen.stories.engine.world import PLACES, TRAITS, World
from ltsgen.stories.recalls import Distances, schedule

Sentence = tuple[str, int, list[tuple[int, int]] | None]

# Stories shorter than this have no chapter titles; chapters of long stories are this long on average.
CHAPTERS_FROM = 600
CHAPTER_WORDS = (250, 900)


def _title(place: str) -> str:
    return " ".join(word.capitalize() for word in place.split())


class Plot:
    """Writes one story into a ``Narrator``; ``write(target)`` returns the narrator when done."""

    def __init__(
        self,
        rng: random.Random,
        world: World,
        features: tuple[str, ...],
        distances: Distances,
        recalls_per_thousand: float,
    ):
        self.rng = rng
        self.world = world
        self.features = features
        self.distances = distances
        self.recalls_per_thousand = recalls_per_thousand
        self.recall_bounds: tuple[int, int] | None = None  # the story's distance bounds (set by ``write``)
        self.planted: list[tuple[str, dict[str, str]]] = []  # (kind, slot values) per planted fact
        self.recalls_dropped = 0  # recalls of chains beyond the keys a story has (see ``plant``)
        self.events: list[tuple[int, int, int]] = []  # (word position, planted fact, step), latest first
        ph = world.placeholders
        self.ph = ph
        table = {**SECTIONS, **RECALL_SECTIONS}
        table["trait"] = tuple(rng.sample(TRAITS, 2))
        table["pet_sound"] = world.pet_sounds
        table["colour"] = world.colours
        table["P"] = (
            ph["Pn"],
            ph["Pn"],
            ph["Pn"],
            "the {PK}",
            "{H_his} {PK}",
            "the little {PK}",
            ph["Pn"] + " the {PK}",
        )
        self.theme = rng.choice(THEMES)
        table["hobby"] = THEME_SECTIONS[self.theme]
        table["hobby_love"] = THEME_SECTIONS[self.theme + "_love"]
        goal = rng.choice(("lost", "gift"))
        self.goal = goal
        for key in ("goal_intro", "goal_more", "resolve", "twist", "hid_intro"):
            table[key] = table[f"{key}_{goal}"]
        table["G_place"] = (world.places[0],)  # where the helper is met (set when met)
        self.table = table
        self.narrator = Narrator(rng, table, world.facts)
        hp = world.home_person
        hp_he = "she" if hp in ("Mom", "Grandma") else "he"
        common = {
            **world.hero.slots("H"),
            **world.friend.slots("F"),
            **world.helper.slots("G"),
            "Pn": ph["Pn"],
            "PK": world.pet.kind,
            **{k: v for k, v in world.pet.slots("P").items() if k != "P"},  # "P" itself is a section
            "NUM": ph["NUM"],
            "HC": ph["HC"],
            "FC": ph["FC"],
            "QC": ph["QC"],
            "HID": ph["HID"],
            "PROM": ph["PROM"],
            "WORD": ph["WORD"],
            "fobj": world.fav_object,
            "qobj": world.quest_object,
            "home_person": hp,
            "hp_he": hp_he,
            "helper_who": world.helper_intro,
            "helper_who_cap": world.helper_intro[0].upper() + world.helper_intro[1:],
        }
        self.common = common
        self.with_friend = self.narrator.slots({**common, **world.hero.slots("A"), **world.friend.slots("B")})
        self.friend_leads = self.narrator.slots(
            {**common, **world.friend.slots("A"), **world.hero.slots("B")}
        )
        self.with_pet = self.narrator.slots({**common, **world.hero.slots("A"), **world.pet.slots("B")})
        self.pair = self.with_pet  # the hero's partner until the friend is introduced
        self.companions: list = []  # Slots with a companion as B and as C
        self.visited: list[str] = []  # places in the order the story goes to them
        self.helper_met = False
        self.intro: set[str] = set()  # fact slots the setup introduces (set by ``write``)
        self.conflict = "pending" if "conflict" in features else None
        self.conflict_at = 0  # words after which the argument comes (set by ``write``)

    # ------------------------------------------------------------------ low-level writing
    def say(self, key: str, slots=None) -> int:
        if self.events:
            self.recall_due()
        return self.narrator.say(slots or self.pair, key)

    def fits(self, key: str, room: int, slots=None) -> int:
        """Write a sentence of ``key`` of at most ``room`` words (else a short one); its words, 0 if none fit."""
        if self.events:
            self.recall_due()
        narrator = self.narrator
        slots = slots or self.pair
        for section in (key, key, "short", "short", "short", "short", "tiny", "tiny", "tiny", "tiny"):
            sentence = narrator.candidate(slots, section)
            if sentence[1] <= room:
                narrator.add(sentence)
                return sentence[1]
        return 0

    def go_to(self, place: str) -> None:
        table = self.table
        found = PLACES[place]
        table["here"] = (place,)
        table["here_cap"] = (place[0].upper() + place[1:],)
        table["pthing"] = found["things"]
        table["pthing_cap"] = tuple(t[0].upper() + t[1:] for t in found["things"])
        table["psound"] = found["sounds"]
        table["psmell"] = table["psmell_short"] = found["smells"]
        table["pplay"] = found["plays"]
        self.visited.append(place)
        places = self.world.places
        table["next"] = (places[len(self.visited) % len(places)],)

    def journey(self) -> None:
        """Travel to the next place of the journey and arrive there."""
        places = self.world.places
        narrator = self.narrator  # not ``say``: a recall waits until the story has arrived
        narrator.say(self.pair, "travel")  # to {next}, the place after the current one
        self.go_to(places[len(self.visited) % len(places)])
        narrator.say(self.pair, "arrive")

    # ------------------------------------------------------------------ parts of the story
    def setup(self, target: int) -> None:
        """The opening paragraph(s): who, where, the pet, the goal, and (room allowing) the other facts."""
        say = self.say
        intro = self.intro
        self.go_to(self.world.places[0])
        say("open")
        say("pet_intro")
        if "HC" in intro:
            say("home_intro")
        if "F" in intro:
            say("friend_intro")
            self.pair = self.with_friend
        if "FC" in intro:
            say("fav_intro")
        if "NUM" in intro:
            say("spots_intro")
        if target >= 220:
            say("hobby_intro")
        if target >= 600:
            say("open_more")
        self.narrator.paragraph()
        say("goal_intro")
        if target >= 400:
            say("goal_more")
        for slot, key in (("HID", "hid_intro"), ("PROM", "promise_intro"), ("WORD", "word_intro")):
            if slot in intro:
                say(key)
        if "foreshadowing" in self.features and target >= 220:
            say("foreshadow")

    def ending(self, target: int) -> list[Sentence]:
        """The ending sentences (rendered, not yet written): resolution, twist, home, promise, moral; the
        shortest stories keep to a resolution, one happy sentence and the moral, so that they fit."""
        narrator = self.narrator
        intro = self.intro
        roomy = target >= SHORT_ENDING_BELOW
        keys = []
        if "bad ending" in self.features:
            keys += ["fail", "sad_end", "sad_end"]
        else:
            hid = "HID" in intro
            # without a hiding place told in the setup, the lost thing is found on the way
            keys.append("resolve" if hid or self.goal == "gift" else "resolve_gift")
            if "plot twist" in self.features and (hid or self.goal == "gift") and roomy:
                keys.append("twist")
            keys.append("go_home" if "F" in intro else "happy_end")
            if roomy:
                keys.append("happy_end")
            if "PROM" in intro:
                keys.append("promise_end")
            if self.goal == "gift" and hid:
                keys.append("surprise_end")
        if "moral" in self.features or self.rng.random() < 0.3:
            keys.append("moral_bad" if "bad ending" in self.features else "moral")
        tries = 1 if roomy else SHORT_ENDING_TRIES
        return [
            min((narrator.candidate(self.pair, key) for _ in range(tries)), key=lambda sentence: sentence[1])
            for key in keys
        ]

    def write(self, target: int) -> Narrator:
        """The whole story, ``target`` words give or take a word or two."""
        narrator = self.narrator
        self.intro = {slot for slot, least in INTRO_FROM.items() if target >= least}
        if "F" in self.intro:
            self.pair = self.with_friend
        ending = self.ending(target)
        ending_words = sum(sentence[1] for sentence in ending)
        body = max(0, target - ending_words)
        self.conflict_at = int(body * self.rng.uniform(0.3, 0.6))
        if target >= CHAPTERS_FROM:
            narrator.heading(f"Chapter 1: {self.chapter_title(0)}")
        self.setup(target)
        while len(ending) > 1 and narrator.words + ending_words > target:  # no room left: fewer last words
            ending_words -= ending.pop()[1]
            body = target - ending_words
        self.plant(self.narrator.words, body - RECALL_END_MARGIN)
        if target >= CHAPTERS_FROM:
            self.chapters(body)
        else:
            narrator.paragraph()
            if body - narrator.words > 40:
                self.journey()
            self.episodes(body)
        narrator.paragraph()
        for sentence in ending:
            narrator.add(sentence)
        return narrator

    def chapters(self, body: int) -> None:
        narrator = self.narrator
        rng = self.rng
        number = 1
        while body - narrator.words > 40:
            number += 1
            chapter_budget = rng.randint(*CHAPTER_WORDS)
            remaining = body - narrator.words
            if remaining - chapter_budget < CHAPTER_WORDS[0]:
                chapter_budget = remaining
            narrator.heading(f"Chapter {number}: {self.chapter_title(number)}")
            self.chapter(min(body, narrator.words + chapter_budget), number)
        self.episodes(body)

    def chapter_title(self, number: int) -> str:
        if number < 2:
            return self.world.hero.name
        places = self.world.places
        return _title(places[(number - 1) % len(places)])  # chapter n goes to the n-th place

    def chapter(self, end: int, number: int) -> None:
        """One chapter of the journey: go somewhere, look, meet, get into trouble and out of it."""
        world = self.world
        say = self.say
        self.journey()
        say("describe")
        if not self.helper_met and number >= 3:
            self.helper_met = True
            self.table["G_place"] = self.table["here"]
            say("helper_intro")
        if len(self.companions) < len(world.companions) and self.rng.random() < 0.5:
            self.meet_companion()
        night = self.rng.random() < NIGHT_RATE
        self.episodes(end - NIGHT_WORDS if night else end)
        if night:
            narrator = self.narrator
            narrator.paragraph()
            while end - narrator.words > 3:
                if not self.fits("night", end - narrator.words):
                    break

    def meet_companion(self) -> None:
        world = self.world
        companion = world.companions[len(self.companions)]
        values = {**self.common, **world.hero.slots("A"), **companion.slots("B"), **companion.slots("C")}
        values["C_place"] = self.table["here"][0]
        slots = self.narrator.slots(values)
        self.companions.append(slots)
        self.say("companion_intro", slots)
        self.say("companion_more", slots)

    def episodes(self, end: int) -> None:
        """Episodes until ``end`` words, the last sentences chosen to land on it."""
        narrator = self.narrator
        rng = self.rng
        chatty = "dialogue" in self.features
        events = self.events  # latest first: the next one is events[-1]
        while end - narrator.words > 25:
            narrator.paragraph()
            if self.conflict == "pending" and narrator.words > self.conflict_at:
                script, self.conflict = ARGUE, "argued"
            elif self.conflict == "argued":
                script, self.conflict = MAKEUP, "done"
            else:
                script = rng.choice(SCRIPTS)
                if script[0] in OPENS_A_PROBLEM and end - narrator.words < 110:
                    script = CALM  # no room to get out of trouble: no trouble
            for key in script:
                if events and events[-1][0] <= narrator.words:
                    self.recall_due()
                room = end - narrator.words
                if room <= 12:
                    break
                if key in _CHOOSING_STEPS:
                    key, slots = self.resolve(key, chatty)
                    if key is None:
                        continue
                else:
                    slots = self.pair
                if room < 40:
                    self.fits(key, room, slots)
                else:
                    narrator.say(slots, key)
        while self.events and self.events[-1][0] <= narrator.words:  # late ones, before the last words
            self.recall_due()
        while end - narrator.words > 1:
            if not self.fits(rng.choice(FILLERS), end - narrator.words):
                break

    # ------------------------------------------------------------------ planted facts
    def plant(self, start: int, end: int) -> None:
        """Schedule the planted facts whose plants and recalls go between words ``start`` and ``end``: one
        per chain, each with a kind, a value and a key (``KEYS``) that no other fact of the story shares."""
        rng = self.rng
        chains, self.recall_bounds = schedule(rng, self.distances, start, end, self.recalls_per_thousand)
        if not chains:
            return
        table = WORLD["planted"]
        weights = table["kinds"]
        left = {kind: KEYS_PER_KIND[kind] for kind in weights}  # keys (and objects) left per kind
        kinds: list[str] = []
        for _ in chains:
            open_kinds = [kind for kind in weights if left[kind]]
            if not open_kinds:  # every key taken: no more planted facts in this story
                break
            kind = rng.choices(open_kinds, [weights[kind] for kind in open_kinds])[0]
            left[kind] -= 1
            kinds.append(kind)
        keys = {kind: iter(rng.sample(table[KEYS[kind][0]], kinds.count(kind))) for kind in weights}
        pool_of = {"name": "names", "word": "names", "number": "numbers", "hidden": "objects"}
        draws = {
            pool: iter(rng.sample(PLANTED_VALUES[pool], sum(pool_of[kind] == pool for kind in kinds)))
            for pool in PLANTED_VALUES
        }
        facts = self.world.facts
        self.recalls_dropped = sum(len(chain.gaps) for chain in chains[len(kinds) :])
        del chains[len(kinds) :]
        for number, (chain, kind) in enumerate(zip(chains, kinds, strict=True)):
            key = next(keys[kind])
            slot = KEYS[kind][1]
            values = {
                "V": facts.add(f"planted_{kind}", next(draws[pool_of[kind]]), planted=True),
                slot: key,
                slot + "_cap": key[0].upper() + key[1:],
            }
            self.planted.append((kind, values))
            self.events += [(position, number, step) for step, position in enumerate(chain.positions)]
        self.events.sort(reverse=True)

    def recall_due(self) -> None:
        """Write the next plant or recall if the story has reached its word position (one at a time, so
        that two that fall together come a sentence apart)."""
        events = self.events
        if events[-1][0] <= self.narrator.words:
            _, number, step = events.pop()
            kind, values = self.planted[number]
            if step == 0:
                values["at"] = self.table["here"][0]  # where it was planted, for the recalls
                key = f"plant_{kind}"
            else:
                key = "again_hidden" if kind == "hidden" and step > 1 else f"recall_{kind}"
            slots = self.narrator.slots(self.pair)
            slots.update(values)
            self.narrator.say(slots, key, keep_section=True)

    def resolve(self, key: str, chatty: bool):
        """The section and the roles for a script step (None when a talk step is skipped)."""
        rng = self.rng
        if key == "recall":
            return self.recall()
        if key == "talk":
            if not chatty and rng.random() > 0.25:
                return None, None
            draw = rng.random()
            if self.pair is self.with_friend and draw < 0.3:
                return "talk", self.friend_leads
        elif key == "help" and self.helper_met and rng.random() < 0.3:
            return "help_g", self.pair
        return key, self.pair

    def recall(self):
        """A section (and roles) that uses a fact set earlier."""
        facts = self.world.facts
        ph = self.ph
        if self.companions and self.rng.random() < 0.25:
            return "companion_use", self.rng.choice(self.companions)
        options = ["think", "think"]
        for slot, key in RECALLS:
            if facts.mentioned(ph[slot]):
                options.append(key)
        if self.helper_met:
            options.append("helper_use")
        return self.rng.choice(options), self.pair


# The key of a planted fact by kind: the world table it is drawn from, and its slot in the sentences.
KEYS = {
    "name": ("creatures", "creature"),
    "word": ("clubs", "club"),
    "number": ("signs", "sign"),
    "hidden": ("spots", "spot"),
}
# The planted facts a story holds at most, by kind: one per key, and hidden things one per object too.
KEYS_PER_KIND = {kind: len(WORLD["planted"][table]) for kind, (table, _) in KEYS.items()}
KEYS_PER_KIND["hidden"] = min(KEYS_PER_KIND["hidden"], len(PLANTED_VALUES["objects"]))
PLANTED_KEYS = sum(KEYS_PER_KIND.values())
# Planted facts are recalled no later than this many words before the ending.
RECALL_END_MARGIN = 40
# Stories shorter than this get a short ending (no twist, one happy sentence).
SHORT_ENDING_BELOW = 160
# ... and the shortest of this many renderings of each ending sentence, so that the setup fits too.
SHORT_ENDING_TRIES = 3
# Share of chapters that end with a night paragraph, and its length in words.
NIGHT_RATE = 0.25
NIGHT_WORDS = 30
# The facts the setup introduces, by the least target length that has room for them.
INTRO_FROM = {
    "Pn": 0,
    "QC": 0,
    "HID": 140,
    "HC": 180,
    "F": 180,
    "FC": 250,
    "NUM": 250,
    "PROM": 300,
    "WORD": 800,
}
# Episode scripts: grammar sections in order ("recall" uses a fact set earlier, "talk" is dialogue);
# the last two are rarer (drawn from the common ones twice as often).
SCRIPTS = (
    ("problem", "feel", "try", "talk", "help", "fixed", "recall"),
    ("problem", "try", "talk", "talk", "help", "feel", "fixed"),
    ("describe", "play", "pet_act", "sky", "feel", "recall"),
    ("find", "talk", "talk", "describe", "recall"),
    ("animal_meet", "talk", "pet_act", "feel", "recall"),
    ("talk", "talk", "pet_act", "talk", "think"),
    ("recall", "pet_act", "play", "recall", "feel"),
    ("rest", "talk", "rest", "pet_act", "recall"),
    ("sky", "describe", "find", "play", "think"),
    ("hobby", "talk", "hobby", "pet_act", "recall"),
    ("travel_bit", "hobby", "describe", "feel", "recall"),
    ("wonder", "talk", "likeness", "pet_act", "recall"),
    ("memory", "talk", "feel", "joke", "think"),
    ("likeness", "describe", "wonder", "play", "recall"),
)
SCRIPTS = (
    SCRIPTS
    + SCRIPTS
    + (
        ("deed_need", "talk", "deed_do", "deed_thanks", "feel"),
        ("weather_turn", "weather_react", "pet_act", "talk", "recall"),
    )
)
_CHOOSING_STEPS = frozenset(("recall", "talk", "help"))  # steps whose section or roles ``resolve`` chooses
OPENS_A_PROBLEM = ("problem", "deed_need", "weather_turn")
CALM = ("describe", "pet_act", "feel", "recall")
ARGUE = ("argue", "feel", "talk", "argue", "feel")
MAKEUP = ("makeup", "makeup", "feel", "recall")
RECALLS = (("NUM", "spots_use"), ("FC", "fav_use"), ("PROM", "promise_use"), ("WORD", "word_use"))
FILLERS = ("pet_act", "feel", "sky", "describe", "play", "find", "animal_meet", "hobby", "likeness", "wonder")
