"""The built-in story engine: determinism, length control, long-range facts, variety, vocabulary, ids."""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from ltsgen.stories.engine import banks, generate_story
from ltsgen.stories.engine.banks import PLANTED_VALUES, RECALL_SECTIONS, SECTIONS, THEME_SECTIONS
from ltsgen.stories.engine.grammar import Slots, parse_sections
from ltsgen.stories.engine.plot import KEYS, Plot
from ltsgen.stories.engine.world import PLACES, build_world
from ltsgen.stories.plan import MIN_TARGET_WORDS, sample_features, story_id, story_rng, target_words
from ltsgen.stories.recalls import DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND
from ltsgen.stories.variety import reference_stats, split_sentences, tinystories_stories, variety_stats
from ltsgen.stories.vocabulary import ADJECTIVES, BASIC_WORDS, FEATURES, NAMES, NOUNS, VERBS

LONG = 32_000


@pytest.fixture(scope="module")
def longest() -> dict:
    return generate_story(7, 3, LONG)


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    return [generate_story(i, 0, target_words(i, 0, 100, 4000)) for i in range(40)]


def test_same_arguments_same_story_and_ids():
    first = generate_story(11, 5, 2500)
    assert generate_story(11, 5, 2500) == first
    assert generate_story(12, 5, 2500)["text"] != first["text"]
    assert generate_story(11, 6, 2500)["text"] != first["text"]
    assert first["id"] == story_id(11, 5) == "lts-5-00000011"
    assert first["source"] == "lts" and "." not in first["id"] and "/" not in first["id"]
    assert sorted(first) == ["id", "meta", "num_words", "source", "text"]


def test_same_story_in_another_process_with_another_hash_seed():
    code = (
        "import hashlib, json; from ltsgen.stories.engine import generate_story; "
        "print(hashlib.sha256(json.dumps(generate_story(5, 1, 3000), sort_keys=True).encode()).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        ).stdout.strip()
        for hash_seed in ("1", "2")
    }
    local = hashlib.sha256(json.dumps(generate_story(5, 1, 3000), sort_keys=True).encode()).hexdigest()
    assert digests == {local}


def test_ids_unique_and_negative_rejected():
    ids = {story_id(i, s) for i in range(300) for s in (0, 1, 10)}
    assert len(ids) == 900
    with pytest.raises(ValueError):
        story_id(-1, 0)


def test_seeding_is_stable_across_processes():
    # A fixed value: Python's salted hash() would change it from one process to the next.
    assert story_rng(0, 0).random() == 0.7977440464596421
    assert target_words(0, 0) == 1098
    assert [target_words(i, 1, 100, 100) for i in range(3)] == [100, 100, 100]


def test_target_words_log_uniform_within_bounds():
    targets = [target_words(i, 0, 100, 32_000) for i in range(4000)]
    assert min(targets) >= 100 and max(targets) <= 32_000
    # log-uniform: a quarter of the log-range below 100 * 320**0.25 ~ 424 words, half below ~1789
    below_quarter = sum(t < 100 * 320**0.25 for t in targets) / len(targets)
    below_half = sum(t < 100 * 320**0.5 for t in targets) / len(targets)
    assert 0.22 < below_quarter < 0.28 and 0.47 < below_half < 0.53
    with pytest.raises(ValueError):
        target_words(0, 0, 500, 100)


@pytest.mark.parametrize("target", [100, 101, 120, 150, 199, 250, 333, 599, 600, 1000, 4321, 12_000])
def test_length_within_five_percent(target):
    for index in range(8):
        record = generate_story(index, 2, target)
        assert record["num_words"] == len(record["text"].split())
        assert abs(record["num_words"] - target) <= 0.05 * target, (index, target, record["num_words"])


def test_the_shortest_target_is_met_by_every_story():
    for index in range(300):
        record = generate_story(index, 4, MIN_TARGET_WORDS)
        assert abs(record["num_words"] - MIN_TARGET_WORDS) <= 0.05 * MIN_TARGET_WORDS, record["text"]


