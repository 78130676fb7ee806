"""The generic build driver: journal, resume after a failed job, repair of damaged shards, refusals, splits."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from faults import hold_lock

from ltsgen.build import BuildError, BuildSpec, Job, assign_split, parse_splits, run_build, stable_fraction
from ltsgen.loaders.contract import read_manifest

FAIL_ON: set[str] = set()  # job keys that raise (this module's jobs run in-process: workers=1)


def write_numbers(job: Job, output) -> dict:
    first, count = job.payload
    with output.open(job.key) as writer:
        for i in range(first, first + count):
            if job.key in FAIL_ON and i == first + 1:
                raise RuntimeError(f"number {i} failed")
            writer.write(
                {"id": f"n-{i:05d}", "text": " ".join(["number", str(i)] * (i % 7 + 1)), "source": "test"}
            )
    return {"first": first}


def spec(directory: Path, jobs: int = 4, argument: int = 1) -> BuildSpec:
    return BuildSpec(
        directory=directory,
        builder={"name": "numbers", "version": "1", "arguments": {"argument": argument, "jobs": jobs}},
        source="test",
        fmt="jsonl.zst",
        splits=["train"],
        jobs=[Job(f"train/shard-{i:05d}.jsonl.zst", (10 * i, 10), weight=10) for i in range(jobs)],
        run_job=write_numbers,
        finalize=lambda results: {"statistics": {"firsts": {r.key: r.stats["first"] for r in results}}},
    )


def tree(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != "journal.jsonl"
    }


@pytest.fixture()
def clean(tmp_path) -> Path:
    run_build(spec(tmp_path / "clean"), progress=False, card=False)
    return tmp_path / "clean"


def test_failed_job_keeps_finished_ones_and_resume_completes(clean, tmp_path):
    out = tmp_path / "out"
    FAIL_ON.add("train/shard-00002.jsonl.zst")
    try:
        with pytest.raises(RuntimeError, match="^number 21 failed") as failed:
            run_build(spec(out), progress=False, card=False)
    finally:
        FAIL_ON.clear()
    assert failed.value.__notes__ == ["while running job train/shard-00002.jsonl.zst"]  # a bug: and where
    assert not (out / "manifest.json").exists()
    assert sorted(p.name for p in (out / "train").iterdir()) == [
        "shard-00000.jsonl.zst",
        "shard-00001.jsonl.zst",
    ]
    result = run_build(spec(out), progress=False, card=False)
    assert (result.status, result.jobs_kept, result.jobs_run) == ("resumed", 2, 2)
    assert tree(out) == tree(clean)


def write_after_an_abandoned_attempt(job: Job, output) -> dict:
    """As a job that an engine runs again after its first attempt's worker died mid-write."""
    (Path(output.directory.local_path(job.key)).parent / f".{Path(job.key).name}.k3x9q1.tmp").write_bytes(
        b"half"
    )
    return write_numbers(job, output)


def test_a_build_ends_without_the_temporary_files_of_attempts_that_died(clean, tmp_path):
    out = tmp_path / "out"
    (out / "train").mkdir(parents=True)
    run_build(replace(spec(out), run_job=write_after_an_abandoned_attempt), progress=False, card=False)
    assert tree(out) == tree(clean)  # no .shard-0000N.jsonl.zst.k3x9q1.tmp left


def test_damaged_shard_of_finished_build_is_rewritten(clean):
    before = tree(clean)
    shard = clean / "train" / "shard-00001.jsonl.zst"
    shard.write_bytes(shard.read_bytes()[:-3] + b"xyz")
    with open(clean / ".ltsgen" / "journal.jsonl", "a") as journal:
        journal.write('{"job": "train/shard-0')  # a torn line, as a kill mid-write leaves it
    result = run_build(spec(clean), progress=False, card=False)
    assert (result.status, result.jobs_kept, result.jobs_run) == ("resumed", 3, 1)
    assert tree(clean) == before
    assert run_build(spec(clean), progress=False, card=False).status == "up to date"


