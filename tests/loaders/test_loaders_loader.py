"""The DataLoader side: ``dataset.loader()`` in global order for any worker count, its state (exact at any
moment, elastic in workers), a plain DataLoader refused where it would reorder, and no stray warnings."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import traceback
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from loader_fixtures import make_dataset, subprocess_env

from ltsgen.errors import UsageError
from ltsgen.loaders import StreamingDataset, collate_records
from ltsgen.loaders import loader as loader_module
from ltsgen.loaders.loader import IN_FLIGHT_TOKENS, RUN_ITEMS
from ltsgen.loaders.order import window_groups
from ltsgen.loaders.reader import decoding_threads

SIZES = [9, 4, 1, 12, 6, 8, 3]
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")  # 3 workers, 2 CPUs


@pytest.fixture(scope="module")
def parquet_dir(tmp_path_factory) -> Path:
    lengths = np.random.default_rng(0).integers(0, 40, size=sum(SIZES))
    return make_dataset(
        tmp_path_factory.mktemp("parquet"), SIZES, "parquet", lengths=lengths, row_group_rows=4
    )


def key(batch) -> tuple:
    return tuple(batch["id"]) if "id" in batch else tuple(batch["input_ids"].flatten().tolist())


def head_of(loader, count: int) -> list[tuple]:
    head = []
    for batch in loader:
        head.append(key(batch))
        if len(head) == count:
            break
    return head


def epoch_with_state_at(loader, count: int) -> tuple[list[tuple], dict]:
    """One whole pass of ``loader`` and its state taken after ``count`` batches, mid-iteration (as a
    training loop checkpoints): one pass shows both the order from the start and a state inside it."""
    seen, state = [], None
    for batch in loader:
        seen.append(key(batch))
        if len(seen) == count:
            state = loader.state_dict()
    return seen, state


@pytest.mark.parametrize("seq_len", [None, 7])
def test_loader_resumes_exactly_with_the_same_and_other_worker_counts(parquet_dir, seq_len):
    def make():
        return StreamingDataset(parquet_dir, seed=11, batch_size=2, seq_len=seq_len)

    full = [key(b) for b in make().loader(num_workers=0)]
    for workers, stop, other in ((0, 3, 3), (2, 5, 0), (2, 4, 3)):
        loader = make().loader(num_workers=workers)
        head = head_of(loader, stop)
        state = loader.state_dict()
        restored = make().loader(num_workers=workers)
        restored.load_state_dict(state)
        assert head + [key(b) for b in restored] == full
        elastic = make().loader(num_workers=other)  # another worker count through the loader itself
        elastic.load_state_dict(state)
        assert head + [key(b) for b in elastic] == full
        dataset = make()
        dataset.load_state_dict(state)
        assert head + [key(b) for b in dataset.loader(num_workers=other)] == full


def test_workers_runs_of_batches_keep_the_order_and_resume_inside_a_run(parquet_dir, monkeypatch):
    monkeypatch.setattr("ltsgen.loaders.loader.RUN_ITEMS", 6)  # runs of 1, 2, 3, 3, ... batches of 2

    def make():
        return StreamingDataset(parquet_dir, seed=9, batch_size=2, seq_len=7)

    full = [key(b) for b in make().loader()]
    assert len(full) >= 12
    for workers, stop in ((1, 5), (2, 7), (3, 4)):
        seen, state = epoch_with_state_at(make().loader(num_workers=workers), stop)  # inside a run of 3
        assert seen == full
        restored = make().loader(num_workers=workers)
        restored.load_state_dict(state)
        assert full[:stop] + [key(b) for b in restored] == full


@pytest.mark.parametrize("seq_len", [3, 7])
def test_workers_serving_whole_windows_keep_the_order_and_resume_inside_a_window(parquet_dir, seq_len):
    def make():  # windows of 2 shards: 4 windows, each served whole by one worker
        return StreamingDataset(parquet_dir, seed=5, batch_size=2, seq_len=seq_len, shuffle_window=2)

    full = [key(b) for b in make().loader()]
    assert len(full) >= 12 and len(set(full)) == len(full)
    for workers, stop, other in ((1, 3, 2), (2, 5, 3), (3, 9, 0), (2, 2, 1)):
        # inside a window (and a run) served by one worker
        seen, state = epoch_with_state_at(make().loader(num_workers=workers), stop)
        assert seen == full
        for count in (workers, other):
            restored = make().loader(num_workers=count)
            restored.load_state_dict(state)
            assert full[:stop] + [key(b) for b in restored] == full


class _FetchLog(StreamingDataset):
    """A dataset that notes, in ``self.log``, each shard a process fetches (as ``pid path threads`` lines:
    ``threads``, the process's decoding threads)."""

    log: Path

    def _local(self, info):
        return None  # every shard through _fetch

    def _fetch(self, info):
        with open(self.log, "a") as log:
            log.write(f"{os.getpid()} {info.path} {self._process.reader._pool.size}\n")
        return super()._fetch(info)


@pytest.mark.parametrize("seq_len", [3, 7])
def test_workers_fetch_only_the_shards_of_the_windows_they_serve(parquet_dir, tmp_path, seq_len):
    """A batch that runs from one worker's window into the next worker's is made in two parts, each by the
    worker serving its window: no worker opens a shard of another's window."""

    def make(kind=StreamingDataset):
        return kind(parquet_dir, seed=5, batch_size=2, seq_len=seq_len, shuffle_window=2, position_ids=True)

    def both(batch) -> tuple:
        return key(batch), tuple(batch["position_ids"].flatten().tolist())

    dataset = make(_FetchLog)
    dataset.log = tmp_path / "fetched.txt"
    order, homes = dataset._orders()[0], dataset._home_windows(0)
    assert set(homes.tolist()) == set(range(order.num_windows))  # every window is some batch's home
    assert len(dataset._window_cuts(0, homes)) >= 2  # batches cross from one worker's window to the next
    assert [both(b) for b in dataset.loader(num_workers=2)] == [both(b) for b in make().loader()]
    fetched: dict[str, set[str]] = {}
    for line in dataset.log.read_text().splitlines():
        pid, path, threads = line.split()
        fetched.setdefault(pid, set()).add(path)
        assert int(threads) == decoding_threads(2, 2, remote=False)  # each worker's share of the CPUs
    served = [
        {dataset.shards[s].path for w in range(worker, order.num_windows, 2) for s in order.window_shards(w)}
        for worker in range(2)
    ]
    assert sorted(fetched.values(), key=sorted) == sorted(served, key=sorted)


def test_workers_resume_at_and_inside_a_batch_made_in_two_parts(parquet_dir):
    def make():
        return StreamingDataset(parquet_dir, seed=5, batch_size=2, seq_len=7, shuffle_window=2)

    full = [key(b) for b in make().loader()]
    dataset = make()
    bounds = window_groups(dataset._home_windows(0))
    crossing = [bounds[group] - 1 for group, *_ in dataset._window_cuts(0, dataset._home_windows(0))][:2]
    assert crossing
    for stop in (*crossing, crossing[0] + 1):  # before and after a batch made in two parts
        loader = make().loader(num_workers=2)
        head = head_of(loader, stop)
        restored = make().loader(num_workers=3)
        restored.load_state_dict(loader.state_dict())
        assert head + [key(b) for b in restored] == full
    source = make()
    items = iter(source)  # one block of the crossing batch taken: the rest of it is made whole
    taken = [next(items)["input_ids"] for _ in range(2 * crossing[0] + 1)]
    resumed = make()
    resumed.load_state_dict(source.state_dict())
    assert resumed.state_dict()["partial"] == 1
    rest = [b["input_ids"] for b in resumed.loader(num_workers=2)]
    assert torch.cat([torch.stack(taken).flatten(), *(b.flatten() for b in rest)]).tolist() == [
        t for batch in full for t in batch
    ]


def test_dataset_state_follows_its_loaders_workers(parquet_dir):
    dataset = StreamingDataset(parquet_dir, seed=3, batch_size=2)
    full = [key(b) for b in StreamingDataset(parquet_dir, seed=3, batch_size=2).loader()]
    loader = dataset.loader(num_workers=2)
    head = head_of(loader, 5)
    assert dataset.state_dict()["samples_consumed"] == 10 == loader.state_dict()["samples_consumed"]
    resumed = StreamingDataset(parquet_dir, seed=3, batch_size=2)
    resumed.load_state_dict(dataset.state_dict())
    assert head + [key(b) for b in resumed.loader(num_workers=2)] == full
    # a new iteration of the same loader continues where the last one stopped, then the epoch is over
    assert head + [key(b) for b in loader] == full
    assert list(loader) == []
    dataset.set_epoch(1)
    assert len(list(loader)) == len(full)


def test_a_torchdata_loader_state_resumes_elastically(parquet_dir):
    from torchdata.stateful_dataloader import StatefulDataLoader

    def make():
        return StreamingDataset(parquet_dir, seed=5, batch_size=2, seq_len=7)

    full = [key(b) for b in make().loader()]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "'set_vital' is deprecated")  # torchdata's own, a user's choice
        theirs = StatefulDataLoader(make(), batch_size=2, num_workers=2)
    head = []
    for batch in theirs:
        head.append(tuple(batch["input_ids"].flatten().tolist()))
        if len(head) == 4:
            break
    ours = make().loader(num_workers=3)
    ours.load_state_dict(theirs.state_dict())
    assert head + [key(b) for b in ours] == full


