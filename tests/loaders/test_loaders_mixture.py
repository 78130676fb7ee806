"""Mixtures of datasets: the schedule's proportions, each source's own epochs, the same order for any worker
count or rank split, exact and elastic resume, the state's identity and the shared tokenizer."""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from loader_fixtures import bpe, make_dataset, write_text_dataset

from ltsgen.errors import UsageError
from ltsgen.loaders import LoaderError, StreamingDataset, StreamingMixture, parse_mixture
from ltsgen.loaders.contract import read_manifest
from ltsgen.loaders.mixture import RESOLUTION, Schedule, resolve_weights, source_seed

SHA = "ab" * 32
SIZES_A = [9, 4, 12]  # 25 records, doc-000000 ... doc-000024
SIZES_B = [5, 6]  # 11 records, doc-000300 ... doc-000310


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> tuple[str, str]:
    root = tmp_path_factory.mktemp("mixture")
    a = make_dataset(root / "a", SIZES_A, "parquet", tokenizer_sha256=SHA, row_group_rows=4)
    b = make_dataset(root / "b", SIZES_B, "webdataset", first_index=300, tokenizer_sha256=SHA)
    return str(a), str(b)


def ids(items) -> list[str]:
    return [record["id"] for record in items]


def test_simple_proportions_keep_their_exact_ratio_and_others_are_resolved_to_1_in_10000():
    assert resolve_weights([1, 1, 1]) == [1, 1, 1] and resolve_weights([0.7, 0.3]) == [7, 3]
    assert resolve_weights([6, 2.5, 1, 0.5]) == [12, 5, 2, 1] and resolve_weights([0.999, 0.001]) == [999, 1]
    weights = resolve_weights([1, 2**0.5, 3**0.5])  # no small common denominator
    assert sum(weights) == RESOLUTION and weights == [2412, 3411, 4177]


@pytest.mark.parametrize(
    "proportions", [[0.7, 0.3], [1, 1, 1], [0.5, 0.25, 0.125, 0.125], [0.999, 0.001], [6, 2.5, 1, 0.5]]
)
def test_schedule_holds_every_proportion_within_two_items_over_any_10000(proportions):
    weights = resolve_weights(proportions)
    schedule = Schedule(weights)
    source, item = schedule.locate(np.arange(60_000))
    share = np.asarray(weights) / sum(weights)
    assert np.allclose(share, np.asarray(proportions) / sum(proportions), atol=1 / RESOLUTION)
    for s in range(len(weights)):
        mine = source == s
        assert item[mine].tolist() == list(range(int(mine.sum())))  # its stream in order, each item once
        counts = np.concatenate([[0], np.cumsum(mine)])
        window = counts[10_000:] - counts[:-10_000]  # every run of 10,000 consecutive positions
        assert np.abs(window - 10_000 * share[s]).max() <= 2  # 1% would be 100


def test_each_source_reads_its_own_epochs_reshuffled_and_logs_it(sources, caplog):
    a, b = sources
    mixture = StreamingDataset({a: 0.5, b: 0.5}, seed=3, batch_size=4)
    assert (
        isinstance(mixture, StreamingMixture) and mixture.num_batches == (25 + 11) // 4 == len(mixture) // 4
    )
    caplog.set_level(logging.INFO, logger="ltsgen.loaders.mixture")
    drawn = []
    for epoch in range(3):
        mixture.set_epoch(epoch)
        drawn += ids(mixture)
    assert len(drawn) == 3 * 36
    logged = [r.getMessage() for r in caplog.records]
    assert sum(f"source {b}: reached its epoch" in m for m in logged) == 4  # b: epochs 1-4 begun
    assert sum(f"source {a}: reached its epoch" in m for m in logged) == 2  # a: epochs 1-2
    fresh = StreamingDataset({a: 0.5, b: 0.5}, seed=3, batch_size=4)
    assert ids(fresh) == drawn[:36]  # deterministic for a seed
    assert ids(StreamingDataset({a: 0.5, b: 0.5}, seed=4, batch_size=4)) != drawn[:36]
    for index, (root, first, size) in enumerate(((a, 0, 25), (b, 300, 11))):
        mine = [i for i in drawn if first <= int(i.split("-")[1]) < first + size]
        assert len(mine) == 54  # half of the items
        epochs = [mine[k : k + size] for k in range(0, len(mine) - size + 1, size)]
        for epoch, chunk in enumerate(epochs):  # each of its epochs whole, in its own seeded order
            assert chunk == ids(StreamingDataset(root, seed=source_seed(3, index), epoch=epoch))
        assert epochs[0] != epochs[1]


