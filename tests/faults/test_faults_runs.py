"""Faults of training runs and their outputs: folders that are not a run's, two runs in one folder, runs that
diverge, out-of-range options, damaged run files, read-only run folders, card and tokenizer outputs that would
replace a file of the user's."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from faults import forked_ltsgen, hold_lock, tree
from process_tools import kill_forked, wait_until
from training_fixtures import tiny_config, write_tiny_dataset

from ltsgen.cli import main
from ltsgen.loaders.contract import read_manifest, write_manifest
from ltsgen.outputs import LOCK_PATH as BUILD_LOCK_PATH
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import TrainConfig, train
from ltsgen.training.errors import DivergedError, TrainingError
from ltsgen.training.rundir import LOCK_PATH, MARKS, SUMMARY_NAME

pytestmark = pytest.mark.torch

TINY = ["--train-length", "32", "--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--n-heads", "2",
        "--vocab-size", "300", "--device", "cpu", "--log-every", "1", "--no-progress"]  # fmt: skip
STORIES = ["stories", "--num-stories", "12", "--max-words", "200", "--quiet"]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return write_tiny_dataset(tmp_path_factory.mktemp("runs") / "lts")


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory) -> Path:
    """A dataset whose records hold token ids (and eval/<L> sets), its tokenizer stored with it."""
    folder = tmp_path_factory.mktemp("tokenized")
    source = write_tiny_dataset(folder / "text")
    from ltsgen.training.data import _training_texts, open_manifest

    tokenizer = train_tokenizer(_training_texts(source, open_manifest(source)), 300)
    return write_tiny_dataset(folder / "lts", tokenizer=tokenizer, eval_lengths=(16, 32))


def last_error(capsys) -> str:
    """The one stderr line of an option refused while parsing."""
    err = capsys.readouterr().err
    assert "Traceback" not in err and "usage:" not in err, err
    (line,) = err.strip().splitlines()
    return line


def one_line(capsys, command: str) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ltsgen {command}: error: "), err
    return lines[0]


# ------------------------------------------------------------------ options


@pytest.mark.parametrize(
    ("command", "option", "value", "problem"),
    [
        ("train", "--lr", "-1", "must be above 0"),
        ("train", "--lr", "nan", "must be a finite number"),
        ("train", "--lr", "inf", "must be a finite number"),
        ("train", "--grad-clip", "-1", "must be above 0"),
        ("train", "--grad-clip", "0", "must be above 0"),
        ("train", "--min-lr-ratio", "1.5", "must be at most 1"),
        ("train", "--weight-decay", "-0.1", "must be at least 0"),
        ("train", "--warmup", "-5", "must be at least 0"),
        ("train", "--steps", "0", "must be at least 1"),
        ("train", "--batch-size", "-2", "must be at least 1"),
        ("train", "--train-length", "1", "must be at least 2"),
        ("train", "--vocab-size", "100", "must be at least 257"),
        ("train", "--seed", "-1", "must be at least 0"),
        ("train", "--seed", str(2**40), "must be at most 4,294,967,295"),
        ("train", "--n-layers", "99999999999999999999", "must be at most 4,096"),  # before: a traceback
        ("train", "--d-model", "100000000000000000000", "must be at most 65,536"),
        ("train", "--copy-task", "99999999999999999999", "must be at most 16,777,216"),
        ("compare", "--n-layers", "99999999999999999999", "must be at most 4,096"),
        ("train", "--eval-every", "-1", "must be at least 0"),
        ("train", "--eval-sequences", "0", "must be at least 1"),
        ("train", "--checkpoint-every", "-3", "must be at least 0"),
        ("train", "--log-every", "0", "must be at least 1"),
        ("train", "--stop-after", "0", "must be at least 1"),
        ("train", "--steps", "1e3", "expected an integer, got '1e3'"),
        ("compare", "--lr", "0", "must be above 0"),
        ("compare", "--finetune-steps", "-1", "must be at least 0"),
        ("compare", "--cpus-per-run", "0", "must be above 0"),
        ("compare", "--gpus-per-run", "-1", "must be at least 0"),
        ("compare", "--eval-sequences", "0", "must be at least 1"),
        ("compare", "--batch-tokens", "0", "must be at least 1"),
        ("evaluate", "--eval-sequences", "-4", "must be at least 1"),
        ("evaluate", "--batch-tokens", "0", "must be at least 1"),
        ("buckets", "--max-doc-chars", "-1", "must be at least 0"),
        ("buckets", "--eval-sequences", "-1", "must be at least 0"),
        ("buckets", "--eval-per-length", "-1", "must be at least 0"),
        ("buckets", "--shard-tokens", "0", "must be at least 1"),
        ("stories", "--seed", "-1", "must be at least 0"),
        ("tokenizer", "--max-doc-chars", "-1", "must be at least 0"),
        ("tokenizer", "--max-doc-chars", "many", "expected an integer, got 'many'"),
        ("tokenizer", "--max-documents", "0", "must be at least 1"),
    ],
)
def test_an_out_of_range_number_is_refused_while_parsing(command, option, value, problem, tmp_path, capsys):
    required = {"train": ["--data", "d", "--out", str(tmp_path / "r")], "evaluate": ["--data", "d", "--run", "r"],
                "compare": ["--data", "d", "--out", str(tmp_path / "c")],
                "buckets": ["--input", "i", "--tokenizer", "t.json", "--out", str(tmp_path / "c")],
                "tokenizer": ["--input", "i", "--out", str(tmp_path / "c")],
                "stories": ["--out", str(tmp_path / "c")]}[command]  # fmt: skip
    with pytest.raises(SystemExit) as refused:
        main([command, *required, f"{option}={value}"])
    assert refused.value.code == 2
    said = f"ltsgen {command}: error: argument {option}: "
    assert (
        last_error(capsys)
        == said
        + (problem if problem.startswith("expected") else f"{problem} (got {value})")
        + f" (see ltsgen {command} --help)"
    )
    assert not (tmp_path / "r").exists() and not (tmp_path / "c").exists()


def test_sizes_no_machine_holds_are_one_line_not_a_traceback(data, tmp_path, capsys):
    """Before: OverflowError, a 36-line torch trace, or "DefaultCPUAllocator: can't allocate memory"."""
    run = tmp_path / "run"
    for option in ("mlp_width=99999999999999999998", "num_buckets=99999999999999999998"):
        encoding = option.split("=")[0] == "mlp_width" and "fire" or "t5"
        argv = ["train", "--data", str(data), "--out", str(run), *TINY, "--encoding", encoding]
        assert main([*argv, "--encoding-option", option]) == 2
        assert one_line(capsys, "train").endswith(f"{option}: expected at most 16,777,216 in size")
    assert (
        main(
            [
                "tokenizer",
                "--data",
                str(data),
                "--vocab-size",
                "99999999999999999999",
                "--out",
                str(tmp_path / "t.json"),
            ]
        )
        == 2
    )
    assert one_line(capsys, "tokenizer").endswith("vocab size 99,999,999,999,999,999,999 is above 16,777,216")
    # within the limits, more than the machine holds: a 65,536-wide model asks 48 GiB for one matrix
    argv = ["train", "--data", str(data), "--out", str(run), *TINY, "--d-model", "65536", "--n-layers", "1"]
    assert main(argv) == 2
    assert re.fullmatch(
        r"ltsgen train: error: out of memory \([\d.,]+ GiB asked of the CPU at once\): ask for a smaller model, "
        r"batch, length or fewer workers",
        one_line(capsys, "train"),
    )
    assert not run.exists() and not (tmp_path / "t.json").exists()


def test_the_library_checks_the_same_bounds(data, tmp_path):
    with pytest.raises(TrainingError, match=r"^--grad-clip must be above 0 \(got -1\.0\)$"):
        train(tiny_config(data, tmp_path / "r", grad_clip=-1.0), progress=False)
    with pytest.raises(TrainingError, match=r"^--min-lr-ratio must be at most 1 \(got 2\.0\)$"):
        TrainConfig(data=str(data), out="r", min_lr_ratio=2.0).check()
    assert not (tmp_path / "r").exists()


def test_compare_workers_below_one_and_seeds_out_of_range_are_one_line(tmp_path, capsys):
    assert main(["compare", "--data", "d", "--out", str(tmp_path / "c"), "--workers", "0"]) == 2
    assert one_line(capsys, "compare").endswith("--workers must be at least 1 (got 0)")
    assert main(["compare", "--data", "d", "--out", str(tmp_path / "c"), "--seeds", "0,-1"]) == 2
    assert one_line(capsys, "compare").endswith("--seeds: every seed must be at least 0 (got -1)")
    assert not (tmp_path / "c").exists()


# ------------------------------------------------------------------ divergence


def test_a_diverging_run_stops_naming_the_step_and_says_so_to_resume_and_evaluate(data, tmp_path, capsys):
    run = tmp_path / "run"
    argv = ["train", "--data", str(data), "--out", str(run), "--steps", "6", "--lr", "1e9", *TINY]
    assert main(argv) == 2
    assert one_line(capsys, "train") == (
        f"ltsgen train: error: {run}: diverged at step 2: its loss or gradient norm is not finite; the run is "
        "stopped (try a lower --lr than 1e+09)"
    )
    summary = json.loads((run / SUMMARY_NAME).read_text())
    assert (summary["diverged"], summary["finished"], summary["step"]) == (True, False, 2)
    assert not (run / "checkpoint.pt").exists()  # the diverged weights are never saved
    assert json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])["diverged"] is True
    assert main([*argv, "--resume"]) == 2
    assert "this run diverged at step 2" in one_line(capsys, "train")
    assert main(["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", "16"]) == 2
    assert "this run diverged (its loss was not finite); nothing to evaluate" in one_line(capsys, "evaluate")
    # the step is read back from the device only at a logged step, and still the first one that diverged
    with pytest.raises(DivergedError, match=r": diverged at step 2: "):
        train(
            tiny_config(
                data, tmp_path / "quiet", lr=1e9, steps=12, log_every=5, tokenizer=str(run / "tokenizer.json")
            ),
            progress=False,
        )
    assert json.loads((tmp_path / "quiet" / "metrics.jsonl").read_text()) == {"step": 2, "diverged": True}
    # a slice (--stop-after) that ends between logged steps is checked at its end: before, its NaN weights
    # were checkpointed and it ended as a success ("step 3, loss nan")
    sliced = tiny_config(
        data, tmp_path / "sliced", lr=1e9, steps=12, log_every=5, tokenizer=str(run / "tokenizer.json")
    )
    with pytest.raises(DivergedError, match=r": diverged at step 2: "):
        train(sliced, stop_after=3, progress=False)
    assert not (tmp_path / "sliced" / "checkpoint.pt").exists()
    # and a healthy slice ends with its last step's loss, though no metrics line is due there
    healthy = tiny_config(
        data, tmp_path / "healthy", steps=12, log_every=5, tokenizer=str(run / "tokenizer.json")
    )
    assert math.isfinite(train(healthy, stop_after=3, progress=False)["last_loss"])
    assert not (tmp_path / "healthy" / "metrics.jsonl").read_text()


def test_compare_reports_a_diverged_run_and_still_writes_its_report(data, tmp_path, capsys):
    out = tmp_path / "cmp"
    # at this learning rate APE's loss is NaN by step 2, while NoPE's stays finite (if huge: 2.2e6)
    argv = ["compare", "--data", str(data), "--encodings", "nope,ape", "--steps", "3", "--lr", "100",
            "--eval-lengths", "16,32", "--eval-sequences", "4", *TINY[2:], "--train-lengths", "32", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "ape T=32 seed=0: diverged at step 2; not evaluated" in printed
    results = json.loads((out / "results.json").read_text())
    by_encoding = {run["encoding"]: run for run in results["runs"]}
    assert by_encoding["ape"]["eval"] is None and by_encoding["ape"]["train"]["diverged"] is True
    # NoPE's loss is so large that exp(loss) overflows: evaluated and kept in results.json, left out of the
    # tables and plots (an infinite perplexity can be neither averaged nor drawn)
    assert by_encoding["nope"]["eval"]["results"][0]["perplexity"] == math.inf
    assert list(csv.DictReader((out / "results.csv").open())) == []
    report = (out / "report.md").read_text()
    assert (
        "1 of the runs diverged (their loss stopped being finite) and are left out of the tables, plots and "
        "tests (a verdict then rests on the runs that remain, chosen by how they ended): ape (T=32, seed 0, "
        "step 2)" in report
    )
    assert (
        "1 of the runs have an evaluation loss too large for a perplexity (exp overflows) and are left out of "
        "the tables, plots and tests (a verdict then rests on the runs that remain, chosen by how they ended): "
        "nope (T=32, seed 0, step 3)"
    ) in report
    assert main(argv) == 0  # a rerun keeps the diverged run as it is
    assert "ape T=32 seed=0: trained earlier, kept" in capsys.readouterr().out


def test_compare_where_every_run_diverged_still_writes_its_report(data, tmp_path, capsys):
    out = tmp_path / "cmp"
    argv = ["compare", "--data", str(data), "--encodings", "rope,rope_pi", "--finetune-steps", "1", "--steps", "3",
            "--lr", "1e9", "--eval-lengths", "16,64", "--eval-sequences", "4", *TINY[2:], "--train-lengths", "32",
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    # RoPE diverged: RoPE-PI is its weights read otherwise, and the fine-tune would start from them
    assert "rope_pi fine-tuned at 64 T=32 seed=0: not trained, the run it starts from diverged" in (
        capsys.readouterr().out
    )
    assert not (out / "runs" / "T32-seed0" / "rope_pi-finetuned-64").exists()
    report = (out / "report.md").read_text()
    assert (
        "3 of the runs diverged (their loss stopped being finite) and are left out of the tables, plots and "
        "tests (a verdict then rests on the runs that remain, chosen by how they ended): rope (T=32, seed 0, "
        "step 2), "
        "rope_pi (T=32, seed 0, step 2), rope_pi+finetuned (T=32, seed 0, step 0)" in report
    )
    assert list(csv.DictReader((out / "results.csv").open())) == []
    assert not (out / "ppl_vs_length.png").exists()  # nothing to draw


def test_a_second_comparison_into_a_running_one_is_refused(data, tmp_path, capsys):
    out = tmp_path / "cmp"
    with hold_lock(out):
        assert (
            main(["compare", "--data", str(data), "--encodings", "nope", *TINY[2:], "--out", str(out)]) == 2
        )
    assert one_line(capsys, "compare") == (
        f"ltsgen compare: error: {out}: another ltsgen process is writing there (held by another process); "
        "wait for it to end or choose another --out"
    )
    assert sorted(p.name for p in out.iterdir()) == [".ltsgen"]


def test_a_compare_rerun_removes_only_its_own_leftover_temporary_files_and_names_damaged_run_files(
    data, tmp_path, capsys
):
    """One finished comparison, rerun with faults one after the other (each rerun starts from a finished
    comparison, as a fresh one would): leftover temporary files, only ltsgen's removed; then damaged run
    files, one line in evaluate and in a compare rerun (a torn eval.json evaluated again)."""
    out = tmp_path / "cmp"
    argv = ["compare", "--data", str(data), "--encodings", "nope", "--steps", "2", "--eval-lengths", "16",
            "--eval-sequences", "4", *TINY[2:], "--train-lengths", "32", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    run = out / "runs" / "T32-seed0" / "nope"
    ours = [out / ".results.json.k1l_9.tmp", out / ".report.md.a2b3.tmp", out / ".ppl_vs_length.png.x7.tmp",
            out / ".tokenizer.json.q0.tmp", run / ".eval.json.z8y.tmp", run / ".config.json.m4.tmp",
            out / ".ltsgen" / ".comparison.json.r2.tmp", run / ".ltsgen" / ".run.json.s3.tmp"]  # fmt: skip
    yours = [out / ".notes.md.a2b3.tmp", out / "results.json.tmp", out / ".results.json.tmp",
             run / ".draft.eval.json.z8.tmp", run / "mine.tmp", run / ".ltsgen" / ".notes.json.t4.tmp"]  # fmt: skip
    for path in ours + yours:
        path.write_text("torn")
    assert main(argv) == 0  # the run was trained and evaluated earlier: kept
    assert [path.exists() for path in ours] == [False] * len(ours)
    assert [path.read_text() for path in yours] == ["torn"] * len(yours)

    # damaged run files: one line in evaluate and in a compare rerun
    evaluate = ["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", "16", "--no-progress"]
    config = (run / "config.json").read_text()
    json_error = "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    for damage, said in [("{", f"damaged, not readable JSON ({json_error})"), ("[]", "damaged, not a JSON object"),
                         ('{"train": {}}', "damaged, 'train' has no integer 'train_length'")]:  # fmt: skip
        (run / "config.json").write_text(damage)
        capsys.readouterr()
        assert main(evaluate) == 2
        assert one_line(capsys, "evaluate") == f"ltsgen evaluate: error: {run / 'config.json'}: {said}"
    (run / "config.json").write_text(config)

    (run / "eval.json").write_text('{"results": [{"eval_length": "16"}]')  # torn
    capsys.readouterr()
    assert main(argv) == 0
    assert "eval.json: damaged, not readable JSON" in capsys.readouterr().out  # said, and evaluated again
    assert json.loads((run / "eval.json").read_text())["results"][0]["eval_length"] == 16
    (run / SUMMARY_NAME).write_text('{"step": "two"}')
    assert main(argv) == 2
    assert one_line(capsys, "compare").endswith(
        f"{run / SUMMARY_NAME}: damaged, 'step' is missing or of the wrong type"
    )
    (run / SUMMARY_NAME).write_text("")
    assert main(argv) == 2
    assert f"{run / SUMMARY_NAME}: damaged, not readable JSON" in one_line(capsys, "compare")
    (out / "compare.json").write_text("[1]")
    assert main(argv) == 2
    assert one_line(capsys, "compare").endswith(f"{out / 'compare.json'}: damaged, not a JSON object")


# ------------------------------------------------------------------ run folders


def test_a_run_refuses_a_folder_of_yours_or_a_dataset_and_changes_nothing_there(data, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "config.json").write_text('{"my": "settings"}\n')
    before = tree(mine, state=True)
    assert main(["train", "--data", str(data), "--out", str(mine), "--steps", "2", *TINY]) == 2
    assert one_line(capsys, "train") == (
        f"ltsgen train: error: {mine}: is not empty and holds no ltsgen run (config.json, ...); choose a new "
        "or empty --out (ltsgen never writes over files of yours)"
    )
    assert tree(mine, state=True) == before and sorted(p.name for p in mine.iterdir()) == ["config.json"]

    dataset = tree(data, state=True)
    assert main(["train", "--data", str(data), "--out", str(data), "--steps", "2", *TINY]) == 2
    assert f"{data}: holds a dataset (manifest.json)" in one_line(capsys, "train")
    assert main(["compare", "--data", str(data), "--out", str(data), "--encodings", "nope", *TINY[2:]]) == 2
    assert f"{data}: holds a dataset (manifest.json)" in one_line(capsys, "compare")
    assert tree(data, state=True) == dataset

    report = tmp_path / "report"
    report.mkdir()
    (report / "results.csv").write_text("mine\n")
    assert main(["compare", "--data", str(data), "--out", str(report), "--encodings", "nope", *TINY[2:]]) == 2
    assert "holds no ltsgen comparison (results.csv, ...)" in one_line(capsys, "compare")
    assert sorted(p.name for p in report.iterdir()) == ["results.csv"]


def test_a_run_folder_keeps_files_of_yours_and_a_folder_made_before_the_mark_resumes(data, tmp_path, capsys):
    run = tmp_path / "run"
    config = tiny_config(data, run, steps=4)
    train(config, stop_after=2, progress=False, train_tokenizer=train_tokenizer)
    assert (run / MARKS["run"]).is_file() and LOCK_PATH == BUILD_LOCK_PATH  # the builds' own lock
    shutil.rmtree(run / ".ltsgen")  # as a run made before runs were marked
    (run / "notes.txt").write_text("mine\n")
    assert train(config, resume=True, progress=False)["finished"]
    assert (run / "notes.txt").read_text() == "mine\n"
    # a later run that fails before its first checkpoint removes the files a run writes, not yours
    other = tmp_path / "other"
    other.mkdir()
    (other / ".ltsgen").mkdir()
    (other / MARKS["run"]).write_text('{"kind": "run"}\n')
    (other / "notes.txt").write_text("mine\n")
    (other / ".draft.md.x1.tmp").write_text("mine\n")  # named like a temporary file, but not of a run file
    (other / ".config.json.x2.tmp").write_text("{")  # left by a run's interrupted write
    assert main(["train", "--data", str(tmp_path / "missing"), "--out", str(other), *TINY]) == 2
    assert "manifest.json" in one_line(capsys, "train")
    assert sorted(p.name for p in other.iterdir()) == [".draft.md.x1.tmp", ".ltsgen", "notes.txt"]


def test_a_second_run_into_a_running_one_is_refused_naming_it_and_a_killed_runs_lock_is_free(
    data, tmp_path, capsys
):
    """The running run is ``ltsgen train`` in a process forked from this one, killed with kill -9; the refused
    second run and the run after the kill are started in this process (the lock is the other process's
    either way)."""
    run = tmp_path / "run"
    first = forked_ltsgen("train", "--data", data, "--out", run, "--steps", "100000", *TINY)
    lock = run / LOCK_PATH
    try:
        wait_until(first, lambda: lock.is_file() and lock.read_text().startswith(f"process {first.pid} "))
        assert main(["train", "--data", str(data), "--out", str(run), "--steps", "100000", *TINY]) == 2
        assert one_line(capsys, "train").startswith(
            f"ltsgen train: error: {run}: another ltsgen process is writing there (held by process {first.pid} on "
        )
    finally:
        kill_forked(first)
    assert first.exitcode == -signal.SIGKILL
    assert not (run / "checkpoint.pt").exists()  # killed before its first checkpoint
    assert main(["train", "--data", str(data), "--out", str(run), "--steps", "2", *TINY]) == 0
    assert json.loads((run / SUMMARY_NAME).read_text())["step"] == 2


def test_a_run_that_fails_in_a_read_only_folder_names_the_real_error(data, tmp_path, capsys):
    run = tmp_path / "run"
    train(tiny_config(data, run, steps=2), progress=False, train_tokenizer=train_tokenizer)
    for name in ("checkpoint.pt", "checkpoint.pt.sha256", SUMMARY_NAME):
        (run / name).unlink()  # as a run killed before its first checkpoint
    left = sorted(p.name for p in run.iterdir())
    if subprocess.run(["chattr", "+i", str(run)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available on this filesystem")
    try:  # no file can be created or removed in the folder, even by root
        assert main(["train", "--data", str(data), "--out", str(run), "--steps", "2", *TINY]) == 2
    finally:
        subprocess.run(["chattr", "-i", str(run)], check=True)
    assert one_line(capsys, "train") == f"ltsgen train: error: {run / 'config.json'}: Operation not permitted"
    assert sorted(p.name for p in run.iterdir()) == left


# ------------------------------------------------------------------ damaged run files, data that does not fit


def test_an_eos_id_outside_the_vocabulary_is_refused_before_training(tokenized, tmp_path, capsys):
    data = tmp_path / "lts"
    shutil.copytree(tokenized, data)
    manifest = read_manifest(data)
    manifest.tokenizer = {**manifest.tokenizer, "eos_id": 70000}
    write_manifest(data, manifest)
    argv = ["train", "--data", str(data), "--out", str(tmp_path / "run"), "--steps", "2", *TINY]
    assert main(argv) == 2  # outside the manifest's own vocab_size: the manifest reader refuses it
    assert one_line(capsys, "train").endswith(
        f"{data / 'manifest.json'}: tokenizer.eos_id 70000 is outside the vocabulary of 300 tokens"
    )
    manifest.tokenizer = {key: value for key, value in manifest.tokenizer.items() if key != "vocab_size"}
    write_manifest(data, manifest)
    assert main(argv) == 2  # no vocab_size recorded: checked against the tokenizer itself
    assert one_line(capsys, "train").endswith(
        f"{data / 'manifest.json'}: tokenizer.eos_id 70000 is outside the vocabulary of 300 tokens of "
        f"{tmp_path / 'run' / 'tokenizer.json'}"
    )
    assert not (tmp_path / "run" / "checkpoint.pt").exists()
    assert not (tmp_path / "run").exists()


def test_token_ids_with_no_tokenizer_sha256_are_read_with_no_tokenizer(tokenized, tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["train", "--data", str(tokenized), "--out", str(run), "--steps", "2", *TINY]) == 0
    data = tmp_path / "lts"
    shutil.copytree(tokenized, data)
    manifest = read_manifest(data)
    manifest.tokenizer = {key: value for key, value in manifest.tokenizer.items() if key != "sha256"}
    write_manifest(data, manifest)
    capsys.readouterr()
    assert main(["evaluate", "--run", str(run), "--data", str(data), "--eval-lengths", "16"]) == 2
    said = f"{data / 'manifest.json'}: the dataset holds token ids but records no tokenizer sha256"
    assert said in one_line(capsys, "evaluate")
    other = ["train", "--data", str(data), "--out", str(tmp_path / "other"), "--steps", "2", *TINY]
    assert main([*other, "--tokenizer", str(run / "tokenizer.json")]) == 2
    assert said in one_line(capsys, "train")
    manifest.tokenizer = None
    write_manifest(data, manifest)
    assert main(other) == 2
    assert "the dataset holds token ids, and no tokenizer is given or stored with it" in one_line(
        capsys, "train"
    )


# ------------------------------------------------------------------ tokenizer and card outputs, --overwrite


def test_tokenizer_out_never_writes_over_a_file(data, tmp_path, capsys):
    built = tmp_path / "built"
    assert main([*STORIES, "--out", str(built)]) == 0
    before = tree(built, state=True)
    train_on = ["tokenizer", "--data", str(built), "--vocab-size", "300", "--no-progress"]
    capsys.readouterr()
    assert main([*train_on, "--out", str(built)]) == 2
    assert f"{built}: holds a dataset (manifest.json); to attach a tokenizer to it, give --data" in one_line(
        capsys, "tokenizer"
    )
    mine = tmp_path / "mine.json"
    mine.write_text("mine\n")
    assert main([*train_on, "--out", str(mine)]) == 2
    assert one_line(capsys, "tokenizer").endswith(
        f"{mine}: exists; ltsgen does not write over it: move it away or choose another --out"
    )
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text("{}\n")
    assert main([*train_on, "--out", str(folder)]) == 2
    assert f"{folder / 'tokenizer_config.json'}: exists" in one_line(capsys, "tokenizer")
    text = tmp_path / "corpus.jsonl"  # a file named as no tokenizer is: before training, not after it
    text.write_text("mine\n")
    assert main([*train_on, "--out", str(text)]) == 2
    assert one_line(capsys, "tokenizer").endswith(
        f"{text}: a file; --out names a folder for the tokenizer's files, or a tokenizer file NAME.json"
    )
    assert mine.read_text() == text.read_text() == "mine\n"
    assert (folder / "tokenizer_config.json").read_text() == "{}\n"
    assert sorted(p.name for p in folder.iterdir()) == ["tokenizer_config.json"]
    # attaching to the dataset: a tokenizer.json of yours there is not replaced either
    (built / "tokenizer.json").write_text("mine\n")
    assert main(train_on) == 2
    assert f"{built / 'tokenizer.json'}: not written by ltsgen" in one_line(capsys, "tokenizer")
    (built / "tokenizer.json").unlink()
    assert tree(built, state=True) == before


def test_card_never_writes_over_a_file_ltsgen_did_not_write_and_bad_statistics_are_one_line(tmp_path, capsys):
    built = tmp_path / "built"
    assert main([*STORIES, "--out", str(built), "--no-card"]) == 0
    (built / "README.md").write_text("# my notes\n")
    capsys.readouterr()
    assert main(["card", str(built)]) == 2
    assert f"{built / 'README.md'}: not written by ltsgen, and the card writes there" in one_line(
        capsys, "card"
    )
    assert (built / "README.md").read_text() == "# my notes\n"
    (built / "README.md").unlink()
    # a folder of yours that holds no dataset: refused, and nothing written there (before: .ltsgen/lock)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("hi\n")
    assert main(["card", str(mine)]) == 2
    assert one_line(capsys, "card").endswith(f"{mine / 'manifest.json'}: not found (is {mine} an ltsgen dataset "
                                             "directory?)")  # fmt: skip
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]

    notes = tmp_path / "cards" / "notes.md"
    notes.parent.mkdir()
    notes.write_text("# not a card\n")
    assert main(["card", str(built), "--out", str(notes)]) == 2
    assert one_line(capsys, "card").endswith(
        f"{notes}: exists and is not a data card; ltsgen does not write over it"
    )
    assert notes.read_text() == "# not a card\n" and not (built / "README.md").exists()
    copy = tmp_path / "cards" / "lts.md"
    assert main(["card", str(built), "--out", str(copy)]) == 0
    assert main(["card", str(built), "--out", str(copy)]) == 0  # an earlier copy of a card is replaced

    manifest = read_manifest(built)
    for statistics, field in [(["a", "b"], "extra.statistics must be an object of tables, not list"),
                              ({"t": {"columns": ["a"], "rows": [[1, 2]]}}, "extra.statistics.t must have")]:  # fmt: skip
        manifest.extra["statistics"] = statistics
        write_manifest(built, manifest)
        capsys.readouterr()
        assert main(["card", str(built)]) == 2
        assert f"{built / 'manifest.json'}: {field}" in one_line(capsys, "card")


def test_overwrite_keeps_an_empty_folder_of_yours(tmp_path):
    out = tmp_path / "lts"
    (out / "mine" / "empty").mkdir(parents=True)
    assert main([*STORIES, "--out", str(out)]) == 0
    assert main([*STORIES, "--out", str(out), "--seed", "1", "--overwrite"]) == 0
    assert (out / "mine" / "empty").is_dir()