def test_a_plain_dataloader_with_workers_gives_the_loaders_order_or_is_refused(parquet_dir):
    def make(**options):
        return StreamingDataset(parquet_dir, seq_len=7, seed=2, position_ids=True, **options)

    plain = list(torch.utils.data.DataLoader(make(batch_size=3), batch_size=3, num_workers=2))
    ours = list(make(batch_size=3).loader(num_workers=0))
    assert len(plain) == len(ours) == make(batch_size=3).num_batches
    for name in ("input_ids", "position_ids"):
        assert torch.equal(torch.stack([b[name] for b in plain]), torch.stack([b[name] for b in ours]))
    records = StreamingDataset(parquet_dir, batch_size=4)
    plain_records = torch.utils.data.DataLoader(
        records, batch_size=4, num_workers=2, collate_fn=collate_records
    )
    assert [key(b) for b in plain_records] == [key(b) for b in records.loader()]
    with pytest.raises(
        UsageError, match=r"pass the same batch_size .* dataset.loader\(num_workers=2\)"
    ) as refused:
        list(torch.utils.data.DataLoader(make(), batch_size=8, num_workers=2))
    # The raised error's frames hold the failed DataLoader iterator in a reference cycle. Left to the cycle
    # collector, its queues are closed before its __del__ asks the workers to stop, so it waits 5 s for each
    # worker and then kills it. Freed now, it stops them at once.
    traceback.clear_frames(refused.tb)
    assert multiprocessing.active_children() == []
    one_worker = torch.utils.data.DataLoader(make(), batch_size=8, num_workers=1)  # one stream: in order
    in_order = torch.stack([item["input_ids"] for item in make()])
    assert torch.equal(torch.cat([b["input_ids"] for b in one_worker]), in_order)


