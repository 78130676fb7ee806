"""hf:// end to end, read-only, against a local HTTP server on 127.0.0.1 that speaks the part of the Hugging
Face Hub's HTTP API that ``huggingface_hub.HfFileSystem`` calls (repository info, tree listing,
``resolve`` downloads with Range; ``tests/support/hub_server.py``). It is not the Hub: it serves
folders of this machine as dataset repositories. The client side is the real one: the commands run in
subprocesses with ``HF_ENDPOINT`` pointing at the server and ``HF_HUB_OFFLINE=0``.

Shown: ``ltsgen buckets --input 'hf://datasets/.../*.json.gz'`` builds the same shards as from the local
file; the loader over ``hf://`` yields exactly the local samples (records, and packed batches with 2
workers through the node-local cache); ``ltsgen evaluate --data hf://...`` gives the local losses, with the
server named by ``--storage-options`` alone; and the client needed nothing the server does not serve.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from corpus_fixtures import C4_GZ
from hub_server import HubServer
from loader_fixtures import make_dataset
from remote_fixtures import BUCKETS, LTSGEN, local_tree

from ltsgen.cli import main
from ltsgen.loaders import StreamingDataset

SIZES = [9, 14, 6, 11]
COMMON = {"seed": 2, "batch_size": 2, "seq_len": 23, "shuffle_window": 2}
READ = """
import json, sys
from ltsgen.loaders import StreamingDataset

url, cache, common = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
records = [(r["id"], r["text"], r["input_ids"].tolist(), json.dumps(r["meta"], sort_keys=True))
           for r in StreamingDataset(url, seed=common["seed"])]
dataset = StreamingDataset(url, cache_dir=cache, **common)
batches = [b["input_ids"].flatten().tolist() for b in dataset.loader(num_workers=2)]
print(json.dumps({"records": records, "batches": batches}))
"""


@pytest.fixture(scope="module")
def hub(real_data, tmp_path_factory):
    """The server with two dataset repositories: a packed-token dataset and the C4 sample."""
    root = tmp_path_factory.mktemp("hub")
    lengths = np.random.default_rng(6).integers(20, 300, size=sum(SIZES))
    packed = make_dataset(root / "packed", SIZES, "parquet", lengths=lengths)
    corpus = root / "c4" / "en"
    corpus.mkdir(parents=True)
    (corpus / "part-0.json.gz").write_bytes((real_data / C4_GZ).read_bytes())
    server = HubServer.start({"someone/packed": packed, "someone/c4": root / "c4"})
    try:
        yield server, packed
    finally:
        server.stop()


def run(server: HubServer, argv: list[str], **env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **server.env, "OMP_NUM_THREADS": "1", **env}
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)


def downloads(server: HubServer, repo_id: str) -> set[str]:
    """The files of ``repo_id`` that the server sent (whole or in ranges)."""
    prefix = f"/datasets/{repo_id}/resolve/main/"
    return {
        path[len(prefix) :]
        for method, path, _ in server.requests
        if method == "GET" and path.startswith(prefix)
    }


def test_loader_over_hf_yields_exactly_the_local_samples(hub, tmp_path):
    server, packed = hub
    process = run(server, [sys.executable, "-c", READ, "hf://datasets/someone/packed", str(tmp_path / "cache"),
                           json.dumps(COMMON)])  # fmt: skip
    assert process.returncode == 0, process.stderr
    got = json.loads(process.stdout.strip().splitlines()[-1])
    records = [
        [r["id"], r["text"], r["input_ids"].tolist(), json.dumps(r["meta"], sort_keys=True)]
        for r in StreamingDataset(packed, seed=COMMON["seed"])
    ]
    assert got["records"] == records and len(records) == sum(SIZES)
    batches = [b["input_ids"].flatten().tolist() for b in StreamingDataset(packed, **COMMON).loader()]
    assert got["batches"] == batches and len(batches) > 10
    assert downloads(server, "someone/packed") == {
        "manifest.json",
        *(f"train/shard-0000{i}.parquet" for i in range(4)),
    }
    assert server.unserved == []


def test_buckets_from_hf_equal_the_local_build(hub, real_data, c4_buckets_reference, tmp_path):
    """The session's local build of the C4 sample (its tokenizer and arguments) is the reference."""
    server, _ = hub
    tokenizer, reference = c4_buckets_reference
    argv = ["buckets", *BUCKETS, "--tokenizer", str(tokenizer)]
    url = "hf://datasets/someone/c4/en/*.json.gz"
    process = run(server, [LTSGEN, *argv, "--input", url, "--out", str(tmp_path / "hf")])
    assert process.returncode == 0, process.stderr
    built, expected = local_tree(tmp_path / "hf"), local_tree(reference)
    assert built.pop("manifest.json") and expected.pop("manifest.json")  # it names its inputs
    assert built.pop("README.md") and expected.pop("README.md")  # the card quotes the command
    assert built == expected and any(name.endswith(".parquet") for name in built)
    inputs = json.loads((tmp_path / "hf" / "manifest.json").read_text())["builder"]["arguments"]["inputs"]
    size = (real_data / C4_GZ).stat().st_size
    assert inputs == [{"path": "hf://datasets/someone/c4/en/part-0.json.gz", "bytes": size}]
    assert downloads(server, "someone/c4") == {"en/part-0.json.gz"}
    assert server.unserved == []
    # a repository or file the hub does not have is one line naming it
    process = run(server, [LTSGEN, *argv, "--input", "hf://datasets/someone/none/x.json.gz", "--out",
                           str(tmp_path / "none")])  # fmt: skip
    assert process.returncode == 2 and process.stderr.count("\n") == 1, process.stderr
    assert (
        process.stderr
        == "ltsgen buckets: error: hf://datasets/someone/none/x.json.gz: no such file or folder\n"
    )


