"""Planted facts recalled at controlled distances: absent in between, distances that match the text, a cue
before every recall that only the right value answers, enough far recalls in long stories, and a distance
distribution that follows its parameters."""

from __future__ import annotations

import json
import random
import re

import pytest
from scipy.stats import kstest

from ltsgen.stories.answerable import content_words, evidence, recall_answers, value_offsets
from ltsgen.stories.engine import generate_story
from ltsgen.stories.engine.banks import PLANTED_VALUES, WORLD, bank_words
from ltsgen.stories.plan import target_words
from ltsgen.stories.recalls import (
    DEFAULT_DISTANCES,
    FAR_WORDS,
    NEAR_SHARE,
    NEAR_WORDS,
    Distances,
    occurrences,
    schedule,
    word_index,
)
from ltsgen.stories.statistics import ORACLE_EVERY, add_cued_recalls, add_story, cued_recall_table


def planted(record: dict) -> list[dict]:
    return [fact for fact in record["meta"]["facts"] if fact["planted"]]


def word_at(text: str, offset: int) -> int:
    """The index of the word holding ``offset`` (a value may start after a quote: inside its word)."""
    return len(text[:offset].split()) - (offset > 0 and not text[offset - 1].isspace())


@pytest.fixture(scope="module")
def stories() -> list[dict]:
    return [generate_story(i, 5, target_words(i, 5, 300, 12_000)) for i in range(24)]


def test_planted_value_occurs_only_at_its_plant_and_recalls(stories):
    checked = 0
    for record in stories:
        text = record["text"]
        values = [fact["value"] for fact in record["meta"]["facts"]]
        assert len(set(values)) == len(values), "every fact of a story has its own value"
        for fact in planted(record):
            assert occurrences(text, fact["value"]) == [fact["first"], *fact["uses"]], fact
            assert text.count(fact["value"]) == 1 + len(fact["uses"]), "not even inside another word"
            checked += len(fact["uses"])
    assert checked > 300


def test_recorded_distances_match_the_text(stories):
    for record in stories:
        text = record["text"]
        for fact in record["meta"]["facts"]:
            assert len(fact["distance_chars"]) == len(fact["distance_words"]) == len(fact["uses"])
            found = occurrences(text, fact["value"])
            for use, chars, words in zip(
                fact["uses"], fact["distance_chars"], fact["distance_words"], strict=True
            ):
                previous = max(offset for offset in found if offset < use)
                assert chars == use - previous
                assert words == word_at(text, use) - word_at(text, previous)
                assert text[use : use + len(fact["value"])] == fact["value"]


def test_every_recall_has_a_cue_just_before_its_value(stories):
    cued = 0
    for record in stories:
        text = record["text"]
        for fact in record["meta"]["facts"]:
            assert len(fact["cues"]) == len(fact["uses"])
            if not fact["planted"]:
                assert set(fact["cues"]) <= {None}, "the setting's uses are not scored recalls"
                continue
            for use, (start, end) in zip(fact["uses"], fact["cues"], strict=True):
                assert 0 <= start < end <= use and use - end <= 200
                cue = text[start:end]
                assert cue == cue.strip() and cue and fact["value"] not in cue
                cued += 1
    assert cued > 300


def test_no_two_planted_values_of_a_story_share_a_key(stories):
    for record in stories:
        text = record["text"]
        by_cue: dict[frozenset[str], set[str]] = {}
        for fact in planted(record):
            for start, end in fact["cues"]:
                by_cue.setdefault(content_words(text[start:end]), set()).add(fact["value"])
        assert all(len(values) == 1 for values in by_cue.values()), by_cue


def test_a_cue_names_only_words_its_plant_stated_before_the_value(stories):
    for record in stories:
        text = record["text"]
        for fact in planted(record):
            stated = content_words(evidence(text, fact["first"]))
            for start, end in fact["cues"]:
                assert content_words(text[start:end]) <= stated, (text[start:end], stated)


def test_the_lexical_oracle_answers_every_recall(stories):
    answers = [
        answer for record in stories for answer in recall_answers(record["text"], record["meta"]["facts"])
    ]
    cued = sum(len(fact["uses"]) for record in stories for fact in planted(record))
    assert len(answers) == cued > 300
    assert sum(right for *_, right in answers) == cued  # a cue only the right plant fully holds
    assert all(0 < chars <= 200 for *_, chars, _ in answers)


