"""A loader state checked field by field: malformed or foreign states are refused naming the field and
change nothing; a state carries what it resumes (dataset, tokenizer, seq_len, mixture); the main process's
copy of a dataset that plain DataLoader workers iterate refuses to give a state it cannot know; a state of
the released format resumes the dataset it belongs to."""

from __future__ import annotations

import copy
import hashlib
import json
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from loader_fixtures import bpe, make_dataset, write_text_dataset

from ltsgen.errors import LtsgenError
from ltsgen.loaders import LoaderError, StreamingDataset, collate_records
from ltsgen.loaders.state import IDENTITY_KEYS

SIZES = [9, 4, 1, 12, 6, 8, 3]
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory) -> Path:
    lengths = np.random.default_rng(0).integers(0, 40, size=sum(SIZES))
    return make_dataset(tmp_path_factory.mktemp("state"), SIZES, "parquet", lengths=lengths, row_group_rows=4)


def ids(items) -> list:
    return [r["id"] for r in items]


def batch_ids(batches) -> list:
    return [i for batch in batches for i in batch["id"]]


def mid_epoch(directory: Path, batches: int = 3) -> tuple[StreamingDataset, dict]:
    dataset = StreamingDataset(directory, seed=4, batch_size=2)
    items = iter(dataset)
    for _ in range(2 * batches):
        next(items)
    return dataset, dataset.state_dict()


def test_the_state_is_json_and_names_what_it_resumes(parquet_dir):
    dataset, state = mid_epoch(parquet_dir)
    assert json.loads(json.dumps(state)) == state
    assert sorted(state["identity"]) == sorted(IDENTITY_KEYS)
    assert state["identity"]["seq_len"] is None and state["identity"]["mixture"] is None
    packed = StreamingDataset(parquet_dir, seq_len=7, batch_size=2).state_dict()["identity"]
    assert packed["seq_len"] == 7 and packed["dataset"] == state["identity"]["dataset"]  # seq_len apart


BROKEN = [  # (change to a valid state taken after 3 global batches of 2, field named in the error)
    ({"samples_consumed": -2}, "samples_consumed"),
    ({"samples_consumed": 10**30}, "samples_consumed"),
    ({"samples_consumed": 2 * 21 + 2}, "samples_consumed"),  # one batch past the epoch's 21
    ({"samples_consumed": 5}, "samples_consumed"),  # not a whole global batch
    ({"samples_consumed": "6"}, "samples_consumed"),
    ({"samples_consumed": 6.0}, "samples_consumed"),
    ({"samples_consumed": True}, "samples_consumed"),
    ({"samples_consumed": None}, "samples_consumed"),
    ({"epoch": -1}, "epoch"),
    ({"epoch": 2**70}, "epoch"),
    ({"seed": "4"}, "seed"),
    ({"seed": -3}, "seed"),
    ({"partial": 2}, "partial"),
    ({"partial": -1}, "partial"),
    ({"anchor": 4}, "anchor"),
    ({"anchor": [0]}, "anchor"),
    ({"batch_size": 0}, "batch_size"),
    ({"batch_size": 3}, "batch_size"),  # does not divide the global batch of 2
    ({"global_batch_size": 4}, "global_batch_size"),
    ({"global_batch_size": {}}, "global_batch_size"),
    ({"format": "ltsgen.loaders/3"}, "format"),
    ({"format": "ltsgen.loaders/1"}, "identity"),  # a field the released format never had
    ({"identity": None}, "identity"),
    ({"identity": "abc"}, "identity"),
    ({"identity": {"dataset": "0123456789abcdef"}}, "identity.dataset"),
    ({"position": 7}, "position"),
]


@pytest.mark.parametrize(
    "change, field", BROKEN, ids=[f"{f}={v!r}"[:40] for c, f in BROKEN for v in c.values()]
)
def test_every_malformed_field_is_refused_by_name_and_changes_nothing(parquet_dir, change, field):
    _, state = mid_epoch(parquet_dir)
    target, _ = mid_epoch(parquet_dir, batches=1)
    before = target.state_dict()
    with pytest.raises(LoaderError, match=rf"^state\.{field}: ") as caught:
        target.load_state_dict({**state, **change})
    assert "\n" not in str(caught.value) and isinstance(caught.value, LtsgenError)
    assert target.state_dict() == before  # never applied in part


def test_a_missing_field_and_states_of_the_wrong_shape_are_refused(parquet_dir):
    _, state = mid_epoch(parquet_dir)
    target = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    for name in state:
        with pytest.raises(LoaderError, match=rf"^state\.{name}"):
            target.load_state_dict({k: v for k, v in state.items() if k != name})
    for shape in ([1, 2], "state", None, {"_snapshot": {"_worker_snapshots": {"0": {"dataset_state": {}}}}}):
        with pytest.raises(LoaderError):
            target.load_state_dict(shape)
    worker = {"dataset_state": {**state, "samples_consumed": "x"}}
    with pytest.raises(LoaderError, match="samples_consumed"):
        target.load_state_dict({"_snapshot": {"_worker_snapshots": {"0": worker}}})


