"""`ltsgen compare`: every report file produced and non-empty, a rerun skips finished work."""

from __future__ import annotations

import csv
import json
import math
import pickle

from test_training import write_tiny_dataset

from ltsgen.cli import build_parser
from ltsgen.cli import main as ltsgen
from ltsgen.commands.train import training_config
from ltsgen.training import compare

FILES = ("results.json", "results.csv", "report.md", "ppl_vs_length.png", "entropy_vs_length.png",
         "loss_vs_position.png")  # fmt: skip


def test_compare_writes_every_report_file_and_resumes(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "lts")
    out = tmp_path / "cmp"
    args = ["compare", "--data", str(data), "--encodings", "nope,rope,rope_pi,alibi", "--train-length", "32",
            "--eval-lengths", "16,32,128", "--steps", "3", "--batch-size", "4", "--d-model", "32", "--layers", "2",
            "--heads", "2", "--vocab-size", "300", "--eval-sequences", "4", "--device", "cpu", "--log-every", "1", "--no-progress",
            "--out", str(out)]  # fmt: skip
    assert ltsgen([*args, "--workers", "2"]) == 0  # two encodings at a time, in worker processes
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    for name in FILES[3:]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["encoding"], r["eval_length"]) for r in rows] == [
        (e, n) for e in ("nope", "rope", "rope_pi", "alibi") for n in ("16", "32", "128")
    ]
    for row in rows:
        assert row["train_length"] == "32"
        assert math.isclose(float(row["perplexity"]), math.exp(float(row["loss"])), rel_tol=1e-9)
        assert 0 < float(row["attention_entropy"]) < math.log(int(row["eval_length"]))
        assert float(row["train_tokens_per_s"]) > 0
    report = (out / "report.md").read_text()
    for heading in ("## Perplexity by evaluation length", "## Speed and memory", "## The papers' claims"):
        assert heading in report
    assert "NoPE and RoPE degrade sharply" in report and "| alibi |" in report
    results = json.loads((out / "results.json").read_text())
    assert results["settings"]["encodings"] == ["nope", "rope", "rope_pi", "alibi"]
    assert sorted(results["runs"]) == sorted(results["settings"]["encodings"])
    # same seed, data order and budget: RoPE-PI trains at factor 1, which is RoPE, so its losses are RoPE's
    losses = {
        e: [m["loss"] for m in map(json.loads, (out / "runs" / e / "metrics.jsonl").open())]
        for e in results["runs"]
    }
    assert losses["rope_pi"] == losses["rope"] and len(losses["nope"]) == 3
    capsys.readouterr()

    before = (out / "results.json").read_bytes()
    assert ltsgen(args) == 0
    log = capsys.readouterr().out
    assert log.count("trained earlier, kept") == 4 and log.count("evaluated earlier, kept") == 4
    assert (out / "results.json").read_bytes() == before

    # any engine's map can carry the runs: each spec survives pickling, results may come back in any order
    seen = []

    def reversed_map(fn, specs):
        seen.extend(specs)
        return [fn(pickle.loads(pickle.dumps(spec))) for spec in reversed(specs)]

    base = training_config(build_parser().parse_args(args[:1] + args[1:]), "nope")
    compare(base, ["nope", "rope", "rope_pi", "alibi"], [16, 32, 128], eval_sequences=4, run_map=reversed_map,
            progress=False, log=lambda line: None)  # fmt: skip
    assert [spec.config.encoding for spec in seen] == ["nope", "rope", "rope_pi", "alibi"]
    assert (out / "results.json").read_bytes() == before

    assert ltsgen([*args[:-2], "--steps", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "compare.json" in err and "steps: 3 -> 5" in err
