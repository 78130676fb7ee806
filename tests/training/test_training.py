"""Training: every encoding trains, checkpoints resume exactly, torchrun with gloo, one-line CLI errors."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import resource
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from training_fixtures import metrics, tiny_config, write_tiny_dataset

from ltsgen.cli import main as ltsgen
from ltsgen.encodings import NAMES
from ltsgen.loaders.contract import read_manifest
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import train
from ltsgen.training.checkpoint import FIELDS, load_checkpoint, save_checkpoint
from ltsgen.training.errors import TrainingError
from ltsgen.training.rundir import CHECKPOINT_NAME
from ltsgen.training.schedule import WarmupCosine


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory) -> Path:
    return write_tiny_dataset(tmp_path_factory.mktemp("tiny") / "lts")


@pytest.fixture(scope="module")
def tokenizer_path(tiny_data, tmp_path_factory) -> Path:
    """One tokenizer trained by a first run, reused by the others (the way `ltsgen compare` shares one)."""
    out = tmp_path_factory.mktemp("first") / "run"
    train(tiny_config(tiny_data, out, steps=1), progress=False, train_tokenizer=train_tokenizer)
    return out / "tokenizer.json"


def run_bounded(command: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """Run ``command`` in its own process group; on timeout kill the whole group (workers included)."""
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)  # fmt: skip
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def test_schedule_warms_up_then_decays_to_the_floor():
    schedule = WarmupCosine(warmup=4, total=14, min_ratio=0.1)
    assert [schedule(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert schedule(4) == 1.0
    assert schedule(9) == pytest.approx(0.55)  # half way through the cosine
    assert schedule(14) == pytest.approx(0.1) and schedule(100) == pytest.approx(0.1)
    values = [schedule(s) for s in range(4, 15)]
    assert values == sorted(values, reverse=True)


def test_a_run_without_a_tokenizer_trains_one_and_saves_it(tiny_data, tokenizer_path):
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_path))
    assert tokenizer.get_vocab_size() == 300
    assert not (tiny_data / "tokenizer.json").exists()


@pytest.mark.parametrize("encoding", NAMES)
def test_every_encoding_trains_a_few_steps(encoding, tiny_data, tokenizer_path, tmp_path):
    out = tmp_path / encoding
    # --vocab-size only sizes a tokenizer trained here: with one given, config.json records the one used
    config = tiny_config(tiny_data, out, encoding, tokenizer=str(tokenizer_path), vocab_size=4096)
    summary = train(config, progress=False)
    lines = metrics(out)
    assert [line["step"] for line in lines] == [1, 2, 3, 4]
    assert all(math.isfinite(line["loss"]) and line["tokens_per_s"] > 0 for line in lines)
    assert lines[-1]["loss"] < lines[0]["loss"]  # four steps at 3e-3 already lower the loss
    assert summary["finished"] and summary["step"] == 4 and summary["last_loss"] == lines[-1]["loss"]
    checkpoint = load_checkpoint(out / CHECKPOINT_NAME)
    assert checkpoint["step"] == 4
    assert checkpoint["model_config"]["encoding"] == encoding
    config = json.loads((out / "config.json").read_text())
    assert config["train"]["encoding"] == encoding and config["parameters"] > 0
    used = json.loads(tokenizer_path.read_text())["model"]["vocab"]
    assert config["train"]["vocab_size"] == config["model"]["vocab_size"] == len(used) < 4096


def test_resume_repeats_the_uninterrupted_run_exactly(tiny_data, tokenizer_path, tmp_path):
    """With copy-task rows too: they depend on the step only, so the resumed run sees the same ones."""
    straight = tiny_config(tiny_data, tmp_path / "straight", "fire", steps=7, tokenizer=str(tokenizer_path),
                           copy_task=2, log_every=2, eval_every=7, eval_sequences=4)  # fmt: skip
    reference = train(straight, progress=False)
    pieces = replace(straight, out=str(tmp_path / "pieces"))
    first = train(pieces, stop_after=3, progress=False)
    assert first["step"] == 3 and not first["finished"]
    assert not (tmp_path / "pieces" / "train_summary.json").exists()
    # the counts the resume plans from, one per training shard
    counted = json.loads((tmp_path / "pieces" / "token_counts.json").read_text())["counts"]
    assert set(counted) == {shard.sha256 for shard in read_manifest(tiny_data).shards("train")}
    resumed = train(pieces, resume=True, progress=False)
    assert resumed["step"] == 7 and resumed["last_loss"] == reference["last_loss"]
    # the same lines: one per logged step (not one more at the stop), its validation in the same line
    assert [
        {k: v for k, v in m.items() if k not in ("elapsed_s", "tokens_per_s")}
        for m in metrics(tmp_path / "pieces")
    ] == [
        {k: v for k, v in m.items() if k not in ("elapsed_s", "tokens_per_s")}
        for m in metrics(tmp_path / "straight")
    ]
    assert [m["step"] for m in metrics(tmp_path / "straight")] == [2, 4, 6, 7]
    assert {"loss", "val_loss", "val_perplexity"} <= set(metrics(tmp_path / "straight")[-1])
    a = load_checkpoint(tmp_path / "straight" / CHECKPOINT_NAME)
    b = load_checkpoint(tmp_path / "pieces" / CHECKPOINT_NAME)
    assert all(torch.equal(a["model"][key], b["model"][key]) for key in a["model"])
    assert a["loader_states"] == b["loader_states"]
    assert json.loads((tmp_path / "pieces" / "config.json").read_text())["train"]["copy_task"] == 2


def test_copy_task_rows_join_the_step_and_only_the_text_loss_is_logged(tiny_data, tokenizer_path, tmp_path):
    plain = tiny_config(tiny_data, tmp_path / "plain", "rope", steps=3, tokenizer=str(tokenizer_path))
    train(plain, progress=False)
    with_copy = replace(plain, out=str(tmp_path / "copy"), copy_task=3)
    train(with_copy, progress=False)
    plain_losses = [m["loss"] for m in metrics(tmp_path / "plain")]
    copy_losses = [m["loss"] for m in metrics(tmp_path / "copy")]
    # the first step's text loss is the same (same weights, same batch); the copy rows change the updates
    assert copy_losses[0] == pytest.approx(plain_losses[0], rel=1e-5) and copy_losses[1:] != plain_losses[1:]
    a = load_checkpoint(tmp_path / "plain" / CHECKPOINT_NAME)["model"]
    b = load_checkpoint(tmp_path / "copy" / CHECKPOINT_NAME)["model"]
    assert not torch.equal(a["wte.weight"], b["wte.weight"])


def test_resume_refuses_other_settings_and_a_fresh_run_refuses_an_old_checkpoint(
    tiny_data, tokenizer_path, tmp_path
):
    config = tiny_config(tiny_data, tmp_path / "run", steps=2, tokenizer=str(tokenizer_path))
    train(config, progress=False)
    with pytest.raises(TrainingError, match="already there; pass --resume"):
        train(config, progress=False)
    with pytest.raises(TrainingError, match=r"lr: 0.003 -> 0.01"):
        train(replace(config, lr=0.01), resume=True, progress=False)
    # the same dataset spelled another way (a trailing slash, relative to the working folder) is the same
    relative = os.path.relpath(tiny_data)
    for data in (f"{tiny_data}/", relative, f"{relative}=1"):  # and as a mixture of one source, it is not
        if "=" in data:
            with pytest.raises(TrainingError, match=r"cannot resume with other settings \(data: "):
                train(replace(config, data=data), resume=True, progress=False)
        else:
            assert train(replace(config, data=data), resume=True, progress=False)["nothing_to_do"]
    # RoPE's base given as its default, spelled otherwise, makes the same model (before: refused); 500 does not
    same = replace(config, encoding_options={"base": "1e4"})
    assert train(same, resume=True, progress=False)["nothing_to_do"]
    with pytest.raises(TrainingError, match=r"encoding_options: \{\} -> \{'base': '500'\}"):
        train(replace(config, encoding_options={"base": "500"}), resume=True, progress=False)
    with pytest.raises(
        TrainingError, match=r"another global batch \(--batch-size x processes: 4 x 1 -> 2 x 1\)"
    ):
        train(replace(config, batch_size=2), resume=True, progress=False)


def test_a_mixture_in_another_scale_is_the_same_setting_and_its_tokenizer_notice_names_the_first_source(
    tmp_path, capsys
):
    from ltsgen.commands.train import announced
    from ltsgen.training.data import same_setting

    a, b = tmp_path / "a", tmp_path / "b"
    assert same_setting("data", f"{a}=0.7,{b}=0.3", f"{a}=7,{b}=3")  # before: refused on resume
    assert not same_setting("data", f"{a}=0.7,{b}=0.3", f"{a}=0.6,{b}=0.4")
    assert not same_setting("data", f"{a}=0.7,{b}=0.3", f"{b}=0.3,{a}=0.7")  # the first source leads
    announced(lambda texts, size: None, f"{a}=1,{b}=1", "run/tokenizer.json")([], 300)
    said = capsys.readouterr().out  # before: `ltsgen tokenizer --data a=1,b=1`, a command that fails
    assert said.startswith(f"the mixture's first source, {a}, has no tokenizer") and f"--data {a}`" in said


def test_init_from_a_run_of_another_tokenizer_or_shape_is_refused_saying_why(
    tiny_data, tokenizer_path, tmp_path
):
    base = tiny_config(tiny_data, tmp_path / "base", "alibi", steps=1, tokenizer=str(tokenizer_path))
    train(base, progress=False)
    other = tmp_path / "other.json"
    train_tokenizer(["a story of another tokenizer, not the run's"] * 20, 280).save(str(other))
    tuned = replace(base, out=str(tmp_path / "tuned"), init_from=base.out, tokenizer=str(other))
    with pytest.raises(TrainingError, match=r"base/tokenizer.json: --init-from's run has another tokenizer"):
        train(tuned, progress=False)
    wider = replace(tuned, tokenizer=str(tokenizer_path), d_model=64)
    with pytest.raises(TrainingError, match=r"its weights do not fit this model \(size mismatch for "):
        train(wider, progress=False)
    assert not (tmp_path / "tuned").exists()


def test_a_checkpoint_without_its_checksum_is_refused(tmp_path):
    path = tmp_path / CHECKPOINT_NAME
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(TrainingError, match="checkpoint.pt: no checksum beside it"):
        load_checkpoint(path)


def _killed_before_the_rename(path: Path, state: dict) -> None:
    """``save_checkpoint`` in this (forked) process, killed with SIGKILL as its new file is renamed into place."""
    from ltsgen.training import checkpoint

    rename = os.replace

    def replace_or_die(source, target):
        if Path(target) == path:
            os.kill(os.getpid(), signal.SIGKILL)
        rename(source, target)

    checkpoint.os.replace = replace_or_die
    checkpoint.save_checkpoint(path, state)


def run_state(step: int, **changes) -> dict:
    """A checkpoint's state with every field a run writes (empty ones), with ``changes``."""
    state = {key: {} for key in FIELDS}
    state.update(step=step, loader_states="[]", model_config="{}", train_config="{}")
    return {**state, **changes}


