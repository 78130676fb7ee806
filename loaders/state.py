"""A loader state, checked field by field before it moves a dataset, and the identity of what it resumes.

A state is small JSON-ready data: where the epoch stands (seed, epoch, samples consumed, the item inside
a batch, the worker rotation's anchor), the batch sizes it was taken with, and ``identity``: what it
resumes (the dataset's shards and options, the sha256 of the tokenizer that tokenizes on the fly,
``seq_len``, and ``mixture`` for a mixture of datasets). ``identity`` is a flat dict that can grow: a key
absent from one side compares as None. Anything else in a state, or a field of the wrong type or range,
is a ``LoaderError`` that names the field; a state is never applied in part. A state of the released format
``ltsgen.loaders/1`` (a ``fingerprint`` where ``identity`` is now) resumes the one dataset it belongs to.

``WorkerWitness`` tells the main process that DataLoader worker processes iterate its dataset: its own
copy then cannot say where they stand, so ``state_dict()`` refuses instead of returning the start.
"""

from __future__ import annotations

import ctypes
import multiprocessing
from multiprocessing.context import get_spawning_popen
from typing import Any

from .errors import LoaderError

STATE_FORMAT = "ltsgen.loaders/2"
V1_FORMAT = "ltsgen.loaders/1"  # the released format, read for the states it saved
IDENTITY_KEYS = ("dataset", "tokenizer_sha256", "seq_len", "mixture")
COUNT_LIMIT = 2**63  # every count of a state fits an int64
_FIELDS = (
    "format",
    "identity",
    "seed",
    "epoch",
    "samples_consumed",
    "global_batch_size",
    "batch_size",
    "partial",
    "anchor",
)
_V1_FIELDS = tuple(name for name in _FIELDS if name != "identity") + ("fingerprint",)
_CHANGED = {  # what a differing identity key means, for the message
    "dataset": "another dataset, split, bucket or order option (shards, shuffle, shuffle_window, remainder, "
    "by_bucket)",
    "tokenizer_sha256": "the tokenizer that tokenizes the text changed, so the packed stream is another",
    "seq_len": "another seq_len cuts other blocks",
    "mixture": "another mixture of datasets",
}


def check_state(
    state: Any,
    identity: dict[str, Any],
    global_batch_size: int,
    batch_size: int,
    num_batches: int,
    v1_fingerprint: str | None = None,
) -> dict[str, Any]:
    """Validate a dataset state against the dataset it is loaded into.

    Args:
        state: a ``StreamingDataset.state_dict()`` (already taken out of a loader's state).
        identity: the dataset's identity (``IDENTITY_KEYS``).
        global_batch_size, batch_size: the dataset's.
        num_batches: global batches in the dataset's epoch.
        v1_fingerprint: the ``fingerprint`` an ``ltsgen.loaders/1`` state (the released format) of this
            dataset carries; None for a mixture, which no such state resumes.

    Returns:
        ``state``, or a v1 state as its v2 equivalent; ``LoaderError`` naming the first field that is
        malformed or does not fit.
    """
    if not isinstance(state, dict):
        raise LoaderError(f"a loader state must be a dict, not {type(state).__name__}")
    v1 = state.get("format") == V1_FORMAT
    unknown = sorted(map(str, set(state) - set(_V1_FIELDS if v1 else _FIELDS)))
    if unknown:
        raise LoaderError(
            f"state.{unknown[0]}: not a field of an {V1_FORMAT if v1 else 'ltsgen loader'} state"
        )
    if v1:
        state = _from_v1(state, identity, v1_fingerprint)
    if state.get("format") != STATE_FORMAT:
        raise LoaderError(
            f"state.format: {_shown(state.get('format'))} is not {STATE_FORMAT!r} (not an ltsgen loader state, "
            "or one saved by another version)"
        )
    _check_identity(state.get("identity"), identity)
    for name in ("seed", "epoch", "samples_consumed", "partial", "anchor"):
        _count(state, name, 0)
    for name in ("global_batch_size", "batch_size"):
        _count(state, name, 1)
    saved = state["global_batch_size"]
    if saved != global_batch_size:
        raise LoaderError(
            f"state.global_batch_size: the global batch size changed from {saved} to {global_batch_size}: "
            "resume needs the same "
            "batch_size * world_size"
        )
    if saved % state["batch_size"]:
        raise LoaderError(f"state.batch_size: {state['batch_size']} does not divide the global batch {saved}")
    consumed, rest = divmod(state["samples_consumed"], saved)
    if rest:
        raise LoaderError(
            f"state.samples_consumed: {state['samples_consumed']} is not a whole number of global batches "
            f"of {saved}"
        )
    if consumed > num_batches:
        raise LoaderError(
            f"state.samples_consumed: {state['samples_consumed']} is past the epoch's "
            f"{num_batches * saved} samples"
        )
    if state["partial"]:
        if state["partial"] >= state["batch_size"]:
            raise LoaderError(f"state.partial: {state['partial']} items of a batch of {state['batch_size']}")
        if consumed == num_batches:
            raise LoaderError("state.partial: inside a batch after the epoch's last one")
        if state["batch_size"] != batch_size:
            raise LoaderError(
                "state.batch_size: a state taken inside a batch resumes only with the same per-rank "
                f"batch size ({state['batch_size']}, not {batch_size})"
            )
    if state["anchor"] > consumed:
        raise LoaderError(f"state.anchor: {state['anchor']} is past the batches consumed ({consumed})")
    return state


