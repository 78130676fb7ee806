"""Faults that held when they were first tried, kept as tests so that they keep holding: a shard deleted
under a reader, ``ltsgen train`` killed with kill -9 fresh and again after a resume, an API key that must
never reach a file.
(The other held cases have their tests beside the code they exercise: see docs/faults.md.)"""

from __future__ import annotations

import json
import os
import signal
import time
import warnings

import pytest
from faults import forked_ltsgen
from loader_fixtures import make_dataset
from openai_server import ScriptedOpenAIServer, stories_args
from process_tools import kill_forked
from training_fixtures import metrics, tiny_config, write_tiny_dataset

from ltsgen.cli import main
from ltsgen.loaders import LoaderError, StreamingDataset
from ltsgen.loaders.contract import read_manifest
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import train


def test_a_deleted_shard_is_named_or_skipped_and_counted(tmp_path):
    directory = make_dataset(tmp_path / "d", [6, 6, 6, 6], "parquet")
    gone = read_manifest(directory).shards("train")[2].path
    (directory / gone).unlink()
    with pytest.raises(LoaderError, match=gone):
        list(StreamingDataset(directory, shuffle=False))
    dataset = StreamingDataset(directory, shuffle=False, on_error="skip")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        items = list(dataset)
    assert list(dataset.skipped) == [str(directory / gone)]
    assert len(items) == len(dataset) == 24  # the slots of the deleted shard are refilled from the others


@pytest.mark.torch
def test_train_killed_fresh_and_resumed_resumes_to_the_same_losses(tmp_path):
    """kill -9 of a fresh run, then of the run it resumed into (first tried with five kills: the kills after
    the second are again kills of a resumed run): the finished run has the uninterrupted run's losses, step
    for step, every kill landing at least two steps after the last. The two killed processes run ``ltsgen
    train``'s main (the second with --resume), each forked from this process, where torch is loaded (a fresh
    process spends 5 s on 2 cores importing torch and torch._dynamo); the run is finished in this process."""
    data = write_tiny_dataset(tmp_path / "lts", train=16, validation=4)
    reference = tiny_config(data, tmp_path / "reference", steps=14, checkpoint_every=1, n_layers=1)
    train(reference, progress=False, train_tokenizer=train_tokenizer)
    run = tmp_path / "killed"
    args = ["train", "--data", data, "--tokenizer", tmp_path / "reference" / "tokenizer.json", "--out", run]
    args += [
        "--encoding",
        "rope",
        "--train-length",
        "32",
        "--steps",
        "14",
        "--batch-size",
        "4",
        "--lr",
        "3e-3",
    ]
    args += ["--d-model", "32", "--n-layers", "1", "--n-heads", "2", "--device", "cpu", "--log-every", "1"]
    args += ["--checkpoint-every", "1", "--no-progress"]
    for kill in range(2):
        steps_before = len(metrics(run)) if (run / "metrics.jsonl").exists() else 0
        process = forked_ltsgen(*map(str, args), *(["--resume"] if kill else []))
        try:
            deadline = time.monotonic() + 120
            while not (run / "metrics.jsonl").exists() or len(metrics(run)) < steps_before + 2:
                assert process.is_alive(), f"ltsgen train ended early (exit code {process.exitcode})"
                assert time.monotonic() < deadline
                time.sleep(0.005)
            os.kill(process.pid, signal.SIGKILL)
            process.join(timeout=30)
            assert process.exitcode == -signal.SIGKILL
        finally:
            kill_forked(process)
    assert main([*map(str, args), "--resume"]) == 0  # the last resume in this process: torch is loaded here
    assert [m["loss"] for m in metrics(run)] == [m["loss"] for m in metrics(tmp_path / "reference")]


def test_an_api_key_is_never_written_or_printed(tmp_path, capsys, monkeypatch):
    key = "sk-ltsgen-test-1c3e5a7b9d"
    monkeypatch.setenv("LTS_TEST_KEY", key)
    cache = tmp_path / "cache"
    with ScriptedOpenAIServer(api_key=key) as server:
        args = stories_args(server, tmp_path / "out", cache, "--api-key-env", "LTS_TEST_KEY")
        assert main(args) == 0
        monkeypatch.setenv("LTS_TEST_KEY", key[::-1])  # a wrong key: the server answers 401
        refused = stories_args(
            server, tmp_path / "refused", tmp_path / "cache-2", "--api-key-env", "LTS_TEST_KEY"
        )
        assert main(refused) == 2
    printed = capsys.readouterr()
    assert "answered 401" in printed.err
    folders = (tmp_path / "out", tmp_path / "refused", cache, tmp_path / "cache-2")
    files = [p for folder in folders if folder.exists() for p in folder.rglob("*")]
    assert any(p.name == "manifest.json" for p in files) and len([p for p in files if p.is_file()]) > 10
    for path in files:
        if path.is_file():
            data = path.read_bytes()
            assert key.encode() not in data and key[::-1].encode() not in data, path
    for text in (printed.out, printed.err, json.dumps(read_manifest(tmp_path / "out").builder)):
        assert key not in text and key[::-1] not in text
