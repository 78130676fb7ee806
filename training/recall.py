"""Cued recalls: which tokens answer them, their controls, and how a model scores on both.

A planted fact in ``meta["facts"]`` records its kind (``name``), ``value``, ``first`` and ``uses`` (character
offsets of the value) and ``cues``, aligned with ``uses``: the ``[start, end]`` span of the cue before a
use, or null for a mention that is not a scored recall. A cued recall is answered when every token that
holds a character of the value is the model's top-1 prediction under teacher forcing (a token that also
holds the space before the value, or the punctuation after it, counts as a value token).

Its control is the same text with every earlier occurrence of the value (recorded or not, word-bounded, any
case) replaced by another value of the same kind, taken from the other evaluation documents and absent from
this one: the context no longer holds the answer, the cue and the recall itself are unchanged. A document
whose facts are recalled several times gets one control sequence per round: round r keeps the r-th cued
recall of every fact and replaces its fact's occurrences before it. Accuracy minus control accuracy is what
the model read from the context. A recall is scored only when it lies within the evaluation length in both
sequences and its value tokens are the same in both; the others are counted as ``recall_without_control``.

Distances are in tokens, from the first token of the value's nearest earlier occurrence to the recall's
first value token, binned by the training length T: within T, (T, 2T], (2T, 4T], ... ``window_set`` also
reads each recall in its own T-token window that ends at the value and holds that earlier occurrence: the
skill as trained, at positions every encoding has seen.
"""

from __future__ import annotations

import bisect
import re
import zlib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ltsgen.training.errors import TrainingError

#: Encodes a text into ``(token ids, character offsets)``.
Encode = Callable[[str], tuple[list[int], list[tuple[int, int]]]]


@dataclass(frozen=True)
class Recall:
    """One cued recall of one sequence: value tokens ``[start, end)`` of row ``row``, and the same value
    tokens at ``[control_start, control_end)`` of control row ``control_row``."""

    row: int
    start: int
    end: int
    distance: int
    control_row: int
    control_start: int
    control_end: int


@dataclass
class DocumentRecalls:
    """The cued recalls of one document (``row`` fields are 0) and its control sequences, one per round."""

    recalls: list[Recall]
    controls: list[list[int]]
    without_control: list[int]  # end token of each cued recall that could not be controlled


@dataclass
class RecallSet:
    """The cued recalls of an evaluation set at one length and the control sequences ``[M, L]`` they read."""

    recalls: list[Recall]
    control_ids: torch.Tensor
    without_control: int


def planted_facts(meta: Any, where: str) -> list[dict[str, Any]]:
    """The facts of ``meta`` that carry ``cues``, checked against the contract."""
    facts = meta.get("facts") if isinstance(meta, dict) else None
    found = []
    for index, fact in enumerate(facts or []):
        if not isinstance(fact, dict) or fact.get("cues") is None:
            continue
        uses, cues = fact.get("uses") or [], fact["cues"]
        problem = None
        if not fact.get("value") or not fact.get("name"):
            problem = "has no name or no value"
        elif not isinstance(cues, list) or len(cues) != len(uses):
            problem = f"has {len(cues) if isinstance(cues, list) else 'no list of'} cues for {len(uses)} uses"
        elif not all(c is None or _span_before(c, u) for c, u in zip(cues, uses, strict=True)):
            problem = "has a cue that is not a [start, end] span before its use"
        if problem:
            raise TrainingError(f"{where}: meta facts[{index}] ({fact.get('name')!r}) {problem}")
        found.append(fact)
    return found


def _span_before(cue: Any, use: int) -> bool:
    return (
        isinstance(cue, list)
        and len(cue) == 2
        and all(isinstance(c, int) for c in cue)
        and cue[0] <= cue[1] <= use
    )


def value_pool(metas: dict[str, Any]) -> dict[str, list[str]]:
    """Every kind's distinct values over the documents (``metas`` by record id), sorted: where controls take
    their substitutes."""
    pool: dict[str, set[str]] = defaultdict(set)
    for record_id, meta in metas.items():
        for fact in planted_facts(meta, f"record {record_id}"):
            pool[str(fact["name"])].add(str(fact["value"]))
    return {kind: sorted(values) for kind, values in pool.items()}


def occurrences(text: str, value: str) -> list[int]:
    """Start offsets of ``value`` in ``text``, word-bounded and in any case."""
    return [m.start() for m in re.finditer(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE)]


def value_tokens(offsets: Sequence[tuple[int, int]], start: int, end: int) -> tuple[int, int]:
    """``[first, stop)``: the tokens that hold a character of ``text[start:end]``."""
    first = bisect.bisect_right([e for _, e in offsets], start)
    stop = first
    while stop < len(offsets) and offsets[stop][0] < end:
        stop += 1
    return first, stop