def test_the_oracle_needs_the_cue_to_name_the_right_value_alone():
    text = (
        "On the old gate, someone had painted the number 951. On the red door there was the number 749. "
        "Mia said the number 749 to herself. Do you remember the number on the old gate? It was 951. "
        "What was the number on the shed? It was 951. What was the number? It was 749."
    )
    facts = [
        {"value": value, "planted": True, "first": text.index(value), "uses": uses, "cues": cues}
        for value, uses, cues in (
            ("951", [], []),
            ("749", [], []),
        )
    ]
    first_cue = text.index("the number on the old gate")
    shed = text.index("the number on the shed")
    bare = text.index("the number?")
    facts[0]["uses"] = [text.index("951", first_cue), text.index("951", shed)]
    facts[0]["cues"] = [[first_cue, first_cue + 26], [shed, shed + 22]]
    facts[1]["uses"] = [text.index("749", text.index("Mia")), text.index("749", bare)]
    facts[1]["cues"] = [None, [bare, bare + 10]]
    answers = [(fact, use, right) for fact, use, _, right in recall_answers(text, facts)]
    # the gate names 951 alone; no earlier sentence names a shed; "number" alone names both values
    assert answers == [(0, 0, True), (0, 1, False), (1, 1, False)]
    assert evidence(text, text.index("749")) == "On the red door there was the number "
    assert content_words("Do you remember the number on the old gate?") == {"number", "old", "gate"}


def test_one_pass_value_search_finds_what_the_search_of_each_value_finds(stories):
    text = 'Zeedle, Zee and "Zee." red door, red doorbell; é-Zee漢 Zeedles aaa a-a x1 x12\nZee'
    values = {"Zee", "Zeedle", "red", "red door", "door", "a", "aa", "漢", "é", "x1", "1", ""}
    found = value_offsets(text, values)
    assert found == {value: occurrences(text, value) for value in values if value} | {"": []}
    assert found["Zee"] == [8, 17, len(text) - 3]  # not before "漢", a letter
    assert found["red door"] == [23] and found["a"] == [66, 68] and found["aa"] == []
    for record in stories[:6]:
        planted_values = {fact["value"] for fact in record["meta"]["facts"]}
        assert value_offsets(record["text"], planted_values) == {
            value: occurrences(record["text"], value) for value in planted_values
        }


def test_evidence_starts_after_the_last_sentence_end():
    text = 'He said, "Go." Then she ran! Is it? "Yes!” The\nold gate with the 951'
    assert evidence(text, len(text) - 3) == "old gate with the "
    assert evidence(text, text.index("The")) == ""
    assert evidence(text, text.index("Yes")) == '"'
    assert evidence(text, text.index("ran")) == "Then she "
    assert evidence("x" * 300, 250) == "x" * 200


def test_recalls_read_as_story_text(stories):
    record = stories[3]
    text = record["text"]
    for fact in planted(record)[:10]:
        for offset in (fact["first"], *fact["uses"]):
            start = max(text.rfind(". ", 0, offset), text.rfind("\n", 0, offset)) + 1
            sentence = text[start : text.find(".", offset + len(fact["value"])) + 1].strip()
            assert 4 <= len(sentence.split()) <= 40 and sentence[0].isupper() or sentence[0] == '"', sentence


def test_planted_values_are_words_no_other_sentence_can_write():
    taken = bank_words()
    for pool in ("names", "objects"):
        assert PLANTED_VALUES[pool] and not {value.lower() for value in PLANTED_VALUES[pool]} & taken
    assert PLANTED_VALUES["objects"] == WORLD["planted"]["objects"], "every listed object is usable"
    assert len(PLANTED_VALUES["names"]) >= 300 and not re.search(r"\d", " ".join(taken))
    assert min(int(n) for n in PLANTED_VALUES["numbers"]) > 99  # chapter numbers never reach 100


@pytest.mark.parametrize(
    ("index", "target"), [(0, 16_000), (1, 16_000), (2, 20_000), (3, 32_000), (4, 24_000)]
)
def test_long_stories_hold_twenty_recalls_from_4000_words_back(index, target):
    record = generate_story(index, 11, target)
    assert record["num_words"] >= 16_000 * 0.95
    far = sum(words >= 4000 for fact in record["meta"]["facts"] for words in fact["distance_words"])
    assert far >= 20, far


def test_word_index_counts_like_split():
    text = generate_story(2, 0, 3000)["text"]
    offsets = sorted(random.Random(1).sample([m.start() for m in re.finditer(r"\S+", text)], 50))
    assert word_index(text, offsets) == [word_at(text, offset) for offset in offsets]
    inside = [offset + 1 for offset in offsets if not text[offset + 1].isspace()]
    assert word_index(text, inside) == [word_at(text, offset) for offset in inside]
    odd = "  One\ttwo  three\n\nfour\nfive"
    offsets = [m.start() for m in re.finditer(r"\S+", odd)]
    assert word_index(odd, offsets) == [0, 1, 2, 3, 4]