def _from_v1(state: dict[str, Any], identity: dict[str, Any], v1_fingerprint: str | None) -> dict[str, Any]:
    """An ``ltsgen.loaders/1`` state (the released format) as the v2 state it stands for, when it belongs
    to this dataset; its other fields are checked as a v2 state's (``check_state``).

    A v1 state names what it resumes by ``fingerprint``: 16 hex digits of the sha256 of the sorted JSON of
    the split, bucket, shards (``[path, sha256, samples]``), ``seq_len``, shuffle, shuffle_window,
    remainder and by_bucket. It is recomputed from the dataset as it is now; when equal, the state takes
    this dataset's ``identity``. A v1 state recorded no tokenizer, so the tokenizer that tokenizes on the
    fly could not be checked: resume with the one the state was saved with. It resumes one dataset, never a
    mixture.

    Args:
        state: the v1 state (only its known fields).
        identity: the dataset's identity.
        v1_fingerprint: the dataset's v1 fingerprint; None for a mixture.

    Returns:
        The v2 state; ``LoaderError`` naming ``state.fingerprint`` when it is another dataset's.
    """
    if v1_fingerprint is None:
        raise LoaderError(
            f"state.fingerprint: an {V1_FORMAT} state resumes one dataset, not "
            f"{mixture_text(identity.get('mixture'))}"
        )
    saved = state.get("fingerprint")
    if saved != v1_fingerprint:
        raise LoaderError(
            f"state.fingerprint: the {V1_FORMAT} state resumes {_shown(saved)}, this dataset is "
            f"{v1_fingerprint!r} (another dataset, split, bucket, seq_len or order option)"
        )
    kept = {name: value for name, value in state.items() if name != "fingerprint"}
    return {**kept, "format": STATE_FORMAT, "identity": dict(identity)}


def _check_identity(saved: Any, identity: dict[str, Any]) -> None:
    if not isinstance(saved, dict) or not all(isinstance(key, str) for key in saved):
        raise LoaderError(f"state.identity: must be a dict of names, not {_shown(saved)}")
    _check_mixture(saved.get("mixture"))
    if saved.get("mixture") != identity.get("mixture"):  # first: another mixture explains the other keys
        raise LoaderError(
            f"state.identity.mixture: the state was saved for {mixture_text(saved.get('mixture'))}, "
            f"not {mixture_text(identity.get('mixture'))}"
        )
    for key in sorted(set(saved) | set(identity)):
        if saved.get(key) != identity.get(key):
            why = _CHANGED.get(key, "another configuration")
            raise LoaderError(
                f"state.identity.{key}: the state resumes {_shown(saved.get(key))}, this dataset is "
                f"{_shown(identity.get(key))} ({why})"
            )


