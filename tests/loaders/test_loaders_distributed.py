"""Real processes: gloo ranks at world sizes 1-3 with 0-3 DataLoader workers, elastic 2 -> 3 ranks, kill -9."""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from loader_fixtures import kill_group, make_dataset, subprocess_env, wait_all
from loader_procs import ELASTIC_STOP, GLOBAL_BATCH, SEED

from ltsgen.loaders import StreamingDataset

SUPPORT = Path(__file__).resolve().parents[1] / "support"
SIZES = [17, 1, 9, 30, 4, 12, 1, 22, 6, 3]  # 105 records: 17 global batches of 6, 3 left over
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module")
def directory(tmp_path_factory) -> Path:
    return make_dataset(tmp_path_factory.mktemp("dist"), SIZES, "webdataset")


@pytest.fixture(scope="module")
def global_order(directory) -> list[list[str]]:
    """The uninterrupted order of global batches, from one process."""
    dataset = StreamingDataset(directory, seed=SEED, batch_size=GLOBAL_BATCH)
    return [list(batch["id"]) for batch in dataset.loader(num_workers=0)]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _launch(
    world: int, directory: Path | str, out: Path, resume: Path | None = None, **env: str
) -> list[subprocess.Popen]:
    out.mkdir()
    port = str(_free_port())
    args = [sys.executable, str(SUPPORT / "loader_procs.py"), "ranks", str(directory), str(out)]
    args += [str(resume)] if resume else []
    return [
        subprocess.Popen(
            args,
            env=subprocess_env(
                RANK=str(r), WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=port, **env
            ),
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        for r in range(world)
    ]


def merged(per_rank: list[list[list[str]]]) -> list[list[str]]:
    """Global batches from each rank's slices: rank r's t-th batch is slice r of global batch t."""
    return [[i for rank in per_rank for i in rank[t]] for t in range(len(per_rank[0]))]


def test_ranks_and_workers_see_each_sample_once_and_resume_elastically(directory, global_order, tmp_path):
    assert len(global_order) == 17 and len({i for b in global_order for i in b}) == 102
    one_and_two = _launch(1, directory, tmp_path / "w1") + _launch(2, directory, tmp_path / "w2")
    wait_all(one_and_two, timeout=120)
    three = _launch(3, directory, tmp_path / "w3", resume=tmp_path / "w2" / "state.json")
    wait_all(three, timeout=120)
    for world in (1, 2, 3):
        results = [json.loads((tmp_path / f"w{world}" / f"rank{r}.json").read_text()) for r in range(world)]
        for workers in ("0", "1", "2", "3"):
            per_rank = [result[workers] for result in results]
            assert {len(batches) for batches in per_rank} == {17}  # equal counts on every rank
            assert all(len(b) == GLOBAL_BATCH // world for batches in per_rank for b in batches)
            assert merged(per_rank) == global_order, (world, workers)  # same global batches, each sample once
    head = merged(
        [json.loads((tmp_path / "w2" / f"rank{r}.json").read_text())["elastic_head"] for r in range(2)]
    )
    tail = merged(
        [json.loads((tmp_path / "w3" / f"rank{r}.json").read_text())["elastic_tail"] for r in range(3)]
    )
    assert len(head) == ELASTIC_STOP
    assert head + tail == global_order  # 2 ranks -> 3 ranks: nothing lost, nothing repeated


def test_a_mixture_splits_over_gloo_ranks_and_resumes_from_2_to_3_ranks(directory, tmp_path):
    other = make_dataset(tmp_path / "other", [7, 5, 8], "parquet", first_index=400)
    mixture = {str(directory): 0.75, str(other): 0.25}
    reference = StreamingDataset(mixture, seed=SEED, batch_size=GLOBAL_BATCH)
    global_order = [list(batch["id"]) for batch in reference.loader()]
    assert len(global_order) == (105 + 20) // GLOBAL_BATCH
    assert sum(int(i.split("-")[1]) >= 400 for b in global_order for i in b) == 30  # a quarter of 120
    spec = json.dumps(mixture)
    wait_all(_launch(2, spec, tmp_path / "w2", WORKERS="2"), timeout=120)
    wait_all(
        _launch(3, spec, tmp_path / "w3", resume=tmp_path / "w2" / "state.json", WORKERS="1"), timeout=120
    )
    w2 = [json.loads((tmp_path / "w2" / f"rank{r}.json").read_text()) for r in range(2)]
    w3 = [json.loads((tmp_path / "w3" / f"rank{r}.json").read_text()) for r in range(3)]
    assert merged([result["2"] for result in w2]) == global_order
    assert merged([result["1"] for result in w3]) == global_order
    head, tail = merged([r["elastic_head"] for r in w2]), merged([r["elastic_tail"] for r in w3])
    assert head + tail == global_order  # 2 ranks -> 3 ranks: nothing lost, nothing repeated


def test_kill_9_at_random_steps_then_resume_gives_the_uninterrupted_order(directory, global_order, tmp_path):
    checkpoint = tmp_path / "checkpoint.json"
    rng = random.Random(0)
    for workers in (2, 0, 1):  # each restart with another worker count
        seen = len(json.loads(checkpoint.read_text())["batches"]) if checkpoint.exists() else 0
        target = seen + rng.randint(1, 4)
        args = [
            sys.executable,
            str(SUPPORT / "loader_procs.py"),
            "train",
            str(directory),
            str(checkpoint),
            str(workers),
        ]
        process = subprocess.Popen(args, env=subprocess_env(), stderr=subprocess.PIPE, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and process.poll() is None:
                if checkpoint.exists() and len(json.loads(checkpoint.read_text())["batches"]) >= target:
                    break
                time.sleep(0.01)
            assert process.poll() is None, process.stderr.read().decode()[-3000:]
        finally:
            kill_group(process)  # the process and its DataLoader workers, mid-run
    process = subprocess.run(args, env=subprocess_env(), capture_output=True, timeout=120)
    assert process.returncode == 0, process.stderr.decode()[-3000:]
    assert Path(str(checkpoint) + ".done").exists()
    assert json.loads(checkpoint.read_text())["batches"] == global_order
