"""Every recipe of docs/recipes.md runs: its python block, with the constants at its top made small, in a
process of its own beside a small story dataset with an attached tokenizer. The processes are forked from
the test process, except the Hub recipe's (huggingface_hub reads its endpoint when it is imported); the
torchrun loop runs on two real gloo ranks; the Hub recipe uploads to the repository's local Hub-compatible
server and reads the dataset back through ``hf://``. The two recipes that train are marked torch; the
mixture and the Hub recipes only read."""

from __future__ import annotations

import contextlib
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from process_tools import forked, free_port, join_all

from ltsgen.cli import main as ltsgen

REPO = Path(__file__).resolve().parents[2]
SMALL = "SEQ_LEN, BATCH, STEPS = 32, 2, 3"


def recipes() -> dict[str, str]:
    """heading -> its python block, as docs/recipes.md shows them."""
    text = (REPO / "docs" / "recipes.md").read_text(encoding="utf-8")
    found = {}
    for section in re.split(r"^## ", text, flags=re.M)[1:]:
        blocks = re.findall(r"^```python\n(.*?)^```", section, flags=re.M | re.S)
        if blocks:
            found[section.splitlines()[0]] = blocks[0]
    return found


def small(code: str) -> str:
    assert code.count("SEQ_LEN, BATCH, STEPS = ") == 1
    return re.sub(r"^SEQ_LEN, BATCH, STEPS = .*$", SMALL, code, flags=re.M)


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("recipes")
    lts = str(work / "lts")
    assert (
        ltsgen(["stories", "--out", lts, "--num-stories", "12", "--max-words", "600", "--no-progress"]) == 0
    )
    assert ltsgen(["tokenizer", "--data", lts, "--vocab-size", "300", "--no-progress"]) == 0
    return work


def _run_forked(script: Path) -> str:
    """Run ``script`` as ``__main__`` in a child ``forked`` from this process, in the script's folder: it
    finds torch and transformers imported already (a fresh process spends 7 s on 2 cores importing them for
    the `Trainer`), and runs with fresh globals, so that a recipe that lacks an import still fails."""
    out = script.with_suffix(".out")
    join_all([forked(_main, script, out)], timeout=300)
    return out.read_text(encoding="utf-8")


def _main(script: Path, out: Path) -> None:
    os.chdir(script.parent)
    with out.open("w", encoding="utf-8") as handle, contextlib.redirect_stdout(handle):
        runpy.run_path(str(script), run_name="__main__")


def test_the_document_holds_the_four_recipes():
    assert list(recipes()) == [
        "Hugging Face `Trainer`", "A plain training loop under `torchrun`", "A mixture of datasets",
        "Publishing a dataset folder to the Hub",
    ]  # fmt: skip


@pytest.mark.torch
def test_the_trainer_recipe_trains_on_packed_blocks(work):
    pytest.importorskip("accelerate")
    from transformers import Trainer  # noqa: F401  (imported before the fork, as `_run_forked` says)

    (work / "hf.py").write_text(small(recipes()["Hugging Face `Trainer`"]), encoding="utf-8")
    out = _run_forked(work / "hf.py")
    assert re.search(r"^trained 3 steps, loss \d+\.\d{3}$", out, flags=re.M), out


@pytest.mark.torch
def test_the_torchrun_loop_runs_on_two_ranks(work):
    """Two gloo ranks forked from this process, with the variables torchrun gives each rank (test_training.py
    runs ``ltsgen train`` under torchrun itself)."""
    script = work / "train_loop.py"
    script.write_text(small(recipes()["A plain training loop under `torchrun`"]), encoding="utf-8")
    port = str(free_port())
    ranks = []
    for rank in range(2):
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port}  # fmt: skip
        ranks.append(forked(_main, script, work / f"rank{rank}.out", env=env))
    join_all(ranks, timeout=300)
    # rank 0 alone prints; two ranks of 3 batches of 2 sequences each: 12 sequences in all
    first, second = ((work / f"rank{rank}.out").read_text(encoding="utf-8") for rank in range(2))
    found = re.findall(r"^step 3: loss \d+\.\d{3}, (\d+) sequences read in all$", first, flags=re.M)
    assert found == ["12"] and second == ""


def test_the_mixture_recipe_mixes_two_story_sets(work):
    long = str(work / "lts-long")  # the recipe's build of longer stories, smaller
    args = ["--num-stories", "4", "--min-words", "800", "--max-words", "1200", "--seed", "1", "--no-progress"]
    assert ltsgen(["stories", "--out", long, *args]) == 0
    (work / "mix.py").write_text(small(recipes()["A mixture of datasets"]), encoding="utf-8")
    assert _run_forked(work / "mix.py").splitlines()[-1] == "3 mixed batches"


def test_the_hub_recipe_uploads_the_dataset_and_the_hub_serves_it_as_on_disk(work, tmp_path):
    pytest.importorskip("huggingface_hub")
    from hub_server import HubServer

    from ltsgen.loaders import StreamingDataset

    server = HubServer.start({}, upload_root=tmp_path / "hub")
    try:
        env = {**os.environ, **server.env, "HF_TOKEN": "hf_test", "OMP_NUM_THREADS": "1"}
        code = recipes()["Publishing a dataset folder to the Hub"]
        upload = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                timeout=300, cwd=work)  # fmt: skip
        assert upload.returncode == 0, upload.stderr[-3000:]
        files = sorted(str(p.relative_to(work / "lts")) for p in (work / "lts").rglob("*") if p.is_file())
        published = tmp_path / "hub" / "your-name" / "lts"
        uploaded = sorted(str(p.relative_to(published)) for p in published.rglob("*") if p.is_file())
        assert [name for name in files if name.startswith(".ltsgen/")] != []  # the build's state is there ...
        assert uploaded == [name for name in files if not name.startswith(".ltsgen/")]  # ... and left out
        assert all((published / name).read_bytes() == (work / "lts" / name).read_bytes() for name in uploaded)
        read = (
            "import json, sys\n"
            "from ltsgen.loaders import StreamingDataset\n"
            "dataset = StreamingDataset(sys.argv[1], seq_len=32, batch_size=2, seed=0)\n"
            "print(json.dumps([batch['input_ids'].tolist() for batch in dataset.loader()]))\n"
        )
        remote = subprocess.run([sys.executable, "-c", read, "hf://datasets/your-name/lts"], env=env,
                                capture_output=True, text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    finally:
        server.stop()
    assert remote.returncode == 0, remote.stderr[-3000:]
    local = StreamingDataset(str(work / "lts"), seq_len=32, batch_size=2, seed=0)
    local_batches = [batch["input_ids"].tolist() for batch in local.loader()]
    assert local_batches and np.array_equal(np.array(json.loads(remote.stdout)), np.array(local_batches))