def test_distances_parse_and_bounds():
    assert Distances.parse("log-uniform:100:length") == Distances("log-uniform", 100, None)
    assert str(Distances.parse("uniform:500:4000")) == "uniform:500:4000"
    assert Distances() == Distances.parse("mixed:10:length") == DEFAULT_DISTANCES
    assert Distances("log-uniform", 100).bounds(8000) == (100, 8000)
    assert Distances("log-uniform", 100).bounds(60) is None and Distances().bounds(9) is None
    assert Distances.parse("log-uniform:3:40").bounds(100) == (3, 40)
    assert Distances("uniform", 200, 1000).bounds(5000) == (200, 1000)
    for bad in ("log-uniform:100", "normal:1:2", "uniform:x:9", "uniform:50:10", "uniform:0:10", "mixed:10"):
        with pytest.raises(ValueError):
            Distances.parse(bad)


def test_schedule_fits_the_span_and_draws_stratified():
    rng = random.Random(3)
    distances = Distances("log-uniform", 100)
    chains, bounds = schedule(rng, distances, 200, 10_200, 6.0)
    gaps = sorted(gap for chain in chains for gap in chain.gaps)
    assert bounds == (100, 10_000) and len(gaps) == 60
    for chain in chains:
        assert 200 <= chain.start and chain.positions[-1] <= 10_200
    # one gap in each of the 60 equal-probability strata of log-uniform(100, 10,000)
    strata = sorted(int(60 * distances.cdf(gap, 100, 10_000)) for gap in gaps)
    assert max(abs(stratum - k) for k, stratum in enumerate(strata)) <= 1  # gaps are rounded to words


@pytest.mark.parametrize("spec", ["log-uniform:100:length", "uniform:200:3000"])
def test_recall_distances_follow_their_distribution(spec):
    distances = Distances.parse(spec)
    cdf, wrong = [], []
    other = Distances(
        "uniform" if distances.kind == "log-uniform" else "log-uniform", distances.low, distances.high
    )
    for index in range(160):
        record = generate_story(index, 0, target_words(index, 0, 300, 6000), distances=distances)
        recalls = record["meta"]["recalls"]
        assert recalls["distances"] == spec
        if recalls["bounds"] is None:
            continue
        for fact in planted(record):
            cdf += [distances.cdf(words, *recalls["bounds"]) for words in fact["distance_words"]]
            wrong += [other.cdf(words, *recalls["bounds"]) for words in fact["distance_words"]]
    assert len(cdf) > 1200
    assert kstest(cdf, "uniform").statistic < 0.04  # realised distances: a sentence or so off the plan
    assert kstest(wrong, "uniform").statistic > 0.15  # and the test tells the two distributions apart


def test_mixed_distances_put_a_share_near_and_the_rest_far():
    mixed = Distances.parse("mixed:10:length")
    assert mixed.parts(10, 8000) == [
        (NEAR_SHARE, "log-uniform", 10, 40),
        (1 - NEAR_SHARE, "log-uniform", 100, 8000),
    ]
    assert mixed.parts(10, 60) == [(1.0, "log-uniform", 10, 40)]  # no room for far ones
    assert mixed.parts(50, 80) == [(1.0, "log-uniform", 50, 80)]  # between the two ranges
    for u in (0.0, 0.1, NEAR_SHARE, 0.5, 0.9, 1.0):
        assert mixed.cdf(mixed.quantile(u, 10, 8000), 10, 8000) == pytest.approx(u)
    assert mixed.cdf(70, 10, 8000) == pytest.approx(NEAR_SHARE)  # nothing between 40 and 100 words


def test_mixed_recall_distances_follow_their_distribution():
    # the far ones follow log-uniform from 100 words to the span; the near ones come a sentence or two
    # after the value, so their share is tested, not their shape
    far, wrong, near, total = [], [], 0, 0
    for index in range(160):
        record = generate_story(index, 0, target_words(index, 0, 300, 6000))
        bounds = record["meta"]["recalls"]["bounds"]
        if bounds is None:
            continue
        part = Distances("log-uniform", FAR_WORDS, bounds[1])
        other = Distances("uniform", FAR_WORDS, bounds[1])
        for fact in planted(record):
            for words in fact["distance_words"]:
                total += 1
                if words < FAR_WORDS:
                    near += 1
                elif bounds[1] > FAR_WORDS:
                    far.append(part.cdf(words, FAR_WORDS, bounds[1]))
                    wrong.append(other.cdf(words, FAR_WORDS, bounds[1]))
    assert len(far) > 1200 and abs(near / total - NEAR_SHARE) < 0.04, (near, total)
    assert kstest(far, "uniform").statistic < 0.04
    assert kstest(wrong, "uniform").statistic > 0.15