def test_the_end_of_an_epoch_is_a_valid_state(parquet_dir):
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    assert len(list(dataset)) == 42
    resumed = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    resumed.load_state_dict(dataset.state_dict())
    assert list(resumed) == []


TEXTS = [f"story {i}: " + "the cat sat on the mat and a dog ran " * (i % 4 + 1) for i in range(30)]


def test_a_state_saved_before_the_tokenizer_changed_is_refused(tmp_path):
    first = bpe(300, ["the cat sat on the mat and a dog ran", "story 1: 2: 3: 4: 5: 6: 7: 8: 9: 0:"])
    second = bpe(300, ["story of a dog and a cat"])
    directory = write_text_dataset(tmp_path, first, TEXTS)
    dataset = StreamingDataset(directory, seq_len=15, batch_size=2, shuffle=False)
    next(iter(dataset))
    state = dataset.state_dict()
    assert state["identity"]["tokenizer_sha256"] is not None
    same = StreamingDataset(directory, seq_len=15, batch_size=2, shuffle=False, tokenizer=first)
    same.load_state_dict(state)  # the same tokenizer given as an object is the same identity
    write_text_dataset(tmp_path, second, TEXTS)  # the attached tokenizer replaced
    changed = StreamingDataset(directory, seq_len=15, batch_size=2, shuffle=False)
    with pytest.raises(LoaderError, match=r"^state\.identity\.tokenizer_sha256: .*tokenizer .* changed"):
        changed.load_state_dict(state)
    with pytest.raises(LoaderError, match=r"^state\.identity\.tokenizer_sha256: "):
        StreamingDataset(
            directory, seq_len=15, batch_size=2, shuffle=False, tokenizer=second
        ).load_state_dict(state)


def test_a_state_of_another_seq_len_or_mixture_is_refused(parquet_dir):
    packed = StreamingDataset(parquet_dir, seq_len=7, batch_size=2)
    state = packed.state_dict()
    with pytest.raises(
        LoaderError, match=r"^state\.identity\.seq_len: the state resumes 7, this dataset is 9 "
    ):
        StreamingDataset(parquet_dir, seq_len=9, batch_size=2).load_state_dict(state)
    other = {**state, "identity": {**state["identity"], "mixture": {"a": 0.5, "b": 0.5}}}
    with pytest.raises(LoaderError, match=r"^state\.identity\.mixture: .*mixture"):
        packed.load_state_dict(other)
    grown = {**state, "identity": {**state["identity"], "weights": "v2"}}  # an identity key of a later kind
    with pytest.raises(LoaderError, match=r"^state\.identity\.weights: "):
        packed.load_state_dict(grown)


def v1_state(directory: Path, seq_len: int | None = None, shuffle_window: int = 4) -> dict:
    """A state as the released loaders wrote it (format ltsgen.loaders/1) after 3 global batches of 2 and one
    item more (seed 4, no workers), its fingerprint by that release's recipe from the manifest."""
    shards = json.loads((directory / "manifest.json").read_text())["splits"]["train"]
    key = {
        "split": "train",
        "bucket": None,
        "shards": [[s["path"], s["sha256"], s["samples"]] for s in shards],
        "seq_len": seq_len,
        "shuffle": True,
        "shuffle_window": shuffle_window,
        "remainder": "drop",
        "by_bucket": False,
    }
    return {
        "format": "ltsgen.loaders/1",
        "fingerprint": hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16],
        "seed": 4,
        "epoch": 0,
        "samples_consumed": 6,
        "global_batch_size": 2,
        "batch_size": 2,
        "partial": 1,
        "anchor": 3,
    }


@pytest.mark.parametrize("seq_len", [None, 7])
def test_a_released_state_resumes_its_dataset_losing_and_repeating_nothing(parquet_dir, seq_len):
    def items(dataset) -> list:
        return [ids([x]) if seq_len is None else x["input_ids"].tolist() for x in dataset]

    whole = items(StreamingDataset(parquet_dir, seed=4, batch_size=2, seq_len=seq_len))
    uninterrupted = StreamingDataset(parquet_dir, seed=4, batch_size=2, seq_len=seq_len)
    taken = iter(uninterrupted)
    for _ in range(7):
        next(taken)
    resumed = StreamingDataset(parquet_dir, seed=4, batch_size=2, seq_len=seq_len)
    resumed.load_state_dict(v1_state(parquet_dir, seq_len))
    assert resumed.state_dict() == uninterrupted.state_dict()  # now a state of the current format
    assert items(resumed) == whole[7:] and len(whole) == 2 * resumed.num_batches