def test_a_checkpoint_killed_twice_while_replaced_still_verifies(tmp_path):
    import multiprocessing

    path = tmp_path / CHECKPOINT_NAME
    save_checkpoint(path, run_state(1))
    for step in (2, 3):  # each kill leaves the digest of a write that never got there
        child = multiprocessing.get_context("fork").Process(
            target=_killed_before_the_rename, args=(path, run_state(step))
        )
        child.start()
        child.join(timeout=60)
        assert child.exitcode == -signal.SIGKILL
        assert load_checkpoint(path)["step"] == 1
    save_checkpoint(path, run_state(4))
    assert (
        load_checkpoint(path)["step"] == 4
        and len(path.with_name("checkpoint.pt.sha256").read_text().split()) == 1
    )


@pytest.mark.parametrize(
    ("state", "problem"),
    [
        ([1, 2], "not a checkpoint of a run (it holds a list)"),
        (
            {"step": 5, "model": {}},
            "not a checkpoint of a run (no optimizer, scheduler, rng, loader_states, "
            "model_config, train_config)",
        ),  # fmt: skip
        (run_state(5, model_config="{not json"), "damaged checkpoint, its model_config is not JSON text"),
        (run_state(5, loader_states="{}"), "damaged checkpoint, its loader_states is not a list"),
        (run_state(True), "damaged checkpoint, its step is not an integer"),
    ],
)
def test_a_checksummed_checkpoint_without_a_runs_fields_is_one_line(state, problem, tmp_path):
    """A file whose digest matches (written by another tool, or by hand) but that is no run's checkpoint."""
    path = save_checkpoint(tmp_path / CHECKPOINT_NAME, state)
    with pytest.raises(TrainingError) as error:
        load_checkpoint(path)
    assert str(error.value) == f"{path}: {problem}"