def test_loader_refuses_what_would_break_its_order(parquet_dir):
    dataset = StreamingDataset(parquet_dir, batch_size=2)
    for options in ({"batch_size": 4}, {"collate_fn": list}, {"num_workers": 1, "persistent_workers": True}):
        with pytest.raises(UsageError, match="does not take"):
            dataset.loader(**options)
    for workers in (-1, 1.5, True, "2"):  # before: torch's errors, 1.5 only once iterated, naming no option
        with pytest.raises(
            UsageError, match=f"^num_workers must be an integer of at least 0, not {workers!r}$"
        ):
            dataset.loader(num_workers=workers)
    assert len(list(dataset.loader(num_workers=np.int64(0)))) == dataset.num_batches


def test_packing_workers_have_a_bounded_number_of_tokens_made_ahead(parquet_dir, monkeypatch):
    """Each of several packing workers may have IN_FLIGHT_TOKENS tokens of runs requested ahead (the default
    prefetch_factor, at least the DataLoader's 2); the caller's value wins; one worker and records keep
    the DataLoader's default."""
    packed = StreamingDataset(parquet_dir, batch_size=2, seq_len=7)
    assert packed.loader(num_workers=2).prefetch_factor == IN_FLIGHT_TOKENS // (RUN_ITEMS * 8) > 2
    assert packed.loader(num_workers=2, prefetch_factor=3).prefetch_factor == 3
    assert packed.loader().prefetch_factor is None  # no workers: nothing is made ahead
    assert packed.loader(num_workers=1).prefetch_factor == 2
    assert StreamingDataset(parquet_dir, batch_size=2).loader(num_workers=2).prefetch_factor == 2

    def epoch(**options) -> list[tuple]:
        return [
            key(batch) for batch in StreamingDataset(parquet_dir, batch_size=2, seq_len=7).loader(**options)
        ]

    ahead = epoch(num_workers=2)
    assert ahead == epoch(num_workers=2, prefetch_factor=2) == epoch() and len(ahead) == packed.num_batches
    monkeypatch.setattr(loader_module, "IN_FLIGHT_TOKENS", RUN_ITEMS * 8 - 1)  # less than one run: the floor
    assert packed.loader(num_workers=2).prefetch_factor == 2


