"""Builds on an object store (the real moto S3 server on 127.0.0.1): the same bytes as a local build, the
same resume after kill -9, the same refusals; every command that takes a path takes an s3:// URL.

``ltsgen buckets`` from and to S3 runs in tests/builders/test_ray.py, where the same build also runs as Ray
tasks: one C4 build covers both."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess

import pytest
from process_tools import kill_9, wait_until
from remote_fixtures import DEAD_ENDPOINT, KILLED, LTSGEN, SMALL, local_tree, remote_tree

from ltsgen.cli import main
from ltsgen.loaders.contract import read_manifest


@pytest.fixture(scope="module")
def remote_small(s3_server) -> tuple[str, str, str]:
    """SMALL built into s3://BUCKET/lts, the server named only by --storage-options: (bucket, url, options)."""
    bucket = s3_server.bucket()
    url = f"s3://{bucket}/lts"
    options = json.dumps({"endpoint_url": s3_server.endpoint})
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
        assert main(["stories", "--out", url, *SMALL, "--storage-options", options]) == 0
    return bucket, url, options


def test_stories_on_s3_equal_the_local_build(s3_server, small_reference, remote_small, tmp_path, capsys):
    bucket, url, options = remote_small
    fs = s3_server.client()
    assert remote_tree(fs, f"{bucket}/lts") == local_tree(small_reference)  # shards, manifest, card, plot
    manifest = read_manifest(url)
    assert [s.sha256 for split in manifest.splits.values() for s in split] == [
        s.sha256 for split in read_manifest(small_reference).splits.values() for s in split
    ]
    assert not fs.exists(f"{bucket}/lts/.ltsgen/lock")  # the lease is given back at the end
    capsys.readouterr()
    assert main(["stories", "--out", url, *SMALL]) == 0  # verified from the journal's version tags
    assert "nothing to do" in capsys.readouterr().out
    copy = tmp_path / "card.md"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
        assert main(["card", url, "--output", str(copy), "--storage-options", options]) == 0
    assert copy.read_text() == (small_reference / "README.md").read_text().replace(
        "](length_histogram.png)", "](card_length_histogram.png)"
    )


def test_bad_storage_options_and_urls_are_one_line(s3_server, capsys):
    cases = [
        (["--out", f"s3://{s3_server.bucket()}/lts", "--storage-options", "{nope"], "--storage-options: not valid JSON"),
        (["--out", "hf://datasets/someone/lts"], "hf://datasets/someone/lts: hf:// is read-only here"),
        (["--out", "s3://no-such-bucket-here/lts"], "s3://no-such-bucket-here/lts: cannot write there"),
    ]  # fmt: skip
    for extra, message in cases:
        assert main(["stories", *SMALL, *extra]) == 2
        error = capsys.readouterr().err
        assert message in error and error.count("\n") == 1, error


