"""Cued recalls: exact recalls and controls on hand-built records, value tokens at their boundaries, scores
from given predictions, and the contract's bad input."""

from __future__ import annotations

import re

import pytest
import torch

from ltsgen.tokenizer import train_tokenizer
from ltsgen.training.errors import TrainingError
from ltsgen.training.recall import (
    answered,
    bin_label,
    distance_bin,
    document_recalls,
    occurrences,
    planted_facts,
    recall_scores,
    recall_set,
    substitute,
    top1_correct,
    value_pool,
    value_tokens,
    window_set,
)

VOCAB: dict[str, int] = {}


def word_encode(text: str) -> tuple[list[int], list[tuple[int, int]]]:
    """One token per word, with the space before it (as a byte-level BPE's 'Ġword'); ids from a shared vocab."""
    pieces = list(re.finditer(r"\s?\S+", text))
    ids = [VOCAB.setdefault(m.group(), len(VOCAB) + 1) for m in pieces]
    return ids, [(m.start(), m.end()) for m in pieces]


def planted(text: str, name: str, value: str, cued: list[bool]) -> dict:
    """A fact whose value is first stated at its first occurrence; each later one a use, cued or not."""
    at = occurrences(text, value)
    cues = [[u - 12, u - 1] if c else None for u, c in zip(at[1:], cued, strict=True)]
    return {"name": name, "value": value, "planted": True, "first": at[0], "uses": at[1:], "cues": cues}


GARDEN = (
    "At the garden Dora made up a secret word : Zeekin . She ran . "
    "The secret word from the garden was Zeekin . The dog slept . "
    "She said Zeekin to the cat . Then the secret word from the garden was Zeekin ."
)
OTHER = "By the river Ezio made up a secret word : Tobory . Later the secret word from the river was Tobory ."


def test_recalls_and_controls_of_hand_built_records_are_exact():
    records = [("garden", GARDEN, {"facts": [planted(GARDEN, "secret word", "Zeekin", [True, False, True])]}),
               ("river", OTHER, {"facts": [planted(OTHER, "secret word", "Tobory", [True]),
                                           {"name": "pet name", "value": "Bobo", "first": 0, "uses": [3]}]})]  # fmt: skip
    pool = value_pool({name: meta for name, _, meta in records})
    assert pool == {"secret word": ["Tobory", "Zeekin"]}  # the fact without cues is not scored
    garden = document_recalls("garden", GARDEN, records[0][2], word_encode, pool, 100)
    ids, _ = word_encode(GARDEN)
    words = GARDEN.split(" ")
    positions = [i for i, w in enumerate(words) if w == "Zeekin"]
    assert positions == [10, 22, 30, 43]
    # two cued recalls (the third use is uncued): one control round each
    assert [(r.start, r.end, r.distance, r.control_row) for r in garden.recalls] == [
        (22, 23, 12, 0),
        (43, 44, 13, 1),
    ]
    assert len(garden.controls) == 2 and garden.without_control == []
    for recall, control in zip(garden.recalls, garden.controls, strict=True):
        before = " ".join(str(t) for t in control[: recall.control_start])
        assert str(VOCAB[" Zeekin"]) not in before.split(" ")  # the context no longer holds the value
        assert control[recall.control_start : recall.control_end] == ids[recall.start : recall.end]
        assert control.count(VOCAB[" Tobory"]) == len([p for p in positions if p < recall.start])
    assert control[: positions[0]] == ids[: positions[0]]  # before the first occurrence: the same text
    # the uncued mention at 30 is replaced in the second round (it comes before the recall at 43)
    assert garden.controls[1][30] == VOCAB[" Tobory"] and garden.controls[0][30] == VOCAB[" Zeekin"]
    # within 30 tokens only the first recall; its control row is renumbered per set
    river = document_recalls("river", OTHER, records[1][2], word_encode, pool, 100)
    assert [(r.start, r.distance) for r in river.recalls] == [(20, 10)]
    short = recall_set([garden, river], 30)
    assert [(r.row, r.start, r.control_row) for r in short.recalls] == [(0, 22, 0), (1, 20, 1)]
    assert short.control_ids.shape == (2, 30) and short.without_control == 0
    assert recall_set([garden, river], 100).control_ids.shape == (3, 100)