def test_short_training_windows_hold_cued_recalls_with_their_plant():
    # about a fifth of the recalls come within 40 words of the value's previous occurrence, so that the
    # previous occurrence, the cue and the value fit in a training window of 64 tokens
    near = total = 0
    for index in range(40):
        record = generate_story(index, 2, target_words(index, 2, 300, 3000))
        text = record["text"]
        for fact in planted(record):
            for words, use, (start, _) in zip(
                fact["distance_words"], fact["uses"], fact["cues"], strict=True
            ):
                total += 1
                if words <= NEAR_WORDS:
                    near += 1
                    previous = max(offset for offset in occurrences(text, fact["value"]) if offset < use)
                    assert previous < start and len(text[previous:use].split()) <= NEAR_WORDS + 1
    assert total > 250 and near > total / 6, (near, total)


def test_the_card_counts_cued_recalls_by_distance(stories):
    stats: dict = {}
    for record in stories[:6]:
        add_cued_recalls(stats, record)
    total = sum(len(fact["uses"]) for record in stories[:6] for fact in planted(record))
    near = sum(w < 40 for record in stories[:6] for fact in planted(record) for w in fact["distance_words"])
    # a copy whose first recall lost its cue, and whose second has a cue that names nothing
    record = json.loads(
        json.dumps(next(r for r in stories[6:] if any(len(f["uses"]) > 1 for f in planted(r))))
    )
    fact = next(fact for fact in planted(record) if len(fact["uses"]) > 1)
    start = fact["cues"][1][0]
    fact["cues"][:2] = [None, [start, start + 1]]
    add_cued_recalls(stats, record)
    rows = {row[0]: row[1:] for row in cued_recall_table(stats)["rows"]}
    cued = total + sum(len(fact["uses"]) for fact in planted(record)) - 1
    assert rows["all"] == [cued, cued, cued - 1, f"{100 * (cued - 1) / cued:.1f}%"]
    assert rows["0-40"][0] >= near > 0 and sum(rows[label][0] for label in rows if "-" in label[:-1]) == cued
    assert rows["uses of planted facts without a cue (not scored)"][:2] == [1, "-"]
    # a story the oracle does not read adds to the cued recalls alone, by the same bins
    unread: dict = {}
    add_cued_recalls(unread, stories[0], oracle=False)
    read: dict = {}
    add_cued_recalls(read, stories[0])
    assert unread["cued_recalls"] == read["cued_recalls"] and "oracle_recalls" not in unread
    assert sum(read["oracle_recalls"].values()) == sum(read["cued_recalls"].values())


def test_the_oracle_reads_one_story_in_four_by_index(stories):
    stats: dict = {}
    for index, record in enumerate(stories[:8]):
        add_story(stats, record, index, {"A sentence.": 1})
    rows = {row[0]: row[1:] for row in cued_recall_table(stats)["rows"]}
    cued = [
        sum(cue is not None for fact in planted(record) for cue in fact["cues"]) for record in stories[:8]
    ]
    read = sum(
        len(recall_answers(record["text"], record["meta"]["facts"])) for record in stories[:8:ORACLE_EVERY]
    )
    assert ORACLE_EVERY == 4 and rows["all"][:2] == [sum(cued), read] and 0 < read < sum(cued)


def test_far_recalls_of_long_stories_count_planted_facts_alone():
    """The setting's later uses (a pet named again 5,000 words on) have no cue: they are no recalls."""
    facts = [
        {"name": "pet_name", "planted": False, "uses": [5100], "distance_words": [5000], "cues": [None]},
        {"name": "p1", "planted": True, "uses": [4600, 9000], "distance_words": [4500, 4400], "cues": [[4590, 4599], [8990, 8999]]},
        {"name": "p2", "planted": True, "uses": [150], "distance_words": [100], "cues": [[140, 149]]},
    ]  # fmt: skip
    record = {"num_words": 20_000, "text": "", "meta": {"facts": facts}}
    stats: dict = {}
    add_story(stats, record, 1, {"A sentence.": 1})
    assert stats["far_recalls_of_long_stories"] == {"2": 1}  # p1's two, not the pet's