def test_overwrite_removes_only_the_previous_build(clean):
    (clean / "notes.txt").write_text("mine")
    with pytest.raises(BuildError, match=r"other arguments \(argument 1 -> 2, jobs 4 -> 2\)"):
        run_build(spec(clean, jobs=2, argument=2), progress=False, card=False)
    run_build(spec(clean, jobs=2, argument=2), overwrite=True, progress=False, card=False)
    assert sorted(p.name for p in (clean / "train").iterdir()) == [
        "shard-00000.jsonl.zst",
        "shard-00001.jsonl.zst",
    ]
    assert (clean / "notes.txt").read_text() == "mine"
    assert read_manifest(clean).builder["arguments"] == {"argument": 2, "jobs": 2}


def test_directory_with_other_files_is_refused(tmp_path):
    (tmp_path / "data.csv").write_text("a,b\n")
    with pytest.raises(BuildError, match="holds no ltsgen build"):
        run_build(spec(tmp_path), progress=False, card=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.csv"]


def test_two_jobs_writing_one_shard_is_an_error(tmp_path):
    two = spec(tmp_path / "bad", jobs=2)
    jobs = [Job(j.key, j.payload) for j in two.jobs[:1]] + [Job("other", (10, 10))]
    bad = replace(two, jobs=jobs, run_job=write_to_first_shard)
    with pytest.raises(BuildError, match="written by two jobs"):
        run_build(bad, progress=False, card=False)


def write_to_first_shard(job: Job, output) -> None:
    with output.open("train/shard-00000.jsonl.zst") as writer:
        writer.write({"id": f"x-{job.payload[0]}", "text": "one", "source": "test"})


def test_splits_are_stable_and_proportional():
    splits = parse_splits("train=0.9,validation=0.05,test=0.05")
    counts = Counter(assign_split(f"lts-0-{i:08d}", splits) for i in range(20000))
    assert abs(counts["train"] / 20000 - 0.9) < 0.01 and abs(counts["test"] / 20000 - 0.05) < 0.005
    # the hash is sha256 of the key: fixed across machines and Python versions
    assert stable_fraction("lts-0-00000000") == 0.805793785988219
    letters = {"train": "t", "validation": "v", "test": "x"}
    assert "".join(letters[assign_split(f"lts-0-{i:08d}", splits)] for i in range(40)) == (
        "ttttvttttttttvtvxttttttxttxttttttttttttt"
    )
    assert assign_split("any", {"train": 1.0, "test": 0.0}) == "train"
    with pytest.raises(BuildError, match="sum to 0.9"):
        parse_splits("train=0.9")
    # given in another order, the same fractions are the same splits: before, a rerun with them reordered
    # was taken for the same build and resumed with other assignments (documents in two splits, or none)
    reordered = parse_splits("test=0.05,validation=0.05,train=0.9")
    assert list(reordered) == ["train", "validation", "test"] and reordered == splits
    backwards = dict(reversed(splits.items()))  # a library caller's dict in another order
    assert [assign_split(f"lts-0-{i:08d}", backwards) for i in range(200)] == [
        assign_split(f"lts-0-{i:08d}", splits) for i in range(200)
    ]


def test_second_build_in_the_same_directory_is_refused(clean):
    (
        clean / "manifest.json"
    ).unlink()  # an unfinished build (a finished one is only read: see test_faults_build)
    with hold_lock(clean):
        with pytest.raises(BuildError, match="another build is running there"):
            run_build(spec(clean), progress=False, card=False)
    assert run_build(spec(clean), progress=False, card=False).status == "resumed"
    assert run_build(spec(clean), progress=False, card=False).status == "up to date"


def test_unreadable_build_state_needs_overwrite(clean):
    (clean / "manifest.json").unlink()
    (clean / ".ltsgen" / "build.json").write_text("{not json")
    with pytest.raises(BuildError, match="other arguments"):
        run_build(spec(clean), progress=False, card=False)
    assert run_build(spec(clean), overwrite=True, progress=False, card=False).status == "built"