def test_windows_hold_the_recall_and_its_earlier_occurrence():
    meta = {"facts": [planted(GARDEN, "secret word", "Zeekin", [True, False, True])]}
    other = {"facts": [planted(OTHER, "secret word", "Tobory", [True])]}
    pool = value_pool({"garden": meta, "river": other})
    garden = recall_set([document_recalls("garden", GARDEN, meta, word_encode, pool, 100)], 100)
    ids = torch.tensor([word_encode(GARDEN)[0] + [0] * (100 - 60)])[:, :100]
    wide = window_set(garden, ids, 15)  # recalls at 22 (earlier at 10) and 43 (earlier at 30)
    assert [(r.row, r.start, r.end, r.distance) for r in wide.recalls.recalls] == [
        (0, 14, 15, 12),
        (1, 14, 15, 13),
    ]
    assert wide.input_ids.tolist() == [ids[0, 8:23].tolist(), ids[0, 29:44].tolist()] and wide.documents == [
        0,
        0,
    ]
    for control in wide.recalls.control_ids:
        assert control[-1] == VOCAB[" Zeekin"] and VOCAB[" Zeekin"] not in control[:-1].tolist()
    narrow = window_set(garden, ids, 13)  # the second recall's earlier occurrence falls out of its window
    assert [(r.start, r.distance) for r in narrow.recalls.recalls] == [(12, 12)]
    assert window_set(garden, ids, 5).input_ids.shape == (0, 5)


def test_a_recall_without_a_substitute_is_counted_not_scored():
    meta = {"facts": [planted(OTHER, "secret word", "Tobory", [True])]}
    alone = document_recalls("river", OTHER, meta, word_encode, value_pool({"river": meta}), 100)
    assert alone.recalls == [] and alone.without_control == [21] and alone.controls == []
    assert recall_set([alone], 100).without_control == 1 and recall_set([alone], 20).without_control == 0
    # a substitute the story already contains is no substitute
    text = OTHER + " Zeekin is a word too ."
    other = {"facts": [planted(GARDEN, "secret word", "Zeekin", [True, False, True])]}
    pool = value_pool({"river": meta, "garden": other})
    assert document_recalls("river", text, meta, word_encode, pool, 100).without_control == [21]


def test_a_substitute_is_a_value_the_text_holds_in_no_case_ascii_or_not():
    pool = {"name": ["Anna", "Bo", "Cara", "Dot", "Ève", "Kim"]}
    for text in (
        "anna and BO went out. Cara's cat.",
        "Ève and ANNA and bo. Dotty met kIM.",
        "Eve met a Dot and Annabel.",
    ):
        expected = [v for v in pool["name"] if v != "Kim" and not occurrences(text, v)]  # the regex alone
        picked = {substitute(text, "Kim", "name", pool, key) for key in map(str, range(200))}
        assert picked == set(expected) or (not expected and picked == {None}), (text, picked)


def test_value_tokens_include_tokens_that_span_the_value_boundary():
    # text "ab Zeekin. x": tokens "ab", " Zee", "kin.", " x" (one holds the space, one the full stop)
    offsets = [(0, 2), (2, 6), (6, 10), (10, 12)]
    assert value_tokens(offsets, 3, 9) == (1, 3)
    assert value_tokens(offsets, 10, 12) == (3, 4)  # the token exactly
    assert value_tokens(offsets, 0, 1) == (0, 1)
    # a real byte-level BPE: the token before the value holds its space, the value's last piece may hold the stop
    tokenizer = train_tokenizer(["It was Zeekin. It was Zeekin. The word was Tobory."] * 20, vocab_size=280)
    text = "The word was Zeekin."
    encoding = tokenizer.encode(text, add_special_tokens=False)
    first, stop = value_tokens(encoding.offsets, text.index("Zeekin"), len(text) - 1)
    assert tokenizer.decode(encoding.ids[first:stop]).strip().startswith("Zeekin")
    assert encoding.offsets[first][0] < text.index("Zeekin") and stop <= len(encoding.ids)
    assert all(encoding.offsets[i][1] <= text.index("Zeekin") for i in range(first))
    assert stop == len(encoding.ids) or encoding.offsets[stop][0] >= len(text) - 1