def test_a_released_state_of_another_dataset_or_seq_len_or_for_a_mixture_is_refused(parquet_dir, tmp_path):
    other = make_dataset(tmp_path, [5, 9, 7], "parquet")
    refused = [  # (dataset, v1 state, the message's start)
        (StreamingDataset(other, seed=4, batch_size=2), v1_state(parquet_dir), "the ltsgen.loaders/1 state"),
        (StreamingDataset(parquet_dir, batch_size=2, seq_len=9), v1_state(parquet_dir, 7), "the ltsgen"),
        (StreamingDataset(parquet_dir, batch_size=2), v1_state(parquet_dir, 7), "the ltsgen"),
        (StreamingDataset(parquet_dir, batch_size=2), v1_state(parquet_dir, shuffle_window=2), "the ltsgen"),
        (
            StreamingDataset({parquet_dir: 1.0}, batch_size=2),
            v1_state(parquet_dir),
            rf"an ltsgen.loaders/1 state resumes one dataset, not the mixture {parquet_dir}=1$",
        ),
    ]
    for dataset, state, message in refused:
        before = dataset.state_dict()
        with pytest.raises(LoaderError, match=rf"^state\.fingerprint: {message}") as caught:
            dataset.load_state_dict(state)
        assert "\n" not in str(caught.value) and dataset.state_dict() == before
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    for change, field in (
        ({"samples_consumed": 5}, "samples_consumed"),
        ({"fingerprint": None}, "fingerprint"),
    ):
        with pytest.raises(LoaderError, match=rf"^state\.{field}: "):  # checked as a state of today's format
            dataset.load_state_dict({**v1_state(parquet_dir), **change})
    for name in ("seed", "anchor", "fingerprint"):
        with pytest.raises(LoaderError, match=rf"^state\.{name}"):
            dataset.load_state_dict({k: v for k, v in v1_state(parquet_dir).items() if k != name})


def test_seed_and_epoch_are_checked_where_the_dataset_is_made(parquet_dir):
    for bad in ({"seed": -1}, {"epoch": -2}, {"seed": "1"}, {"epoch": 1.5}):
        with pytest.raises(LtsgenError, match=next(iter(bad))):
            StreamingDataset(parquet_dir, **bad)
    dataset = StreamingDataset(parquet_dir)
    for bad in (-1, "1", 2**63):
        with pytest.raises(LtsgenError, match=r"^epoch must be an integer from 0 to 2\*\*63 - 1"):
            dataset.set_epoch(bad)
    assert dataset.epoch == 0


def head(loader, count: int) -> list:
    taken = []
    for batch in loader:
        taken.append(batch)
        if len(taken) == count:
            break
    return taken


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_plain_dataloader_with_workers_is_refused_a_state_it_cannot_know(parquet_dir, context):
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    plain = torch.utils.data.DataLoader(
        dataset, batch_size=2, num_workers=1, collate_fn=collate_records, multiprocessing_context=context
    )
    assert len(head(plain, 3)) == 3
    with pytest.raises(LoaderError, match=r"dataset\.loader\(num_workers=N\).*StatefulDataLoader") as caught:
        dataset.state_dict()
    assert "\n" not in str(caught.value)
    dataset.set_epoch(1)  # the main process sets the position again: the start of epoch 1, exactly
    assert dataset.state_dict()["epoch"] == 1 and dataset.state_dict()["samples_consumed"] == 0
    copied = copy.deepcopy(dataset)  # a copy made outside a worker start shares nothing
    pickle.loads(pickle.dumps(dataset))
    assert copied.state_dict()["epoch"] == 1


def test_without_workers_a_plain_dataloaders_state_is_exact_and_loader_is_unaffected(parquet_dir):
    full = ids(StreamingDataset(parquet_dir, seed=4, batch_size=2))
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    taken = batch_ids(head(torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=collate_records), 4))
    resumed = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    resumed.load_state_dict(dataset.state_dict())
    assert taken + ids(resumed) == full
    # after a plain DataLoader's workers, loader() sets the position again and its state is exact
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    head(torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate_records), 2)
    loader = dataset.loader(num_workers=2)
    taken = batch_ids(head(loader, 3))
    assert dataset.state_dict()["samples_consumed"] == 6
    resumed = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    resumed.load_state_dict(loader.state_dict())
    assert taken + ids(resumed) == full


def test_torchdata_workers_still_give_their_state(parquet_dir):
    from torchdata.stateful_dataloader import StatefulDataLoader

    full = ids(StreamingDataset(parquet_dir, seed=4, batch_size=2))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "'set_vital' is deprecated")
        dataset = StreamingDataset(parquet_dir, seed=4, batch_size=2)
        theirs = StatefulDataLoader(dataset, batch_size=2, num_workers=2, collate_fn=collate_records)
    taken = batch_ids(head(theirs, 3))
    resumed = StreamingDataset(parquet_dir, seed=4, batch_size=2)
    resumed.load_state_dict(theirs.state_dict())
    assert taken + ids(resumed) == full
