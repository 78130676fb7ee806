"""The Ray engine on a real local Ray runtime (``ray.init(num_cpus=2)``, started once for the module): the
same bytes as the local engine, resume after the driver's kill -9, and comparison runs as Ray tasks."""

from __future__ import annotations

import csv
import json
import os
import subprocess

import pytest
from corpus_fixtures import C4_GZ
from process_tools import kill_9, wait_until
from remote_fixtures import BUCKETS, KILLED, LTSGEN, local_tree, remote_tree
from training_fixtures import write_tiny_dataset

from ltsgen.cli import main

ray = pytest.importorskip("ray")
TIMINGS = ("peak_memory_mib", "train_tokens_per_s")


@pytest.fixture(scope="module")
def ray_runtime(s3_server):
    # started after the S3 server, so that its workers find the server's AWS_* variables, as a cluster's
    # nodes find their own credentials
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_buckets_on_ray_into_s3_equal_the_local_engine(
    ray_runtime, s3_server, real_data, c4_buckets_reference
):
    tokenizer, local = c4_buckets_reference  # the local engine's build of the same arguments
    argv = ["buckets", *BUCKETS, "--input", str(real_data / C4_GZ), "--tokenizer", str(tokenizer)]
    bucket = s3_server.bucket()
    # both passes as Ray tasks; the chunks between them go through the store, as on a cluster
    assert main([*argv, "--out", f"s3://{bucket}/ray", "--engine", "ray"]) == 0
    fs = s3_server.client()
    assert remote_tree(fs, f"{bucket}/ray") == local_tree(local)
    assert len(fs.glob(f"{bucket}/ray/train/256-inf/shard-*")) > 1  # the tasks' shards rolled over in order
    assert not fs.find(f"{bucket}/ray/.ltsgen/chunks")


def test_a_killed_ray_driver_resumes_from_the_journal(ray_runtime, s3_server, killed_reference):
    """Its resumed build (a driver joining a running cluster with --ray-address) equals the local engine's
    build, byte for byte."""
    bucket = s3_server.bucket()
    url, prefix = f"s3://{bucket}/lts", f"{bucket}/lts"
    fs = s3_server.client()
    # a driver of its own, with its own local Ray runtime
    driver = subprocess.Popen([LTSGEN, "stories", "--out", url, *KILLED, "--engine", "ray", "--workers", "2"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(driver, lambda: len(fs.find(f"{prefix}/.ltsgen/journal.jsonl")) >= 2, timeout=240)
        kill_9(driver)  # its local Ray runtime must go with it
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    assert not fs.exists(f"{prefix}/manifest.json")
    cluster = ray.get_runtime_context().gcs_address  # this process's runtime, as a cluster's head
    rerun = subprocess.run([LTSGEN, "stories", "--out", url, *KILLED, "--engine", "ray", "--ray-address", cluster],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    assert "kept from an earlier run" in rerun.stdout
    assert remote_tree(fs, prefix) == local_tree(killed_reference)


def test_ray_tasks_see_the_commands_storage_options(ray_runtime, monkeypatch):
    """A command's --storage-options reach tasks on workers started before it (and on other nodes)."""
    from ltsgen.engines import RayEngine

    monkeypatch.setenv("FSSPEC_S3", '{"endpoint_url": "http://127.0.0.1:9"}')
    with RayEngine(workers=1) as engine:
        assert list(engine.map(os.getenv, ["FSSPEC_S3"])) == ['{"endpoint_url": "http://127.0.0.1:9"}']


def test_compare_runs_as_ray_tasks_equal_the_local_engine(ray_runtime, tmp_path):
    """Two encodings x two seeds, each run a Ray task: the same losses and evaluations as in this process."""
    data = write_tiny_dataset(tmp_path / "lts")
    args = ["compare", "--data", str(data), "--encodings", "rope,alibi", "--train-lengths", "32", "--seeds", "0,1",
            "--eval-lengths", "16,64", "--steps", "3", "--batch-size", "4", "--d-model", "32", "--n-layers", "2",
            "--heads", "2", "--vocab-size", "300", "--eval-sequences", "4", "--device", "cpu", "--log-every", "1",
            "--no-progress"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    ray_args = ["--engine", "ray", "--cpus-per-run", "1", "--gpus-per-run", "0"]
    assert main([*args, *ray_args, "--out", str(tmp_path / "ray")]) == 0
    for run in ("T32-seed0/rope", "T32-seed0/alibi", "T32-seed1/rope", "T32-seed1/alibi"):
        losses = [
            [json.loads(line)["loss"] for line in (tmp_path / out / "runs" / run / "metrics.jsonl").open()]
            for out in ("local", "ray")
        ]
        assert losses[0] == losses[1] and len(losses[0]) == 3, run
    rows = []
    for out in ("local", "ray"):
        with (tmp_path / out / "results.csv").open() as handle:  # timings and memory aside
            rows.append(
                [{k: v for k, v in row.items() if k not in TIMINGS} for row in csv.DictReader(handle)]
            )
    assert len(rows[0]) == 2 * 2 * 2 and rows[0] == rows[1]