@pytest.mark.torch
def test_evaluate_reads_its_data_from_hf_named_by_storage_options(hub, tmp_path):
    from training_fixtures import write_tiny_dataset

    server, _ = hub
    data = write_tiny_dataset(tmp_path / "lts")
    server.serve("someone/lts", data)
    run_dir = tmp_path / "run"
    assert main(["train", "--encoding", "alibi", "--data", str(data), "--train-length", "32", "--steps", "2",
                 "--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--heads", "2", "--vocab-size",
                 "300", "--device", "cpu", "--no-progress", "--out", str(run_dir)]) == 0  # fmt: skip
    evaluation = [
        "--run",
        str(run_dir),
        "--eval-lengths",
        "16,32",
        "--eval-sequences",
        "4",
        "--device",
        "cpu",
    ]
    evaluation += ["--no-progress"]
    assert main(["evaluate", *evaluation, "--data", str(data)]) == 0
    local = json.loads((run_dir / "eval.json").read_text())["results"]
    (run_dir / "eval.json").unlink()
    # the server named by --storage-options alone: HF_ENDPOINT points where nothing listens
    options = json.dumps({"endpoint": server.endpoint})
    argv = [
        LTSGEN,
        "evaluate",
        *evaluation,
        "--data",
        "hf://datasets/someone/lts",
        "--storage-options",
        options,
    ]
    process = run(server, argv, HF_ENDPOINT="http://127.0.0.1:9")
    assert process.returncode == 0, process.stderr
    remote = json.loads((run_dir / "eval.json").read_text())["results"]
    assert [(r["eval_length"], r["loss"]) for r in remote] == [(r["eval_length"], r["loss"]) for r in local]
    assert downloads(server, "someone/lts") >= {"manifest.json", "validation/shard-00000.tar"}
    assert server.unserved == []


def test_the_hub_server_serves_ranges_as_the_hub_does(hub):
    """The server's own contract, read through huggingface_hub's file system in a fresh process."""
    server, packed = hub
    name = "train/shard-00001.parquet"
    data = (Path(packed) / name).read_bytes()
    script = (
        "import sys; from huggingface_hub import HfFileSystem; fs = HfFileSystem()\n"
        f"h = fs.open('datasets/someone/packed/{name}', block_size=64); h.seek(100); "
        "sys.stdout.buffer.write(h.read(50))"
    )
    process = subprocess.run(
        [sys.executable, "-c", script], env={**os.environ, **server.env}, capture_output=True
    )
    assert process.returncode == 0, process.stderr
    assert process.stdout == data[100:150]
    assert any(r for method, path, r in server.requests if path.endswith(name) and r and r != "bytes=0-")