def test_scores_from_given_logits_every_value_token_counts():
    ids = torch.tensor([[5, 6, 7, 8, 9, 3], [1, 2, 3, 4, 5, 6]])
    logits = torch.zeros(2, 5, 10)
    predicted = torch.tensor([[6, 7, 0, 9, 3], [2, 3, 4, 0, 6]])  # row 0 misses token 3, row 1 token 4
    logits.scatter_(2, predicted[..., None], 1.0)
    correct = top1_correct(logits, ids)
    assert correct.tolist() == [[True, True, False, True, True], [True, True, True, False, True]]
    spans = [(0, 1, 3), (0, 2, 4), (0, 4, 6), (1, 3, 5), (1, 1, 4)]
    assert answered(correct, spans) == [True, False, True, False, True]


def test_recall_scores_count_exactly_by_distance_bin():
    from ltsgen.training.recall import Recall, RecallSet

    recalls = [Recall(0, 5, 6, 4, 0, 5, 6), Recall(0, 9, 11, 8, 0, 9, 11), Recall(1, 30, 31, 20, 1, 30, 31),
               Recall(1, 40, 41, 40, 1, 41, 42)]  # fmt: skip
    correct = torch.zeros(2, 49, dtype=torch.bool)
    control = torch.zeros(2, 49, dtype=torch.bool)
    correct[0, 4] = correct[0, 8] = correct[0, 9] = correct[1, 29] = True  # three answered, the far one not
    control[0, 4] = control[1, 40] = True  # the near one answered without context too, and the far one
    scores = recall_scores(RecallSet(recalls, torch.zeros(2, 50, dtype=torch.long), 1), correct, control, 8)
    assert scores["recall_accuracy"] == 0.75 and scores["recall_accuracy_control"] == 0.5
    assert scores["recall_count"] == 4 and scores["recall_without_control"] == 1
    assert [(b["bin"], b["distance_lo"], b["distance_hi"], b["hits"], b["hits_control"], b["count"])
            for b in scores["recalls"]] == [("<=T", 1, 8, 2, 1, 2), ("2T-4T", 17, 32, 1, 0, 1),
                                            ("4T-8T", 33, 64, 0, 1, 1)]  # fmt: skip
    assert scores["per_document"] == {"recall_accuracy": [1.0, 0.5], "recall_accuracy_control": [0.5, 0.5]}
    empty = recall_scores(RecallSet([], torch.zeros(0, 50, dtype=torch.long), 0), correct, control[:0], 8)
    assert empty["recall_accuracy"] is None and empty["recall_count"] == 0 and empty["recalls"] == []
    assert empty["per_document"]["recall_accuracy"] == [None, None]
    assert [distance_bin(d, 64) for d in (1, 64, 65, 128, 129, 256, 257)] == [0, 0, 1, 1, 2, 2, 3]
    assert [bin_label(i) for i in range(4)] == ["<=T", "T-2T", "2T-4T", "4T-8T"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"cues": [[0, 3]]}, "has 1 cues for 2 uses"),
        ({"cues": [[0, 3], [40, 90]]}, "has a cue that is not a [start, end] span before its use"),
        ({"cues": [[0, 3], 7]}, "has a cue that is not a [start, end] span before its use"),
        ({"value": ""}, "has no name or no value"),
    ],
)
def test_a_fact_that_breaks_the_cue_contract_is_named(change, message):
    fact = {"name": "secret word", "value": "Zeekin", "first": 0, "uses": [20, 50], "cues": [None, [30, 40]]}
    assert planted_facts({"facts": [fact]}, "here") == [fact]
    with pytest.raises(TrainingError, match=re.escape(f"here: meta facts[0] ('secret word') {message}")):
        planted_facts({"facts": [{**fact, **change}]}, "here")