# `ltsgen train` under torchrun, then the names of the threads each rank has left when it returns
TRAIN_THEN_LIST_THREADS = """
import os, sys
from pathlib import Path
from ltsgen.cli import main
code = main(sys.argv[1:])
names = sorted(path.read_text().strip() for path in Path("/proc/self/task").glob("*/comm"))
os.write(1, f"threads left: {names}\\n".encode())  # one write: the two ranks share the pipe
sys.exit(code)
"""


def test_torchrun_two_processes_with_gloo_match_one_process(tiny_data, tokenizer_path, tmp_path):
    """Two ranks with half the batch each see the same global batches as one process: same weights. Each
    rank ends gloo's threads before it exits (one still running at the interpreter's exit can abort it)."""
    common = ["--data", str(tiny_data), "--encoding", "alibi", "--train-length", "32", "--steps", "3",
              "--d-model", "32", "--n-layers", "2", "--heads", "2", "--tokenizer", str(tokenizer_path),
              "--device", "cpu", "--log-every", "1", "--no-progress"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    script = tmp_path / "train_then_list_threads.py"
    script.write_text(TRAIN_THEN_LIST_THREADS)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(script), "train", *common, "--batch-size", "2", "--out", str(tmp_path / "ddp")]  # fmt: skip
    done = run_bounded(command, env, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    left = re.findall(r"threads left: (.*)", done.stdout)
    assert len(left) == 2 and not any("gloo" in line for line in left), left
    summary = json.loads((tmp_path / "ddp" / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["step"] == 3
    assert ltsgen(["train", *common, "--batch-size", "4", "--out", str(tmp_path / "single")]) == 0
    # elastic: one process stopped after a step, resumed by two with half the batch each
    elastic = ["train", *common, "--out", str(tmp_path / "elastic")]
    assert ltsgen([*elastic, "--batch-size", "4", "--stop-after", "1"]) == 0
    torchrun = command[: command.index("train")]  # torch.distributed.run ... script
    done = run_bounded([*torchrun, *elastic, "--batch-size", "2", "--resume"], env, timeout=150)
    assert done.returncode == 0, done.stderr[-3000:]
    # a folder of the user's, which rank 0 refuses: each rank says so in one line, unless torchrun has ended
    # it first (before: rank 1 died at its barrier with gloo's "Connection closed by peer", 25 lines)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine\n")
    done = run_bounded(
        [*torchrun, "train", *common, "--batch-size", "2", "--out", str(mine)], env, timeout=150
    )
    said = [line for line in done.stderr.splitlines() if "ltsgen train: error: " in line]
    assert done.returncode != 0 and 1 <= len(said) <= 2, done.stderr
    assert "Connection closed by peer" not in done.stderr and "[rank1]: Traceback" not in done.stderr
    assert all(line.endswith(said[0].split("ltsgen train: error: ")[1]) for line in said)
    assert [path.name for path in mine.iterdir()] == ["notes.txt"]
    single = load_checkpoint(tmp_path / "single" / CHECKPOINT_NAME)["model"]
    for run in ("ddp", "elastic"):
        weights = load_checkpoint(tmp_path / run / CHECKPOINT_NAME)["model"]
        for key in single:
            torch.testing.assert_close(weights[key], single[key], rtol=1e-4, atol=1e-5)


def test_cli_errors_are_one_line_and_leave_nothing_behind(tiny_data, tmp_path, capsys):
    run = tmp_path / "r"
    assert ltsgen(["train", "--data", str(tmp_path / "missing"), "--out", str(run), "--steps", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "manifest.json" in err and "Traceback" not in err
    assert not run.exists()  # the failed run removed the folder it made
    assert ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--encoding", "RoPe-PIE"]) == 2
    err = capsys.readouterr().err.strip()  # no usage: one line, with the closest names
    assert err.splitlines() == [
        "ltsgen train: error: unknown encoding 'RoPe-PIE' (did you mean 'rope_pi', 'rope' or 'kerple_power'?); "
        "choose one of "
        "nope, rope, rope_pi, yarn, alibi, kerple_log, kerple_power, t5, sandwich, fire, ape"
    ]
    assert ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--encoding", "ALiBi",
                   "--encoding-option", "treshold=64"]) == 2  # fmt: skip
    assert capsys.readouterr().err == (
        "ltsgen train: error: encoding 'alibi' has no option 'treshold'; it takes no options\n"
    )
    assert ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--d-model", "30"]) == 2
    assert "--d-model 30" in capsys.readouterr().err
    assert (
        ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--steps", "5", "--warmup", "5"]) == 2
    )
    assert "--warmup 5 must be below --steps 5" in capsys.readouterr().err
    assert ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--device 'cuda': CUDA is not available" in err
    assert ltsgen(["train", "--data", str(tiny_data), "--out", str(run), "--encoding-option", "width=3"]) == 2
    assert "encoding 'rope' has no option 'width'" in capsys.readouterr().err
    for encoding, option, problem in (  # values out of range: one line before any work, never a divergence
        ("fire", "threshold=0", "fire threshold must be positive or None, got 0.0"),
        ("rope", "base=-1", "rotary encodings need base > 1, got -1.0"),
        ("rope", "base=nan", "rope option base=nan: expected a finite number"),
        ("yarn", "beta_fast=-1", "yarn needs 0 < beta_slow < beta_fast, got 1.0 and -1.0"),
        ("t5", "num_buckets=0", "t5 needs num_buckets >= 2"),
        ("sandwich", "dim=3", "sandwich dim must be even and >= 2, got 3"),
        ("ape", "log_init=0", "ape needs log_init > 0 and sqrt_init > 0"),
    ):
        command = ["train", "--data", str(tiny_data), "--out", str(run), "--encoding", encoding]
        assert ltsgen([*command, "--encoding-option", option]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"ltsgen train: error: {problem}") and err.count("\n") == 1, err
    assert not run.exists()


def test_the_tokenizer_option_takes_a_folder_and_names_a_bad_file(
    tiny_data, tokenizer_path, tmp_path, capsys
):
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    url = "http://127.0.0.1:9/t.json"  # before: "http:/127.0.0.1:9/t.json: tokenizer not found"
    for given, problem in (
        (bad, f"{bad}: not a tokenizer.json"),
        (tmp_path, f"{tmp_path}: tokenizer not found"),
        (url, f"--tokenizer {url}: a local file or folder is read; download it first"),
    ):
        assert (
            ltsgen(
                ["train", "--data", str(tiny_data), "--out", str(tmp_path / "r"), "--tokenizer", str(given)]
            )
            == 2
        )
        assert capsys.readouterr().err.startswith(f"ltsgen train: error: {problem}")
    assert not (tmp_path / "r").exists()
    train(
        tiny_config(tiny_data, tmp_path / "run", "nope", steps=1, tokenizer=str(tokenizer_path.parent)),
        progress=False,
    )
    assert (tmp_path / "run" / "tokenizer.json").read_bytes() == tokenizer_path.read_bytes()


def test_a_changed_tokenizer_of_the_data_is_named_not_the_runs_copy(
    tiny_data, tokenizer_path, tmp_path, capsys
):
    """The dataset's own tokenizer.json, cut short after `ltsgen tokenizer --data` attached it: before, the run
    copied it and failed on its copy ("RUN/tokenizer.json: not a readable tokenizer.json"), naming a file
    that it then removed."""
    import shutil

    from tokenizers import Tokenizer

    from ltsgen.attach import attach_tokenizer

    data = tmp_path / "data"
    shutil.copytree(tiny_data, data)
    attach_tokenizer(data, Tokenizer.from_file(str(tokenizer_path)))
    own = data / "tokenizer.json"
    own.write_bytes(own.read_bytes()[:2000])
    assert ltsgen(["train", "--data", str(data), "--out", str(tmp_path / "run")]) == 2
    assert capsys.readouterr().err == (
        f"ltsgen train: error: {own}: sha256 does not match the one {data}/manifest.json records (a changed or "
        "damaged tokenizer)\n"
    )
    assert not (tmp_path / "run").exists()


def test_a_damaged_checkpoint_is_refused_by_resume_and_evaluate(tiny_data, tokenizer_path, tmp_path, capsys):
    """One flipped byte anywhere (tensor data or zip header) changes the sha256 beside the checkpoint."""
    config = tiny_config(tiny_data, tmp_path / "run", "alibi", steps=4, tokenizer=str(tokenizer_path))
    train(config, stop_after=2, progress=False)
    path = tmp_path / "run" / CHECKPOINT_NAME
    intact = path.read_bytes()
    assert load_checkpoint(path)["step"] == 2
    for offset in (len(intact) // 2, 10):  # inside the tensors; inside the first zip header
        flipped = bytearray(intact)
        flipped[offset] ^= 0x01
        path.write_bytes(bytes(flipped))
        with pytest.raises(TrainingError, match=r"checkpoint.pt: damaged checkpoint \(its sha256 matches no"):
            train(config, resume=True, progress=False)
        assert ltsgen(["evaluate", "--run", str(tmp_path / "run"), "--data", str(tiny_data), "--eval-lengths",
                       "16", "--eval-sequences", "2", "--no-progress"]) == 2  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{path}: damaged checkpoint" in err
    path.write_bytes(intact)
    assert train(config, resume=True, progress=False)["step"] == 4


def test_resume_removes_stale_temporary_files_and_a_finished_run_has_nothing_to_do(
    tiny_data, tokenizer_path, tmp_path, capsys
):
    run = tmp_path / "run"
    args = ["train", "--data", str(tiny_data), "--encoding", "fire", "--train-length", "32", "--steps", "3",
            "--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--n-heads", "2", "--tokenizer",
            str(tokenizer_path), "--device", "cpu", "--no-progress", "--out", str(run)]  # fmt: skip
    assert ltsgen([*args, "--stop-after", "1", "--resume"]) == 0  # --resume in a new folder: it says so
    out = capsys.readouterr().out
    assert out.startswith(
        f"{run / CHECKPOINT_NAME}: no checkpoint to resume from: starting the run at step 0\n"
    )
    assert "stopped at step 1 (checkpointed): continue with --resume" in out
    stale = [
        run / ".checkpoint.pt.k2j4.tmp",
        run / ".checkpoint.pt.sha256.x1.tmp",
        run / ".metrics.jsonl.a.tmp",
    ]
    for path in stale:
        path.write_bytes(b"half a file")
    assert ltsgen([*args, "--resume"]) == 0
    out = capsys.readouterr().out
    assert not any(path.exists() for path in stale) and not list(run.glob(".*.tmp"))
    # a human summary, not JSON: what was trained, how it went, and what FIRE learned per layer
    assert out.startswith("fire at 32 tokens: step 3, loss ") and "{" not in out
    assert re.search(
        r"\n  learned \(layer 0\): c 0\.\d+, threshold [78]\.\d+\n  learned \(layer 1\): c ", out
    )
    assert ltsgen([*args, "--resume"]) == 0
    assert capsys.readouterr().out.strip() == f"{run}: finished earlier at step 3; nothing to do"
    # killed after its last checkpoint, before its summary: the resume writes the same summary, from its log
    summary = json.loads((run / "train_summary.json").read_text())
    (run / "train_summary.json").unlink()
    assert ltsgen([*args, "--resume"]) == 0
    assert capsys.readouterr().out.startswith(f"fire at 32 tokens: step 3, loss {summary['last_loss']:.3f}, ")
    again = json.loads((run / "train_summary.json").read_text())
    same = ("step", "finished", "last_loss", "tokens_per_s", "parameters", "learned")
    assert {key: again[key] for key in same} == {key: summary[key] for key in same}
    assert again["wall_s"] >= metrics(run)[-1]["elapsed_s"]


def test_config_records_resolved_encoding_options_and_the_summary_what_was_learned(
    tiny_data, tokenizer_path, tmp_path
):
    fire = train(
        tiny_config(tiny_data, tmp_path / "fire", "fire", tokenizer=str(tokenizer_path)), progress=False
    )
    options = json.loads((tmp_path / "fire" / "config.json").read_text())["model"]["encoding_options"]
    assert options == {
        "threshold": 8.0,
        "c": 0.1,
        "mlp_width": 32,
        "mlp_layers": 2,
        "share_across_layers": False,
    }
    assert [sorted(layer) for layer in fire["learned"]] == [["c", "threshold"], ["c", "threshold"]]
    assert json.loads((tmp_path / "fire" / "train_summary.json").read_text())["learned"] == fire["learned"]
    t5 = tiny_config(
        tiny_data,
        tmp_path / "t5",
        "t5",
        tokenizer=str(tokenizer_path),
        encoding_options={"num_buckets": "16"},
    )
    train(t5, progress=False)
    options = json.loads((tmp_path / "t5" / "config.json").read_text())["model"]["encoding_options"]
    assert options == {"num_buckets": 16, "max_distance": 32}  # max_distance = the training length
    kerple = train(
        tiny_config(tiny_data, tmp_path / "k", "kerple_power", tokenizer=str(tokenizer_path)), progress=False
    )
    assert len(kerple["learned"]) == 1 and len(kerple["learned"][0]["r1"]) == 2  # shared: one entry, per head


@contextlib.contextmanager
def _file_size_limit(max_bytes: int):
    """Every file this process writes limited to ``max_bytes`` (``ulimit -f``; Python ignores SIGXFSZ, so a write
    beyond fails with EFBIG, "File too large"), the previous limit restored after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (max_bytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def test_a_full_disk_while_checkpointing_is_one_line_and_leaves_nothing_half_written(
    tiny_data, tokenizer_path, tmp_path, capsys
):
    """``ltsgen train`` (run in this process) under a file size limit that the checkpoint exceeds: a new run
    fails with one line and exit status 2 and removes its folder; a resumed run fails the same way and
    leaves the previous checkpoint whole, no temporary file and no summary, and resumes once space is back."""
    run = tmp_path / "run"
    args = ["train", "--data", str(tiny_data), "--encoding", "alibi", "--train-length", "32", "--steps", "4",
            "--lr", "0.003", "--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--n-heads", "2",
            "--tokenizer", str(tokenizer_path), "--device", "cpu", "--no-progress", "--out", str(run)]  # fmt: skip
    capsys.readouterr()
    # a new run whose first checkpoint cannot be written: one line, exit 2, the run folder gone
    with _file_size_limit(100_000):  # the checkpoint needs about 450 kB, every other file a few kB
        status = ltsgen(args)
    err = capsys.readouterr().err
    assert status == 2, err[-2000:]
    assert err.strip().splitlines() == [
        f"ltsgen train: error: {run / CHECKPOINT_NAME}: cannot write the checkpoint (File too large)"
    ]
    assert not run.exists()
    # a resumed run: the failed write leaves the previous checkpoint whole and verified, and no temporary file
    config = tiny_config(tiny_data, run, "alibi", steps=4, tokenizer=str(tokenizer_path), log_every=10)
    train(config, stop_after=2, progress=False)
    before = (run / CHECKPOINT_NAME).read_bytes()
    capsys.readouterr()
    with _file_size_limit(100_000):
        status = ltsgen([*args, "--resume"])
    err = capsys.readouterr().err
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "cannot write the checkpoint (File too large)" in err
    assert (run / CHECKPOINT_NAME).read_bytes() == before and load_checkpoint(run / CHECKPOINT_NAME)[
        "step"
    ] == 2
    assert not list(run.glob(".*.tmp")) and not (run / "train_summary.json").exists()
    assert train(config, resume=True, progress=False)["step"] == 4


def test_learned_values_say_shared_only_when_one_module_serves_every_layer():
    """Before: a one-layer FIRE with share_across_layers=false printed "shared by every layer"."""
    from ltsgen.commands.train import describe

    summary = {"encoding": "fire", "train_length": 64, "step": 3, "last_loss": 5.0, "tokens_per_s": 10.0,
               "wall_s": 1.0, "device": "cpu", "world_size": 1, "parameters": 100, "finished": True,
               "learned": [{"c": 0.1}]}  # fmt: skip
    assert "learned (layer 0): c 0.1" in describe({**summary, "learned_shared": False}, "r")
    assert "learned (shared by every layer): c 0.1" in describe({**summary, "learned_shared": True}, "r")
    assert "learned (shared by every layer)" in describe(summary, "r")  # a summary written before


def test_each_logged_learning_rate_is_the_one_its_step_trained_at(tiny_data, tokenizer_path, tmp_path):
    """Before: the rate of the step after (the schedule had moved on): the peak never showed, and a run that
    decays to 0 logged 0 for its last step, which trained at more."""
    config = tiny_config(
        tiny_data, tmp_path / "run", steps=6, warmup=2, min_lr_ratio=0.0, tokenizer=str(tokenizer_path)
    )
    train(config, progress=False)
    schedule = WarmupCosine(2, 6, 0.0)
    logged = [(line["step"], line["lr"]) for line in metrics(tmp_path / "run") if "lr" in line]
    assert logged == [(step, pytest.approx(3e-3 * schedule(step - 1))) for step in range(1, 7)]
    assert logged[2][1] == pytest.approx(3e-3) and logged[-1][1] > 0


def test_resuming_a_finished_run_whose_config_was_damaged_writes_it_again(
    tiny_data, tokenizer_path, tmp_path
):
    """Before, a finished run said "nothing to do" and left a damaged config.json, which evaluate then refused."""
    from ltsgen.training.rundir import CONFIG_NAME

    config = tiny_config(tiny_data, tmp_path / "run", steps=2, tokenizer=str(tokenizer_path))
    train(config, progress=False)
    written = (tmp_path / "run" / CONFIG_NAME).read_bytes()
    logged = (tmp_path / "run" / "metrics.jsonl").read_bytes()
    (tmp_path / "run" / CONFIG_NAME).write_text("{")
    train(config, resume=True, progress=False)
    assert (tmp_path / "run" / CONFIG_NAME).read_bytes() == written
    assert (tmp_path / "run" / "metrics.jsonl").read_bytes() == logged  # no step trained or logged again
    assert train(config, resume=True, progress=False)["nothing_to_do"]