def _check_mixture(mixture: Any) -> None:
    """A saved ``identity.mixture``: None (one dataset), or ``[[source, weight], ...]`` with distinct sources
    (strings) and positive integer weights."""
    if mixture is None:
        return
    if not isinstance(mixture, list) or not mixture:
        raise LoaderError(
            f"state.identity.mixture: must be None or a mixture's [[source, weight], ...], not {_shown(mixture)}"
        )
    for index, pair in enumerate(mixture):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise LoaderError(
                f"state.identity.mixture[{index}]: must be [source, weight], not {_shown(pair)}"
            )
        weight = pair[1]
        if not (isinstance(weight, int) and not isinstance(weight, bool) and 1 <= weight < COUNT_LIMIT):
            raise LoaderError(
                f"state.identity.mixture[{index}][1]: the weight must be an integer from 1 to 2**63 - 1, "
                f"not {_shown(weight)}"
            )
    if len({source for source, _ in mixture}) < len(mixture):
        raise LoaderError("state.identity.mixture: a source is given twice")


def mixture_text(mixture: list | None) -> str:
    """How an ``identity.mixture`` reads in a message: ``"the mixture lts=0.7,c4=0.3"`` or ``"one dataset"``."""
    if not mixture:
        return "one dataset"
    total = sum(weight for _, weight in mixture)
    return "the mixture " + ",".join(f"{source}={weight / total:.4g}" for source, weight in mixture)


def _count(state: dict[str, Any], name: str, lowest: int) -> None:
    value = state.get(name)
    if not (isinstance(value, int) and not isinstance(value, bool) and lowest <= value < COUNT_LIMIT):
        raise LoaderError(f"state.{name}: must be an integer from {lowest} to 2**63 - 1, not {_shown(value)}")


def dataset_state(state: Any) -> dict[str, Any]:
    """The global dataset state inside a dataset, loader or torchdata ``StatefulDataLoader`` state.

    In a torchdata state each worker's snapshot holds its own progress; the global position is the
    furthest one, since the loader yields global batches in order.

    Args:
        state: the state dict.

    Returns:
        The dataset state (checked further by ``check_state``); ``LoaderError`` when there is none, or it
        was taken inside a batch.
    """
    if not isinstance(state, dict):
        raise LoaderError(f"a loader state must be a dict, not {type(state).__name__}")
    if "samples_consumed" in state or "format" in state:
        return state
    if state.get("dataset_state"):
        return state["dataset_state"]
    snapshot = state.get("_snapshot")
    workers = snapshot.get("_worker_snapshots") if isinstance(snapshot, dict) else None
    found = [
        s["dataset_state"]
        for s in (workers.values() if isinstance(workers, dict) else [])
        if isinstance(s, dict) and isinstance(s.get("dataset_state"), dict)
    ]
    if not found:
        raise LoaderError("no ltsgen dataset state in this state dict")
    for index, found_state in enumerate(found):
        for name in ("samples_consumed", "partial"):
            value = found_state.get(name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise LoaderError(f"_worker_snapshots[{index}].dataset_state.{name}: must be an integer")
    best = max(found, key=lambda s: (s["samples_consumed"], s["partial"]))
    if best["partial"]:
        raise LoaderError("the loader state was taken inside a batch; resume needs a batch boundary")
    return best


class WorkerWitness:
    """A flag in memory shared with the DataLoader worker processes started after it (fork or spawn):
    a worker raises it when it iterates the dataset; the main process lowers it where it sets its own
    position. It lives as long as the processes that hold it (no file or segment outlives them)."""

    def __init__(self) -> None:
        self._flag = multiprocessing.RawValue(ctypes.c_bool, False)

    def __getstate__(self) -> dict[str, Any]:
        # shared memory crosses only to a process being started; any other copy gets a flag of its own
        return {"flag": self._flag if get_spawning_popen() is not None else None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        flag = state["flag"]  # a ctypes c_bool, false while lowered: compared to None, not by its truth
        self._flag = multiprocessing.RawValue(ctypes.c_bool, False) if flag is None else flag

    def raise_flag(self) -> None:
        self._flag.value = True

    def lower(self) -> None:
        self._flag.value = False

    @property
    def raised(self) -> bool:
        return bool(self._flag.value)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