def substitute(text: str, value: str, kind: str, pool: dict[str, list[str]], key: str) -> str | None:
    """Another value of ``kind`` that ``text`` does not contain, picked by ``key`` (stable across runs)."""
    lowered = text.lower() if text.isascii() else None
    candidates = [
        v for v in pool.get(kind, []) if v.lower() != value.lower() and not _occurs(text, lowered, v)
    ]
    if not candidates:
        return None
    return candidates[zlib.crc32(f"{key}\0{value}".encode()) % len(candidates)]


def _occurs(text: str, lowered: str | None, value: str) -> bool:
    """Whether ``value`` occurs in ``text`` (``occurrences``). ``lowered``: ``text.lower()`` when ``text`` is
    ASCII, where an ASCII value that is not a substring of it occurs nowhere, in any case (a quick test that
    spares the regular expression's scan of the whole text for most values)."""
    if lowered is not None and value.isascii() and value.lower() not in lowered:
        return False
    return bool(occurrences(text, value))


def document_recalls(
    record_id: str, text: str, meta: Any, encode: Encode, pool: dict[str, list[str]], limit: int
) -> DocumentRecalls:
    """The cued recalls of one document within its first ``limit`` tokens, and their control sequences."""
    ids, offsets = encode(text)
    rounds: list[list[tuple[dict[str, Any], int, str | None]]] = []  # per round: (fact, use, substitute)
    for fact in planted_facts(meta, f"record {record_id}"):
        value = str(fact["value"])
        other = substitute(text, value, str(fact["name"]), pool, record_id)
        cued = [use for use, cue in zip(fact["uses"], fact["cues"], strict=True) if cue is not None]
        for number, use in enumerate(u for u in cued if value_tokens(offsets, u, u + len(value))[1] <= limit):
            if number == len(rounds):
                rounds.append([])
            rounds[number].append((fact, int(use), other))
    found = DocumentRecalls([], [], [])
    for members in rounds:
        _control_round(text, ids, offsets, members, encode, limit, found)
    return found


def _control_round(text, ids, offsets, members, encode: Encode, limit: int, found: DocumentRecalls) -> None:
    """Add one control sequence (its facts' earlier occurrences replaced) and the recalls it controls."""
    edits: list[tuple[int, int, str]] = []
    for fact, use, other in members:
        if other is not None:
            value = str(fact["value"])
            edits += [
                (at, at + len(value), other) for at in occurrences(text, value) if at + len(value) <= use
            ]
    edits.sort()
    pieces, last = [], 0
    for start, end, other in edits:
        pieces += [text[last:start], other]
        last = end
    control_ids, control_offsets = encode("".join(pieces) + text[last:])
    row = len(found.controls)
    kept = False
    for fact, use, other in members:
        value = str(fact["value"])
        start, end = value_tokens(offsets, use, use + len(value))
        earlier = [at for at in occurrences(text, value) + [int(fact["first"])] if at < use]
        if start == 0 or not earlier:
            continue
        shift = sum(len(o) - (e - s) for s, e, o in edits if e <= use)
        c_start, c_end = value_tokens(control_offsets, use + shift, use + shift + len(value))
        if other is None or c_end > limit or control_ids[c_start:c_end] != ids[start:end]:
            found.without_control.append(end)
            continue
        nearest = value_tokens(offsets, max(earlier), max(earlier) + 1)[0]
        found.recalls.append(Recall(0, start, end, start - nearest, row, c_start, c_end))
        kept = True
    if kept:
        padded = control_ids[:limit] + [0] * (limit - len(control_ids))  # after every scored token
        found.controls.append(padded)


def recall_set(documents: Sequence[DocumentRecalls], length: int) -> RecallSet:
    """The recalls of documents (row i = document i) within ``length`` tokens, with their control rows."""
    recalls, rows, without = [], [], 0
    for row, document in enumerate(documents):
        without += sum(end <= length for end in document.without_control)
        inside = [r for r in document.recalls if r.end <= length and r.control_end <= length]
        renumber = {}
        for recall in inside:
            if recall.control_row not in renumber:
                renumber[recall.control_row] = len(rows)
                rows.append(document.controls[recall.control_row][:length])
            recalls.append(
                Recall(
                    row,
                    recall.start,
                    recall.end,
                    recall.distance,
                    renumber[recall.control_row],
                    recall.control_start,
                    recall.control_end,
                )  # fmt: skip
            )
    control_ids = torch.tensor(rows, dtype=torch.long) if rows else torch.zeros(0, length, dtype=torch.long)
    return RecallSet(recalls, control_ids, without)