def test_longest_story_on_target(longest):
    assert abs(longest["num_words"] - LONG) <= 0.05 * LONG
    assert longest["meta"]["plan"]["chapters"] > 20


def test_chapters_go_where_their_titles_say(longest):
    chapters = re.split(r"(?:^|\n\n)Chapter (\d+): ([^\n]+)\n\n", longest["text"])[1:]
    places = longest["meta"]["plan"]["places"]
    assert len(chapters) // 3 == longest["meta"]["plan"]["chapters"] == len(places)
    for number, title, body in zip(chapters[::3], chapters[1::3], chapters[2::3], strict=True):
        if number == "1":
            assert title == longest["meta"]["plan"]["hero"]
            continue
        place = places[int(number) - 1]
        assert title == place.title()
        assert place in split_sentences(body)[0] or place in " ".join(split_sentences(body)[:2])


def test_short_story_is_complete():
    record = generate_story(3, 0, 100)
    text = record["text"]
    first_two = " ".join(split_sentences(text)[:2])
    assert record["meta"]["plan"]["hero"] in first_two and re.search(
        r"\b(named|called|name was)\b", first_two
    )
    assert text.rstrip().endswith((".", "!", '"'))
    assert len(text.split("\n\n")) >= 2
    assert record["meta"]["facts"], "even a 100-word story sets a fact and uses it"


def _check_facts(record):
    text = record["text"]
    for fact in record["meta"]["facts"]:
        value = fact["value"]
        offsets = [fact["first"], *fact["uses"]]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        for offset in offsets:
            assert text[offset : offset + len(value)] == value, (fact["name"], offset)
            # a whole word or phrase, not part of a longer word
            assert offset == 0 or not text[offset - 1].isalnum()
            end = offset + len(value)
            assert end == len(text) or not text[end].isalnum()


def test_facts_at_their_offsets(sample, longest):
    for record in [*sample, longest]:
        _check_facts(record)


def test_facts_are_long_range_in_long_stories(longest):
    facts = {fact["name"]: fact for fact in longest["meta"]["facts"]}
    for name in ("pet_name", "quest_colour", "favourite_colour", "friend_name", "pet_spots"):
        assert name in facts, name
        fact = facts[name]
        assert fact["first"] < 3000
        assert len(fact["uses"]) >= 5
        # used in the last tenth of the story, tens of thousands of characters after its first mention
        assert max(fact["uses"]) - fact["first"] > 100_000
    words_before = len(longest["text"][: facts["quest_colour"]["uses"][-1]].split())
    assert words_before > 25_000


def test_no_long_sentence_more_than_three_times(sample, longest):
    for record in [*sample, longest]:
        assert variety_stats([record["text"]])["max_repeats_6plus"] <= 3, record["id"]


def test_variety_of_a_build(sample, longest):
    stats = variety_stats([r["text"] for r in sample] + [longest["text"]], max_words=60_000)
    assert stats["words"] == 60_000
    assert stats["distinct_2"] > 0.12 and stats["distinct_3"] > 0.3
    assert stats["repeated_sentence_share"] < 0.08
    single = variety_stats([longest["text"]])
    assert single["repeated_sentence_share"] < 0.1


def test_variety_stats_definitions():
    story = 'Tom ran to the big red barn. Tom ran to the big red barn. "Hi!" said Sam. Tom ran to the big red barn.'
    assert split_sentences(story) == [
        "Tom ran to the big red barn.",
        "Tom ran to the big red barn.",
        '"Hi!" said Sam.',
        "Tom ran to the big red barn.",
    ]
    stats = variety_stats([story, "A b a b."])
    assert stats["max_repeats_6plus"] == 3
    assert stats["repeated_sentence_share"] == pytest.approx(2 / 5)
    # words: tom ran to the big red barn x3 + "hi said sam": bigrams don't cross stories
    assert stats["words"] == 7 * 3 + 3 + 4
    assert stats["distinct_2"] == pytest.approx(13 / 26)  # 11 distinct bigrams in story 1, 2 in story 2


