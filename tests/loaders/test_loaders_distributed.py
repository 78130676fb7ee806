"""Real processes: gloo ranks at world sizes 1-3 with 0-3 DataLoader workers, a mixture over ranks, elastic 2 -> 3
ranks, kill -9."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import time
from pathlib import Path

import pytest
from loader_fixtures import make_dataset
from loader_procs import ELASTIC_STOP, GLOBAL_BATCH, SEED, train
from loader_procs import world as loader_world
from process_tools import forked, free_port, join_all, kill_forked

from ltsgen.loaders import StreamingDataset

SIZES = [17, 1, 9, 30, 4, 12, 1, 22, 6, 3]  # 105 records: 17 global batches of 6, 3 left over
pytestmark = [pytest.mark.torch, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("dist"), SIZES, "webdataset")


@pytest.fixture(scope="module")
def global_order(directory) -> list[list[str]]:
    """The uninterrupted order of global batches, from one process."""
    dataset = StreamingDataset(directory, seed=SEED, batch_size=GLOBAL_BATCH)
    return [list(batch["id"]) for batch in dataset.loader(num_workers=0)]


def _launch(world: int, out: Path, jobs: dict[str, dict]) -> multiprocessing.Process:
    """Rank 0 of one gloo group, ``forked`` from this process, which forks its other ranks
    (``loader_procs.world``): ``world`` ranks running ``jobs`` one after the other."""
    out.mkdir()
    env = {"WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    return forked(loader_world, str(out), jobs, env=env)


def merged(per_rank: list[list[list[str]]]) -> list[list[str]]:
    """Global batches from each rank's slices: rank r's t-th batch is slice r of global batch t."""
    return [[i for rank in per_rank for i in rank[t]] for t in range(len(per_rank[0]))]


def test_ranks_and_workers_see_each_sample_once_and_resume_elastically(directory, global_order, tmp_path):
    """One gloo group per world size (1, 2, 3) runs both datasets, so each rank process starts once:
    - one dataset at 1, 2 and 3 ranks with 0-3 workers: equal batch counts on every rank, the single process's
      global batches, each sample once; a 2-rank run stopped after 5 steps resumes on 3 ranks with nothing
      lost or repeated;
    - a mixture (3 to 1 of two datasets, parquet beside webdataset) split over 2 ranks with 2 workers and over
      3 ranks with 1 worker gives its single-process order, and resumes from 2 to 3 ranks the same way."""
    assert len(global_order) == 17 and len({i for b in global_order for i in b}) == 102
    other = make_dataset(tmp_path / "other", [7, 5, 8], "parquet", first_index=400)
    mixture = {str(directory): 0.75, str(other): 0.25}
    mixture_order = [
        list(b["id"]) for b in StreamingDataset(mixture, seed=SEED, batch_size=GLOBAL_BATCH).loader()
    ]
    assert len(mixture_order) == (105 + 20) // GLOBAL_BATCH
    assert sum(int(i.split("-")[1]) >= 400 for b in mixture_order for i in b) == 30  # a quarter of 120
    plain = {"source": str(directory), "workers": [0, 1, 2, 3]}
    evaluation = make_dataset(tmp_path / "eval", [5], split="eval", buckets=["16"], lengths=[16] * 5)
    one = _launch(1, tmp_path / "w1", {"plain": plain})
    two = _launch(2, tmp_path / "w2", {"plain": plain, "mixture": {"source": mixture, "workers": [2]},
                                       "evaluation": {"source": str(evaluation), "eval_length": 16}})  # fmt: skip
    join_all([one, two], timeout=120)
    three = _launch(
        3,
        tmp_path / "w3",
        {
            "plain": {**plain, "resume": str(tmp_path / "w2" / "plain-state.json")},
            "mixture": {  # the same sources, spelled another way
                "source": {f"{directory}/": 0.75, os.path.relpath(other): 0.25},
                "workers": [1],
                "resume": str(tmp_path / "w2" / "mixture-state.json"),
            },
        },
    )
    join_all([three], timeout=120)

    def results(world: int, job: str) -> list[dict]:
        return [
            json.loads((tmp_path / f"w{world}" / f"{job}-rank{r}.json").read_text()) for r in range(world)
        ]

    for world in (1, 2, 3):
        for workers in ("0", "1", "2", "3"):
            per_rank = [result[workers] for result in results(world, "plain")]
            assert {len(batches) for batches in per_rank} == {17}  # equal counts on every rank
            assert all(len(b) == GLOBAL_BATCH // world for batches in per_rank for b in batches)
            assert merged(per_rank) == global_order, (world, workers)  # same global batches, each sample once
    head = merged([r["elastic_head"] for r in results(2, "plain")])
    tail = merged([r["elastic_tail"] for r in results(3, "plain")])
    assert len(head) == ELASTIC_STOP
    assert head + tail == global_order  # 2 ranks -> 3 ranks: nothing lost, nothing repeated

    # every rank reads the whole evaluation set (before: every other sequence, the odd last one on none)
    assert [r["eval_set"] for r in results(2, "evaluation")] == [[1, 101, 201, 301, 401]] * 2
    w2, w3 = results(2, "mixture"), results(3, "mixture")
    assert merged([result["2"] for result in w2]) == mixture_order
    assert merged([result["1"] for result in w3]) == mixture_order
    head, tail = merged([r["elastic_head"] for r in w2]), merged([r["elastic_tail"] for r in w3])
    assert len(head) == ELASTIC_STOP
    assert head + tail == mixture_order  # the mixture, 2 ranks -> 3 ranks: nothing lost, nothing repeated


def test_kill_9_at_random_steps_then_resume_gives_the_uninterrupted_order(directory, global_order, tmp_path):
    """A forked process with 2 workers killed at a random step, its resume with 0 workers killed again (a kill
    of a resumed process: a third kill would be one more of the same), then the resume with 1 worker, to the
    end, in this process: each with another worker count, the uninterrupted order."""
    checkpoint = tmp_path / "checkpoint.json"
    rng = random.Random(0)
    for workers in (2, 0):  # each restart with another worker count
        seen = len(json.loads(checkpoint.read_text())["batches"]) if checkpoint.exists() else 0
        target = seen + rng.randint(1, 4)
        process = forked(train, str(directory), str(checkpoint), workers)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and process.is_alive():
                if checkpoint.exists() and len(json.loads(checkpoint.read_text())["batches"]) >= target:
                    break
                time.sleep(0.01)
            assert process.is_alive(), f"the run ended before its kill (exit code {process.exitcode})"
        finally:
            kill_forked(process)  # the process and its DataLoader workers, mid-run
    train(str(directory), str(checkpoint), 1)  # the last kill's resume, to the end, in this process
    assert Path(str(checkpoint) + ".done").exists()
    assert json.loads(checkpoint.read_text())["batches"] == global_order