@dataclass
class WindowSet:
    """Cued recalls read as in training: each in its own ``T``-token window ``input_ids`` [M, T] that ends at
    its value and holds the value's nearest earlier occurrence; ``recalls.control_ids`` the same windows of
    the controls; ``documents[m]`` the evaluation document of window m."""

    input_ids: torch.Tensor
    recalls: RecallSet
    documents: list[int]


def window_set(recalls: RecallSet, input_ids: torch.Tensor, window: int) -> WindowSet:
    """The recalls of ``recalls`` (read from ``input_ids``) whose value and nearest earlier occurrence fit in
    the ``window`` tokens that end at the value, each cut out with its control."""
    rows, controls, found, documents = [], [], [], []
    for r in recalls.recalls:
        start, control_start = r.end - window, r.control_end - window
        if start < 0 or control_start < 0 or r.start - r.distance < start:
            continue
        rows.append(input_ids[r.row, start : r.end])
        controls.append(recalls.control_ids[r.control_row, control_start : r.control_end])
        index = len(found)
        found.append(
            Recall(index, r.start - start, window, r.distance, index, r.control_start - control_start, window)
        )
        documents.append(r.row)
    empty = torch.zeros(0, window, dtype=torch.long)
    stacked = (torch.stack(rows), torch.stack(controls)) if rows else (empty, empty)
    return WindowSet(stacked[0], RecallSet(found, stacked[1], 0), documents)


# --------------------------------------------------------------------------------------------------
# scoring


def top1_correct(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """``[N, L-1]``: whether the top-1 prediction from position p is the token at p + 1 (``logits`` are
    ``[N, L-1, V]``, the model's output on ``ids[:, :-1]``)."""
    return logits.argmax(dim=-1) == ids[:, 1:]


def answered(correct: torch.Tensor, spans: Sequence[tuple[int, int, int]]) -> list[bool]:
    """For each ``(row, start, end)``: whether every token in ``[start, end)`` of that row was predicted."""
    return [bool(correct[row, start - 1 : end - 1].all()) for row, start, end in spans]


def recall_scores(
    recalls: RecallSet,
    correct: torch.Tensor,
    control_correct: torch.Tensor,
    train_length: int,
    documents: Sequence[int] | None = None,
    n_documents: int | None = None,
) -> dict[str, Any]:
    """``recall_accuracy``, ``recall_accuracy_control``, ``recall_count``, ``recall_without_control``,
    ``recalls``: the same by distance bin (within T, (T, 2T], (2T, 4T], ...; occupied bins only), and
    ``per_document``: both accuracies of each sequence (None for one without a scored recall; with
    ``documents``, row m of ``correct`` belongs to document ``documents[m]`` of ``n_documents``)."""
    hits = answered(correct, [(r.row, r.start, r.end) for r in recalls.recalls])
    controls = answered(
        control_correct, [(r.control_row, r.control_start, r.control_end) for r in recalls.recalls]
    )
    bins: dict[int, list[tuple[bool, bool]]] = defaultdict(list)
    for recall, hit, control in zip(recalls.recalls, hits, controls, strict=True):
        bins[distance_bin(recall.distance, train_length)].append((hit, control))
    count = len(hits)
    by_document: list[list[tuple[bool, bool]]] = [[] for _ in range(n_documents or correct.shape[0])]
    for recall, hit, control in zip(recalls.recalls, hits, controls, strict=True):
        by_document[recall.row if documents is None else documents[recall.row]].append((hit, control))
    return {
        "recall_accuracy": sum(hits) / count if count else None,
        "recall_accuracy_control": sum(controls) / count if count else None,
        "recall_count": count,
        "recall_without_control": recalls.without_control,
        "recalls": [
            {
                "bin": bin_label(index),
                "distance_lo": 1 if index == 0 else train_length * 2 ** (index - 1) + 1,
                "distance_hi": train_length * 2**index,
                "count": len(members),
                "accuracy": sum(h for h, _ in members) / len(members),
                "accuracy_control": sum(c for _, c in members) / len(members),
                "hits": sum(h for h, _ in members),
                "hits_control": sum(c for _, c in members),
            }
            for index, members in sorted(bins.items())
        ],
        "per_document": {
            f"recall_accuracy{suffix}": [sum(p[k] for p in d) / len(d) if d else None for d in by_document]
            for k, suffix in ((0, ""), (1, "_control"))
        },
    }


def distance_bin(distance: int, train_length: int) -> int:
    """0 within the training length T, then k for (T 2^(k-1), T 2^k]."""
    index, high = 0, train_length
    while distance > high:
        index, high = index + 1, high * 2
    return index


def bin_label(index: int) -> str:
    """``<=T``, ``T-2T``, ``2T-4T``, ..."""
    if index == 0:
        return "<=T"
    low = "T" if index == 1 else f"{2 ** (index - 1)}T"
    return f"{low}-{2**index}T"