def test_making_and_iterating_a_loader_warns_nothing(parquet_dir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = StreamingDataset(parquet_dir, batch_size=2, seq_len=7)
        for workers in (0, 2):
            dataset.set_epoch(workers)
            assert len(list(dataset.loader(num_workers=workers))) == dataset.num_batches
    assert [str(w.message) for w in caught] == []


def test_spawned_workers_give_the_same_batches(parquet_dir):
    """Spawned workers (the default on macOS) get the dataset pickled, without this process's threads."""
    dataset = StreamingDataset(parquet_dir, seed=4, batch_size=3, seq_len=5)
    next(iter(dataset))  # this process now holds decoding threads
    dataset.set_epoch(1)
    spawned = dataset.loader(num_workers=2, multiprocessing_context="spawn")
    reference = StreamingDataset(parquet_dir, seed=4, batch_size=3, seq_len=5, epoch=1)
    assert [key(b) for b in spawned] == [key(b) for b in reference.loader()]


def _note_the_decoder(worker: int) -> None:
    """A worker's ``worker_init_fn``: note in ``$DECODER_NOTES/<worker>`` whether it has pyarrow.parquet."""
    Path(os.environ["DECODER_NOTES"], str(worker)).write_text(str("pyarrow.parquet" in sys.modules))


def test_workers_inherit_the_decoders_from_the_loader(parquet_dir, tmp_path, monkeypatch):
    """The loader imports pyarrow before it forks its workers: they do not import it again, each epoch."""
    import pyarrow

    monkeypatch.setattr(pyarrow, "parquet", pyarrow.parquet)  # put back after the import below
    monkeypatch.delitem(sys.modules, "pyarrow.parquet")  # as in a script that never imported it
    monkeypatch.setenv("DECODER_NOTES", str(tmp_path))
    dataset = StreamingDataset(parquet_dir, batch_size=2, seq_len=5)
    batches = list(dataset.loader(num_workers=2, worker_init_fn=_note_the_decoder))
    assert len(batches) == dataset.num_batches
    assert [(tmp_path / str(worker)).read_text() for worker in (0, 1)] == ["True", "True"]


def test_a_process_exits_only_after_its_running_shard_calls_and_cancels_the_queued_ones(tmp_path):
    """A process that ends while a shard thread is inside a call (decoding, in pyarrow's native code) waits
    for that call, so that the interpreter is not torn down under it, and starts none of the queued calls."""
    code = (
        "import sys, threading, time\n"
        "from pathlib import Path\n"
        "from ltsgen.loaders.reader import _DaemonPool\n"
        "out, started = Path(sys.argv[1]), threading.Event()\n"
        "def running():\n"
        "    started.set()\n"
        "    time.sleep(0.5)\n"
        "    (out / 'running').write_text('finished')\n"
        "pool = _DaemonPool(1)\n"
        "pool.submit(running)\n"
        "pool.submit((out / 'queued').write_text, 'started')\n"
        "started.wait()\n"
    )
    run = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=subprocess_env(), capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "running").read_text() == "finished"
    assert not (tmp_path / "queued").exists()