def test_a_mixture_of_one_dataset_packs_the_datasets_own_epochs_end_to_end(sources):
    a, _ = sources
    mixture = StreamingDataset({a: 1.0}, seed=5, seq_len=5, batch_size=2, position_ids=True)
    blocks = []
    for epoch in range(2):
        mixture.set_epoch(epoch)
        blocks += list(mixture)
    plain = [
        b
        for epoch in range(3)
        for b in StreamingDataset(a, seed=source_seed(5, 0), seq_len=5, epoch=epoch, position_ids=True)
    ]
    assert len(blocks) == 2 * mixture.num_batches * 2
    for block, expected in zip(blocks, plain, strict=False):
        assert torch.equal(block["input_ids"], expected["input_ids"])
        assert torch.equal(block["position_ids"], expected["position_ids"])


def packed(sources, **options) -> StreamingDataset:
    a, b = sources
    return StreamingDataset({a: 0.6, b: 0.4}, seed=11, seq_len=4, **options)


def test_the_same_batches_for_any_worker_count_and_any_rank_split(sources):
    reference = [batch["input_ids"] for batch in packed(sources, batch_size=6).loader()]
    assert len(reference) == packed(sources, batch_size=6).num_batches >= 5
    for workers in (1, 2):
        batches = [batch["input_ids"] for batch in packed(sources, batch_size=6).loader(num_workers=workers)]
        assert all(torch.equal(x, y) for x, y in zip(batches, reference, strict=True)), workers
    copy = pickle.loads(pickle.dumps(packed(sources, batch_size=6)))  # as spawned workers receive it
    assert all(torch.equal(x["input_ids"], y) for x, y in zip(copy.loader(), reference, strict=True))
    plain = torch.utils.data.DataLoader(packed(sources, batch_size=6), batch_size=6, num_workers=2)
    assert all(torch.equal(x["input_ids"], y) for x, y in zip(plain, reference, strict=True))
    ranks = [list(packed(sources, batch_size=2, rank=r, world_size=3).loader()) for r in range(3)]
    merged = [torch.cat([ranks[r][t]["input_ids"] for r in range(3)]) for t in range(len(reference))]
    assert all(torch.equal(x, y) for x, y in zip(merged, reference, strict=True))


def test_resume_is_exact_with_another_worker_count_or_world_size(sources):
    reference = [batch["input_ids"] for batch in packed(sources, batch_size=6).loader()]
    loader = packed(sources, batch_size=6).loader(num_workers=2)
    head = []
    for batch in loader:
        head.append(batch["input_ids"])
        if len(head) == 3:
            break
    state = json.loads(json.dumps(loader.state_dict()))
    assert state["identity"]["mixture"] == [[sources[0], 3], [sources[1], 2]]
    resumed = packed(sources, batch_size=6)
    resumed.load_state_dict(state)
    tail = [batch["input_ids"] for batch in resumed.loader(num_workers=1)]
    assert all(torch.equal(x, y) for x, y in zip(head + tail, reference, strict=True))
    ranks = []
    for rank in range(2):  # the same state on two ranks of 3 items each
        dataset = packed(sources, batch_size=3, rank=rank, world_size=2)
        dataset.load_state_dict(state)
        ranks.append([batch["input_ids"] for batch in dataset.loader()])
    merged = [torch.cat([ranks[0][t], ranks[1][t]]) for t in range(len(ranks[0]))]
    assert all(torch.equal(x, y) for x, y in zip(head + merged, reference, strict=True))
    other_seed = StreamingDataset({sources[0]: 0.6, sources[1]: 0.4}, seed=2, seq_len=4, batch_size=6)
    other_seed.load_state_dict(state)  # the state's seed (11) orders every source
    assert all(
        torch.equal(x["input_ids"], y) for x, y in zip(other_seed.loader(), reference[3:], strict=True)
    )
    inside = packed(sources, batch_size=6)  # a state taken inside a batch, resumed item by item
    items = iter(inside)
    first = [next(items)["input_ids"] for _ in range(8)]
    rest = packed(sources, batch_size=6)
    rest.load_state_dict(inside.state_dict())
    items = first + [block["input_ids"] for block in rest]
    assert torch.equal(torch.stack(items), torch.cat(reference))