def test_kill_9_mid_upload_then_rerun_is_byte_identical(s3_server, killed_reference, capsys):
    bucket = s3_server.bucket()
    url, prefix = f"s3://{bucket}/lts", f"{bucket}/lts"
    fs = s3_server.client()
    build = subprocess.Popen([LTSGEN, "stories", "--out", url, *KILLED, "--workers", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(build, lambda: len(fs.find(f"{prefix}/.ltsgen/journal.jsonl")) >= 3)
        build.send_signal(signal.SIGSTOP)  # held mid-build: it cannot finish while this test runs a build
        # while it is held, a second build of the same directory is refused (its lease is live)
        assert main(["stories", "--out", url, *KILLED]) == 2
        assert "another build is running there (" in capsys.readouterr().err
        kill_9(build)  # the held driver only, mid-upload: its workers must follow it
    finally:
        if build.poll() is None:
            build.kill()
            build.wait()
    expected = local_tree(killed_reference)  # a build's bytes do not depend on its workers
    left = remote_tree(fs, prefix)
    assert "manifest.json" not in left and left, "the build should have been killed mid-way"
    assert all(expected[name] == digest for name, digest in left.items())  # no partial object visible
    assert main(["stories", "--out", url, *KILLED, "--workers", "2"]) == 0
    assert "resumed" in capsys.readouterr().out
    assert remote_tree(fs, prefix) == expected


def test_tokenizer_from_and_to_s3_equals_the_local_one(
    s3_server, c4_on_s3, c4_buckets_reference, small_reference, remote_small, tmp_path
):
    bucket, (tokenizer, _) = c4_on_s3, c4_buckets_reference
    fs = s3_server.client()
    assert fs.cat_file(f"{bucket}/tok.json") == tokenizer.read_bytes()
    from_data = ["tokenizer", "--vocab-size", "300"]
    assert main([*from_data, "--data", remote_small[1], "--out", f"s3://{bucket}/lts-tok.json"]) == 0
    assert main([*from_data, "--data", str(small_reference), "--out", str(tmp_path / "lts-tok.json")]) == 0
    assert fs.cat_file(f"{bucket}/lts-tok.json") == (tmp_path / "lts-tok.json").read_bytes()


@pytest.mark.torch
def test_training_and_evaluation_read_their_data_from_s3(s3_server, tmp_path, monkeypatch):
    """train, evaluate and compare (its two runs in two worker processes at once) with the server named by
    --storage-options alone give what they give from the local folder. This compare is also the suite's
    comparison with runs in worker processes (test_compare.py's grid runs in the test's process)."""
    from training_fixtures import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "lts")
    bucket = s3_server.bucket()
    s3_server.client().put(f"{data}/", f"{bucket}/lts/", recursive=True)
    common = ["--train-length", "32", "--steps", "3", "--batch-size", "4", "--d-model", "32", "--n-layers", "2",
              "--heads", "2", "--vocab-size", "300", "--device", "cpu", "--log-every", "1", "--no-progress"]  # fmt: skip
    evaluation = ["--eval-lengths", "16,32", "--eval-sequences", "4"]
    monkeypatch.setenv("AWS_ENDPOINT_URL", DEAD_ENDPOINT)
    remote = ["--storage-options", json.dumps({"endpoint_url": s3_server.endpoint})]
    for name, where in (("local", [str(data)]), ("s3", [f"s3://{bucket}/lts", *remote])):
        assert (
            main(["train", "--encoding", "alibi", *common, "--data", *where, "--out", str(tmp_path / name)])
            == 0
        )
        assert main(["evaluate", "--run", str(tmp_path / name), "--data", *where, *evaluation, "--device", "cpu",
                     "--no-progress"]) == 0  # fmt: skip
    # two runs of compare in two worker processes at once: --storage-options reach the processes a command starts
    assert main(["compare", "--encodings", "nope,alibi", *common, *evaluation, "--workers", "2", "--data", *where,
                 "--out", str(tmp_path / "compare")]) == 0  # fmt: skip
    assert "FSSPEC_S3" not in os.environ  # the options lasted as long as the command
    runs = [tmp_path / "local", tmp_path / "s3"]
    losses = [[m["loss"] for m in map(json.loads, (run / "metrics.jsonl").open())] for run in runs]
    assert losses[0] == losses[1] and len(losses[0]) == 3
    results = [json.loads((run / "eval.json").read_text())["results"] for run in runs]
    assert [(r["eval_length"], r["loss"]) for r in results[0]] == [
        (r["eval_length"], r["loss"]) for r in results[1]
    ]
    compared = tmp_path / "compare" / "runs" / "T32-seed0" / "alibi" / "metrics.jsonl"
    assert [m["loss"] for m in map(json.loads, compared.open())] == losses[0]  # the same run as `train`'s
    rows = list(csv.DictReader((tmp_path / "compare" / "results.csv").open()))
    assert [(r["encoding"], r["eval_length"]) for r in rows] == [
        ("nope", "16"), ("nope", "32"), ("alibi", "16"), ("alibi", "32"),
    ]  # fmt: skip
