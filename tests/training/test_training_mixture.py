"""`ltsgen train` and `compare` on a mixture given through --data: the run resumes it exactly, its state
names the mixture, and a malformed mixture or one with a foreign tokenizer is a one-line error."""

from __future__ import annotations

import json

import pytest
from training_fixtures import metrics, tiny_config, write_tiny_dataset

from ltsgen.cli import main as ltsgen
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import train
from ltsgen.training.checkpoint import load_checkpoint
from ltsgen.training.rundir import CHECKPOINT_NAME

TINY = ["--train-length", "32", "--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--heads", "2",
        "--vocab-size", "300", "--device", "cpu", "--log-every", "1", "--lr", "0.003", "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def mixture(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("mixture")
    return f"{write_tiny_dataset(root / 'a')}=0.3,{write_tiny_dataset(root / 'b', train=2)}=0.7"


def test_train_resumes_a_mixture_exactly_and_its_state_names_it(mixture, tmp_path, capsys):
    straight = train(tiny_config(mixture, tmp_path / "straight", steps=8), progress=False,
                     train_tokenizer=train_tokenizer)  # fmt: skip
    tokenizer = str(tmp_path / "straight" / "tokenizer.json")
    args = ["train", "--data", mixture, "--tokenizer", tokenizer, "--steps", "8", *TINY, "--out"]
    assert ltsgen([*args, str(tmp_path / "pieces"), "--stop-after", "2"]) == 0
    assert ltsgen([*args, str(tmp_path / "pieces"), "--resume"]) == 0
    losses = [m["loss"] for m in metrics(tmp_path / "pieces")]
    assert losses == [m["loss"] for m in metrics(tmp_path / "straight")] and len(losses) == 8
    assert straight["last_loss"] == losses[-1]
    (state,) = load_checkpoint(tmp_path / "pieces" / CHECKPOINT_NAME)["loader_states"]
    a, b = (part.rpartition("=")[0] for part in mixture.split(","))
    assert state["identity"]["mixture"] == [[a, 3], [b, 7]] and state["samples_consumed"] == 8 * 4
    assert f"mixture source {b}: reached its epoch 1 " in capsys.readouterr().err  # b: ~22 of the 32 blocks


def test_compare_trains_on_a_mixture(mixture, tmp_path):
    out = tmp_path / "cmp"
    args = ["compare", "--data", mixture, "--encodings", "nope,alibi", "--train-lengths", "32", "--steps", "2",
            "--eval-lengths", "32,64", "--eval-sequences", "4", *TINY[2:], "--out", str(out)]  # fmt: skip
    assert ltsgen(args) == 0
    results = json.loads((out / "results.json").read_text())
    assert {run["train"]["encoding"] for run in results["runs"]} == {"nope", "alibi"}
    assert "the mixture's first source" in (out / "report.md").read_text()


def test_a_malformed_mixture_or_a_foreign_tokenizer_is_one_line(mixture, tmp_path, capsys):
    run = tmp_path / "run"
    assert ltsgen(["train", "--data", mixture.split(",")[0] + ",c4", "--out", str(run), *TINY]) == 2
    error = capsys.readouterr().err.strip()
    assert "'c4' is not PATH=WEIGHT" in error and len(error.splitlines()) == 1
    assert not run.exists()
    texts = [f"story {i}: a cat and a dog went home" for i in range(50)]
    theirs, ours = train_tokenizer(texts, 300), train_tokenizer(texts, 280)
    other = write_tiny_dataset(tmp_path / "other", tokenizer=theirs)
    ours.save(str(tmp_path / "ours.json"))
    args = ["train", "--data", f"{mixture},{other}=0.5", "--tokenizer", str(tmp_path / "ours.json")]
    assert ltsgen([*args, "--out", str(run), *TINY]) == 2
    error = capsys.readouterr().err.strip()
    assert f"{other} is tokenized with another tokenizer" in error and len(error.splitlines()) == 1