def test_a_state_of_another_mixture_or_dataset_is_refused_in_one_line(sources):
    a, b = sources
    state = StreamingDataset({a: 0.7, b: 0.3}, batch_size=2).state_dict()
    with pytest.raises(
        LoaderError, match=rf"saved for the mixture {a}=0.7,{b}=0.3, not the mixture {a}=0.5,"
    ):
        StreamingDataset({a: 0.5, b: 0.5}, batch_size=2).load_state_dict(state)
    with pytest.raises(LoaderError, match=rf"saved for the mixture {a}=0.7,{b}=0.3, not one dataset$"):
        StreamingDataset(a, batch_size=2).load_state_dict(state)
    with pytest.raises(LoaderError, match=rf"saved for one dataset, not the mixture {b}=0.3,{a}=0.7$"):
        StreamingDataset({b: 0.3, a: 0.7}, batch_size=2).load_state_dict(StreamingDataset(a).state_dict())
    StreamingDataset({a: 7, b: 3}, batch_size=2).load_state_dict(state)  # the same proportions


def test_a_state_resumes_with_its_sources_spelled_otherwise_or_moved_with_the_folder(
    sources, tmp_path, monkeypatch
):
    """A state names its sources as they were given: the same folders spelled another way (a trailing slash,
    ./, an absolute path) resume it, and so does a copy of the folders under the same relative names, as
    before; the state's own spelling is kept in its identity, so states saved before resume too."""
    root = Path(sources[0]).parent
    monkeypatch.chdir(root)
    loader = StreamingDataset({"a": 0.6, "b": 0.4}, seed=5, batch_size=4).loader()
    batches = iter(loader)
    assert [len(next(batches)["id"]) for _ in range(2)] == [4, 4]  # two batches read, then the state
    state = json.loads(json.dumps(loader.state_dict()))
    rest = [list(batch["id"]) for batch in batches]
    for a, b in (("./a/", "b"), (str(root / "a"), "./b")):
        resumed = StreamingDataset({a: 0.6, b: 0.4}, seed=5, batch_size=4)
        resumed.load_state_dict(state)
        assert [list(batch["id"]) for batch in resumed.loader()] == rest
        assert resumed.state_dict()["identity"]["mixture"] == [[a, 3], [b, 2]]  # saved as now given
    copy = tmp_path / "copy"  # the folders moved: the same relative names in another working folder
    for name in ("a", "b"):
        shutil.copytree(root / name, copy / name)
    monkeypatch.chdir(copy)
    moved = StreamingDataset({"a": 0.6, "b": 0.4}, seed=5, batch_size=4)
    moved.load_state_dict(state)
    assert [list(batch["id"]) for batch in moved.loader()] == rest
    with pytest.raises(LoaderError, match=r"saved for the mixture a=0.6,b=0.4, not the mixture b=0.4,a=0.6"):
        StreamingDataset({"b": 0.4, "a": 0.6}, seed=5, batch_size=4).load_state_dict(state)


