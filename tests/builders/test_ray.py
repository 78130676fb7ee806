"""The Ray engine on a real local Ray runtime (``ray.init(num_cpus=2)``, started once for the module): a
build from and into S3 with the same bytes as the local engine's from local files, resume after the driver's
kill -9, and comparison runs as Ray tasks."""

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
# all four tests in `make test`'s process for the tests marked torch (one of them runs models as Ray tasks):
# one Ray runtime, whose start takes seconds of both cores, serves the module
pytestmark = pytest.mark.torch
TIMINGS = ("peak_memory_mib", "train_tokens_per_s")


@pytest.fixture(scope="module")
def ray_runtime(s3_server):
    # started after the S3 server, so that its workers find the server's AWS_* variables, as a cluster's
    # nodes find their own credentials
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_buckets_from_and_to_s3_on_ray_equal_the_local_build(
    ray_runtime, s3_server, c4_on_s3, c4_buckets_reference, real_data
):
    """Inputs, tokenizer and output on S3, both passes as Ray tasks (the chunks between them go through the
    store, as on a cluster): byte for byte the local engine's build of the local files. One build shows both
    that any engine and that object-store inputs leave the bytes alone: only what names the inputs differs
    (the manifest's inputs, the command the card quotes), and nothing else in those two files."""
    bucket, (tokenizer, reference) = c4_on_s3, c4_buckets_reference
    url, inputs = f"s3://{bucket}/c4-buckets", f"s3://{bucket}/corpora/c4/*.json.gz"
    argv = ["buckets", *BUCKETS, "--input", inputs, "--tokenizer", f"s3://{bucket}/tok.json"]
    assert main([*argv, "--out", url, "--engine", "ray"]) == 0  # everything remote
    fs = s3_server.client()
    built, expected = remote_tree(fs, f"{bucket}/c4-buckets"), local_tree(reference)
    assert built.pop("manifest.json") and expected.pop("manifest.json")  # it names its inputs
    assert built.pop("README.md") and expected.pop("README.md")  # the card quotes the command
    assert built == expected  # every shard, the tokenizer and the plots
    assert sum(name.startswith("train/256-inf/shard-") for name in built) > 1  # the tasks' shards rolled over
    card = fs.cat_file(f"{bucket}/c4-buckets/README.md").decode()
    manifest = fs.cat_file(f"{bucket}/c4-buckets/manifest.json").decode()
    quoted = f"--input '{inputs}' --tokenizer s3://{bucket}/tok.json"
    size = (real_data / C4_GZ).stat().st_size
    assert quoted in card and quoted in manifest  # the command, as typed
    assert json.loads(manifest)["builder"]["arguments"]["inputs"] == [
        {"path": f"s3://{bucket}/corpora/c4/part-0.json.gz", "bytes": size}
    ]
    named = {quoted: f"--input {real_data / C4_GZ} --tokenizer {tokenizer}",
             f"s3://{bucket}/corpora/c4/part-0.json.gz": str(real_data / C4_GZ)}  # fmt: skip
    for remote, local in named.items():
        card, manifest = card.replace(remote, local), manifest.replace(remote, local)
    assert card == (reference / "README.md").read_text()  # all else equal, byte for byte
    assert manifest == (reference / "manifest.json").read_text()
    assert not fs.find(f"{bucket}/c4-buckets/.ltsgen/chunks")  # removed at the end


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


def test_a_bug_in_a_ray_task_is_one_line_naming_its_job(ray_runtime):
    from ltsgen.engines import EngineError, RayEngine

    def fail_noted(job: str) -> None:  # a bug in a job, noted as build.execute_job notes it (sent by value)
        error = ZeroDivisionError("division by zero")
        error.add_note(f"while running job {job}")
        raise error

    with RayEngine(workers=1) as engine, pytest.raises(EngineError) as failed:
        list(engine.map(fail_noted, ["train/shard-00002.parquet"]))
    assert str(failed.value) == (
        "a Ray task failed (while running job train/shard-00002.parquet): ZeroDivisionError: division by zero"
    )


def test_compare_runs_as_ray_tasks_equal_the_local_engine(ray_runtime, tmp_path):
    """Two encodings, each run a Ray task (the two at once, one CPU each): the same losses and evaluations as
    in this process. (A grid of seeds adds runs of the same kind: test_compare.py covers grids.)"""
    data = write_tiny_dataset(tmp_path / "lts")
    args = ["compare", "--data", str(data), "--encodings", "rope,alibi", "--train-lengths", "32", "--seeds", "1",
            "--eval-lengths", "16,64", "--steps", "3", "--batch-size", "4", "--d-model", "32", "--n-layers", "2",
            "--heads", "2", "--vocab-size", "300", "--eval-sequences", "4", "--device", "cpu", "--log-every", "1",
            "--no-progress"]  # fmt: skip
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    ray_args = ["--engine", "ray", "--cpus-per-run", "1", "--gpus-per-run", "0"]
    assert main([*args, *ray_args, "--out", str(tmp_path / "ray")]) == 0
    for run in ("T32-seed1/rope", "T32-seed1/alibi"):
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
    assert len(rows[0]) == 2 * 2 and rows[0] == rows[1]  # (encodings) x (evaluation lengths)


def test_tasks_no_node_holds_are_refused_where_the_cluster_cannot_grow_and_noted_where_it_can(
    ray_runtime, capsys
):
    """Before, `compare --engine ray --cpus-per-run 4` on a 2-CPU runtime (or `--gpus-per-run 1` on a cluster
    without a GPU) waited at 0% for ever, without a word."""
    from ltsgen.engines import EngineError, RayEngine

    engine = RayEngine(resources={"num_cpus": 4, "num_gpus": 1})
    with pytest.raises(EngineError, match=r"^--engine ray: each task asks for 4 CPUs and 1 GPU and a local Ray "
                       r"runtime has 2 CPUs and 0 GPUs; ask for less or give --workers N \(a local runtime then "
                       r"makes room for N tasks\)$"):  # fmt: skip
        engine._check_fits(ray, "a local Ray runtime", grows=False)
    engine._check_fits(ray, "head:6379 (--ray-address)", grows=True)  # an autoscaler may add the node
    assert capsys.readouterr().err == (
        "note: each task asks for 4 CPUs and 1 GPU; head:6379 (--ray-address) has 2 CPUs and 0 GPUs for now: "
        "the tasks wait for a node that has them (an autoscaler may add one)\n"
    )
    RayEngine(resources={"num_cpus": 2})._check_fits(ray, "a local Ray runtime", grows=False)  # fits: silent
    assert capsys.readouterr().err == ""