def test_reference_stats_of_real_tinystories(real_data):
    path = real_data / "tinystories" / "tinystories_validation_head.txt"
    stories = list(tinystories_stories(path))
    assert 700 < len(stories) < 950
    stats = reference_stats(path)
    assert 150_000 < stats["words"] <= sum(len(s.split()) for s in stories)
    assert stats["distinct_2"] == pytest.approx(0.2963, abs=1e-3)
    assert stats["distinct_3"] == pytest.approx(0.6384, abs=1e-3)
    assert stats["repeated_sentence_share"] < 0.02
    eot = list(tinystories_stories(real_data / "tinystories" / "tinystories_sample_eot.txt"))
    assert len(eot) == 5


def _words(text):
    for raw in text.split():
        word = raw.strip(string.punctuation + "“”‘’")
        if word.endswith("'s"):
            word = word[:-2]
        if word and not word.isdigit():
            yield word


def test_vocabulary_of_stories(sample, longest):
    names = set(NAMES) | set(PLANTED_VALUES["names"])  # invented names of planted facts are names too
    outside = total = 0
    unknown = set()
    for record in [*sample, longest]:
        for word in _words(record["text"]):
            if word in names:
                continue
            total += 1
            if word.lower() not in BASIC_WORDS:
                outside += 1
                unknown.add(word.lower())
    assert outside / total < 0.005, sorted(unknown)[:40]


def _lowercase_forms(text: str) -> list[str]:
    """The word forms of ``text`` written in lower case (names and sentence openings aside), as
    ``_words`` strips them."""
    return [word for word in _words(text) if word.islower()]


def test_vocabulary_is_simple_english_measured_on_tinystories(real_data, sample, longest):
    # The engine's vocabulary is bounded by real TinyStories text: no more lowercase word forms than 155k
    # words of TinyStories use, most of them forms that TinyStories uses, and nearly all the words of the
    # stories such forms (TinyStories itself: 95.6% of its second half's words occur in its first half).
    tinystories = real_data / "tinystories" / "tinystories_validation_head.txt"
    fixture = set(_lowercase_forms(tinystories.read_text()))
    assert len(BASIC_WORDS) <= len(fixture)
    assert sum(word in fixture for word in BASIC_WORDS) / len(BASIC_WORDS) >= 0.65
    names = {name.lower() for name in (*NAMES, *PLANTED_VALUES["names"])}
    words = [w for r in [*sample, longest] for w in _lowercase_forms(r["text"]) if w not in names]
    assert sum(word in fixture for word in words) / len(words) >= 0.94


def test_vocabulary_lists():
    assert FEATURES == ("dialogue", "plot twist", "foreshadowing", "conflict", "moral", "bad ending")
    assert len(BASIC_WORDS) >= 1400
    for words in (NOUNS, VERBS, ADJECTIVES):
        assert len(words) == len(set(words)) >= 100
        assert set(words) <= BASIC_WORDS
    assert all(w == w.lower() for w in BASIC_WORDS)


def test_grammar_slots_all_defined():
    # every {slot} of every section is a section, a value the plot sets, a companion's role value or a
    # planted fact's value and context
    world = build_world(random.Random(0), num_places=3, num_companions=1)
    plot = Plot(random.Random(0), world, FEATURES, DEFAULT_DISTANCES, DEFAULT_RECALLS_PER_THOUSAND)
    plot.go_to("the park")
    companion = {**plot.world.companions[0].slots("C"), "C_place": "the park"}
    planted = {"V", "at"} | {slot + cap for _, slot in KEYS.values() for cap in ("", "_cap")}
    known = set(plot.table) | set(plot.with_friend) | set(companion) | planted
    for name, options in {**SECTIONS, **THEME_SECTIONS, **RECALL_SECTIONS}.items():
        for option in options:
            for slot in re.findall(r"\{(\w+)\}", option):
                assert slot in known, (name, option, slot)
    assert not (set(plot.with_friend) & set(SECTIONS)), "a story value would hide a grammar section"
    with pytest.raises(ValueError):
        parse_sections("@a\nx\n@a\ny\n")