@pytest.mark.parametrize(
    "mixture, field",
    [
        ("a=0.7,b=0.3", "identity.mixture: must be None or"),
        ([], "identity.mixture: must be None or"),
        ([["A", 7, 1], ["B", 3]], r"identity.mixture\[0\]"),
        ([[7, "A"], ["B", 3]], r"identity.mixture\[0\]"),
        ([["A", 7], ["B", 0]], r"identity.mixture\[1\]\[1\]"),
        ([["A", 7], ["B", "3"]], r"identity.mixture\[1\]\[1\]"),
        ([["A", 7], ["B", True]], r"identity.mixture\[1\]\[1\]"),
        ([["A", 7], ["A", 3]], "identity.mixture: a source is given twice"),
    ],
)
def test_a_malformed_mixture_in_a_state_is_refused_by_field_and_changes_nothing(sources, mixture, field):
    a, b = sources
    mixed = StreamingDataset({a: 0.7, b: 0.3}, batch_size=2)
    next(iter(mixed))
    state = mixed.state_dict()
    names = {"A": a, "B": b}
    broken = mixture if not isinstance(mixture, list) else [
        [names.get(part, part) if isinstance(part, str) else part for part in pair] for pair in mixture
    ]  # fmt: skip
    target = StreamingDataset({a: 0.7, b: 0.3}, batch_size=2)
    before = target.state_dict()
    with pytest.raises(LoaderError, match=rf"^state\.{field}[^\n]*$"):
        target.load_state_dict({**state, "identity": {**state["identity"], "mixture": broken}})
    assert target.state_dict() == before


def test_packing_refuses_sources_tokenized_differently_naming_both(sources, tmp_path):
    a, _ = sources
    other = make_dataset(tmp_path / "other", [4, 4], tokenizer_sha256="cd" * 32)
    with pytest.raises(LoaderError, match=rf"one tokenizer: {a} has tokenizer sha256 ababab.*, {other} has "):
        StreamingDataset({a: 1, str(other): 1}, seq_len=4)
    assert len(ids(StreamingDataset({a: 1, str(other): 1}))) == 33  # records need no shared tokenizer
    unrecorded = [make_dataset(tmp_path / name, [4, 4]) for name in ("x", "y")]  # no sha256, no file
    assert len(StreamingDataset({str(d): 1 for d in unrecorded}, seq_len=4)) > 0  # same vocabulary and EOS
    with pytest.raises(LoaderError, match="has a tokenizer of 60000 tokens without a file or sha256, EOS 0"):
        StreamingDataset({a: 1, str(unrecorded[0]): 1}, seq_len=4)


def test_text_and_ids_of_the_same_tokenizer_pack_together_whichever_gives_it(tmp_path):
    texts = [f"story {i}: " + "the cat sat on the mat " * (1 + i % 3) for i in range(30)]
    tokenizer = bpe(300, texts)
    (tmp_path / "text").mkdir()
    text = str(write_text_dataset(tmp_path / "text", tokenizer, texts))
    sha256 = hashlib.sha256(tokenizer.to_str(pretty=True).encode("utf-8")).hexdigest()
    ids = str(make_dataset(tmp_path / "ids", [10, 10], tokenizer_sha256=sha256))
    for given in (None, tokenizer, f"{text}/tokenizer.json"):  # its own, the object, the file
        assert len(StreamingDataset({text: 1, ids: 1}, seq_len=7, tokenizer=given)) > 0
    other = bpe(300, ["a story of another tokenizer"])
    with pytest.raises(
        LoaderError, match=rf"one tokenizer: {text} has tokenizer sha256 \w{{12}}, EOS 0, {ids} has "
    ):
        StreamingDataset({text: 1, ids: 1}, seq_len=7, tokenizer=other)


def test_mixture_options_and_the_cli_form_are_checked(sources):
    a, b = sources
    assert parse_mixture("data/lts") == "data/lts"
    assert parse_mixture("http://host/d?x=y") == "http://host/d?x=y"
    assert parse_mixture(a) == a and parse_mixture(f"{a}=1") == {a: 1.0}
    (Path(a).parent / "runs=1").mkdir(exist_ok=True)
    assert parse_mixture(str(Path(a).parent / "runs=1")) == str(Path(a).parent / "runs=1")  # a folder's name
    assert parse_mixture("lts=0.7, s3://bucket/c4=buckets=0.3") == {"lts": 0.7, "s3://bucket/c4=buckets": 0.3}
    for text, problem in (
        ("lts=0.7,c4", "'c4' is not PATH=WEIGHT"),
        ("a=1,a=2", "'a' is given twice"),
        ("a=1,a/=2", r"'a/' is given twice \(as 'a'\)"),  # before: mixed as two sources
        ("a=-1,b=2", "the weight of 'a', -1, is not a positive number"),
        ("a=1,b=nan", "the weight of 'b', nan, is not a positive number"),
        ("a=0,b=1", "the weight of 'a', 0, is not a positive number"),
        # before: accepted here, refused only by the first loader, after compare had written its settings
        ("a=1e-9,b=1", r"^--data 'a=1e-9,b=1': a mixture proportion below 1/10000"),
    ):
        with pytest.raises(UsageError, match=problem):
            parse_mixture(text)
    for proportions in ({a: 0, b: 1}, {a: -1, b: 1}, {a: float("nan"), b: 1}):
        with pytest.raises(UsageError, match="positive numbers"):
            StreamingDataset(proportions)
    with pytest.raises(UsageError, match="below 1/10000"):
        StreamingDataset({a: 1e-6, b: 1})
    with pytest.raises(UsageError, match="by_bucket"):
        StreamingDataset({a: 1, b: 1}, by_bucket=True)
    wrapped = StreamingDataset({a: 1, b: 1}, batch_size=5, remainder="wrap")  # 36 items: 7 batches and 1 item
    dropped = StreamingDataset({a: 1, b: 1}, batch_size=5)
    assert (wrapped.num_batches, dropped.num_batches) == (8, 7)
    continued = ids(dropped) + ids(StreamingDataset({a: 1, b: 1}, batch_size=5, epoch=1))
    assert ids(wrapped) == continued[:40]  # the last batch continues the sources; the next epoch goes on
    with pytest.raises(UsageError, match="batch_size must be a positive integer, not 0"):
        StreamingDataset({a: 1, b: 1}, batch_size=0)
    for proportions in ({a: None, b: 1}, {a: True, b: 1}, {a: "1", b: 1}):  # before: TypeError, or True as 1
        with pytest.raises(UsageError, match="positive numbers"):
            StreamingDataset(proportions)
    # items are numbered across epochs on one int64 axis: an epoch beyond it is refused in one line (before:
    # accepted, then an OverflowError traceback at the first batch)
    state = dropped.state_dict()
    state["epoch"] = 2**62
    with pytest.raises(
        LoaderError, match=r"^state\.epoch: 4611686018427387904 is beyond the last this dataset can"
    ):
        dropped.load_state_dict(state)
    with pytest.raises(UsageError, match="^epoch 4611686018427387904 is beyond the last this dataset can"):
        dropped.set_epoch(2**62)
    with pytest.raises(UsageError, match="^epoch 4611686018427387904 is beyond the last this mixture can"):
        StreamingDataset({a: 1, b: 1}, batch_size=5, epoch=2**62)
    dropped.set_epoch(dropped._last_epoch())
    assert len(ids(dropped)) == 35  # the last epoch it numbers reads whole
    with pytest.raises(LoaderError, match="36 items in all, too few for one global batch of 40"):
        StreamingDataset({a: 1, b: 1}, batch_size=40)
    with pytest.raises(LoaderError, match=f"{Path(b, 'manifest.json')}|no split 'valid'"):
        StreamingDataset({a: 1, b: 1}, split="valid")


def test_a_local_source_mixes_with_one_on_s3_through_the_cache(sources, s3_server, tmp_path):
    a, b = sources
    bucket = s3_server.bucket()
    s3_server.client().put(b, f"{bucket}/b", recursive=True)
    remote = {a: 0.6, f"s3://{bucket}/b": 0.4}
    mixed = StreamingDataset(remote, seed=11, seq_len=4, batch_size=6, cache_dir=tmp_path / "cache")
    reference = [batch["input_ids"] for batch in packed(sources, batch_size=6).loader()]
    assert all(torch.equal(x["input_ids"], y) for x, y in zip(mixed.loader(), reference, strict=True))
    cached = sorted(path.name for path in (tmp_path / "cache").iterdir())
    remote_shards = sorted(shard.sha256 for shard in read_manifest(b).shards("train"))
    assert [
        name[:64] for name in cached if not name.startswith(".")
    ] == remote_shards  # the s3 source's, not the local one's