def test_synonyms_are_those_of_every_rule_tried_on_every_line():
    """The first-word index of the synonym rules skips only rules that cannot match: each bank equals the
    rules applied one by one, in order, to every line."""
    for name in ("sentences.txt", "structure.txt", "themes.txt", "recalls.txt"):
        sections = parse_sections(banks.read_data(name))
        expected = {}
        for section, options in sections.items():
            rewritten = []
            for option in options:
                for _, pattern, synonym, _ in banks._RULES:
                    option = pattern.sub("{" + synonym + "}", option)
                rewritten.append(option)
            expected[section] = tuple(rewritten)
        assert banks.with_synonyms(sections) == expected != sections, name  # and some rule applied


def test_slots_expand_recursively():
    table = {"s": ("{x} and {x}",), "x": ("a", "b")}
    slots = Slots({"name": "N"}, table, random.Random(0))
    assert "{s} {name}".format_map(slots) in {"a and a N", "a and b N", "b and a N", "b and b N"}
    assert len(PLACES) >= 15


def test_features_sampled_from_the_list():
    seen = set()
    for index in range(200):
        features = sample_features(story_rng(index, 0))
        assert set(features) <= set(FEATURES)
        seen.update(features)
    assert seen == set(FEATURES)


def test_wheel_ships_the_engine_data(tmp_path):
    """The phrase banks and word lists are package data: a wheel built from (a copy of) the checkout carries
    every data file."""
    import shutil
    import zipfile

    repo = Path(__file__).resolve().parents[2]
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    for name in ("ltsgen", "loaders", "encodings", "training"):
        shutil.copytree(repo / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(source)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = tmp_path.glob("ltsgen-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        path.relative_to(repo).as_posix()
        for folder in ("ltsgen/stories/engine/data", "ltsgen/stories/data")
        for path in (repo / folder).iterdir()
    }
    assert len(shipped) >= 5 and "ltsgen/stories/data/vocabulary.json" in shipped and shipped <= names
    assert {"ltsgen/stories/engine/story.py", "ltsgen/stories/llm/backend.py"} <= names


def test_the_32000_word_story_the_engine_docs_quote():
    """docs/story-engine.md quotes these figures of one long story; they changed with the engine once
    without the docs following."""
    from ltsgen.stories.recalls import word_index

    record = generate_story(7, seed=3, target_words=32_000)
    text, facts = record["text"], record["meta"]["facts"]
    named = {fact["name"]: fact for fact in facts}
    shown = {}
    for name in ("pet_name", "quest_colour", "hiding_place"):
        words = word_index(text, [named[name]["first"], named[name]["uses"][-1]])
        shown[name] = (words[0], len(named[name]["uses"]), words[1])
    assert shown == {
        "pet_name": (29, 333, 31_870),
        "quest_colour": (99, 87, 31_947),
        "hiding_place": (131, 1, 31_979),
    }
    planted = [fact for fact in facts if fact["planted"]]
    distances = [distance for fact in planted for distance in fact["distance_words"]]
    assert (len(planted), len(distances), sum(d >= 4_000 for d in distances), max(distances)) == (
        73,
        254,
        68,
        31_019,
    )
    doc = " ".join(
        (Path(__file__).resolve().parents[2] / "docs" / "story-engine.md").read_text("utf-8").split()
    )
    assert "the pet's name is set at word 29 and used 333 times up to word 31,870" in doc
    assert (
        "Its 73 planted facts are recalled 254 times, 68 of them from 4,000+ words back, the farthest from 31,019"
        in doc
    )
