"""`ltsgen compare`: grids of training lengths and seeds, every row and report file, the RoPE family trained
once, fine-tuning, a too-small evaluation split stopped before training, a rerun that skips finished work."""

from __future__ import annotations

import csv
import json
import math
import os
import pickle
import re
from dataclasses import replace

import pytest
from training_fixtures import write_tiny_dataset

from ltsgen.cli import build_parser
from ltsgen.cli import main as ltsgen
from ltsgen.commands.train import training_config
from ltsgen.engines import SerialEngine
from ltsgen.training import compare
from ltsgen.training.report import _entropy_sentence
from ltsgen.training.stats import estimate
from ltsgen.training.verdicts import WINDOW_METRIC

FILES = ("results.json", "results.csv", "summary.csv", "claims.csv", "report.md", "penalty_vs_length.png",
         "ppl_vs_length.png", "entropy_vs_length.png", "loss_vs_position.png", "recall_vs_distance.png")  # fmt: skip
ENCODINGS = ("nope", "rope", "rope_pi", "alibi")
LENGTHS = ("16", "32", "64")
TINY = ["--batch-size", "4", "--d-model", "32", "--n-layers", "2", "--heads", "2", "--vocab-size", "300",
        "--device", "cpu", "--log-every", "1", "--no-progress"]  # fmt: skip


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    return write_tiny_dataset(tmp_path_factory.mktemp("compare") / "lts")


def test_a_grid_of_two_training_lengths_and_two_seeds_gives_every_row(data, tmp_path, capsys):
    """Every row, report file, interval and claim of a 2 x 2 grid, the RoPE family trained once, and a rerun
    with other settings refused. The runs go in this process (the default, one worker): runs in worker
    processes, two at once, are test_remote_builds.py's compare, and the engines' own tests cover their
    pools; workers change no byte of a run (test_ray.py: Ray tasks against this process). A rerun that keeps
    every run, through any engine in any order, is the fine-tuning test's (its report is a fifth of this
    one's to write again)."""
    out = tmp_path / "cmp"
    args = ["compare", "--data", str(data), "--encodings", ",".join(ENCODINGS), "--train-lengths", "16,32",
            "--seeds", "0,1", "--eval-lengths", ",".join(LENGTHS), "--steps", "3", "--eval-sequences", "4",
            "--encoding-option", "base=500", *TINY, "--out", str(out)]  # fmt: skip
    assert ltsgen(args) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"{data} has no tokenizer and none is given: training a byte-level BPE of 300 tokens on its training "
        f"split, written to {out}/tokenizer.json (`ltsgen tokenizer --data {data}` attaches one to the data "
        "for every run)"
    )
    for name in FILES:
        assert (out / name).stat().st_size > 0, name
    # the text is tokenized on the fly: the records' token counts are kept once, for every run
    counts = json.loads((out / "token_counts.json").read_text())
    train_shards = json.loads((data / "manifest.json").read_text())["splits"]["train"]
    assert sorted(counts["counts"]) == sorted(shard["sha256"] for shard in train_shards)
    assert not list((out / "runs").glob("*/*/token_counts.json"))
    for name in FILES[5:]:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["encoding"], r["train_length"], r["seed"], r["eval_length"]) for r in rows] == [
        (e, t, s, n) for t in ("16", "32") for s in ("0", "1") for e in ("nope", "rope", "rope_pi", "alibi")
        for n in LENGTHS
    ]  # fmt: skip
    for row in rows:
        assert math.isclose(float(row["perplexity"]), math.exp(float(row["loss"])), rel_tol=1e-9)
        assert 0 < float(row["attention_entropy_last"]) < math.log(int(row["eval_length"]))
        assert float(row["train_tokens_per_s"]) > 0 and row["num_sequences"] == "4"
        # each document's cued recall in its second sentence, which a 300-token vocabulary spells out in 36 tokens
        if row["eval_length"] == "64":
            assert row["recall_count"] == "4" and 0 <= float(row["recall_accuracy_control"]) <= 1
        else:
            assert (row["recall_count"], row["recall_accuracy"], row["recall_accuracy_control"]) == (
                "0",
                "",
                "",
            )
        penalty = float(row["same_token_loss_full"]) - float(row["same_token_loss_window"])
        assert float(row["extrapolation_penalty"]) == pytest.approx(penalty, abs=1e-12)
        if row["eval_length"] <= row["train_length"]:  # at L <= T the window is the whole context
            assert float(row["extrapolation_penalty"]) == 0.0
        assert row["trained"] == "False"  # three steps learn nothing: every verdict says so
    # the RoPE family trains once: rope_pi is rope's weights read with another scaling
    runs = sorted(p.name for p in (out / "runs" / "T16-seed0").iterdir())
    assert runs == ["alibi", "nope", "rope"]
    assert (out / "runs" / "T16-seed0" / "rope" / "eval-rope_pi.json").exists()
    by_key = {(r["encoding"], r["train_length"], r["seed"], r["eval_length"]): r for r in rows}
    for t, s in (("16", "0"), ("32", "1")):
        assert by_key[("rope_pi", t, s, t)]["perplexity"] == by_key[("rope", t, s, t)]["perplexity"]
        assert by_key[("rope_pi", t, s, "64")]["perplexity"] != by_key[("rope", t, s, "64")]["perplexity"]
    # distinct seeds are distinct runs: other initialisation and data order
    losses = {
        s: [
            json.loads(line)["loss"]
            for line in (out / "runs" / f"T16-seed{s}" / "alibi" / "metrics.jsonl").open()
        ]
        for s in (0, 1)
    }
    assert len(losses[0]) == 3 and losses[0] != losses[1]
    config = json.loads((out / "runs" / "T32-seed1" / "rope" / "config.json").read_text())
    assert config["train"]["seed"] == 1 and config["model"]["encoding_options"] == {"base": 500.0}
    # summary.csv: one row per (encoding, training length, length), intervals over seeds and documents
    summary = list(csv.DictReader((out / "summary.csv").open()))
    assert len(summary) == len(ENCODINGS) * 2 * len(LENGTHS)
    runs_json = json.loads((out / "results.json").read_text())["runs"]
    for row in summary:
        docs = {run["seed"]: result["per_document"] for run in runs_json for result in run["eval"]["results"]
                if (run["encoding"], str(run["train_length"]), str(result["eval_length"]))
                == (row["encoding"], row["train_length"], row["eval_length"])}  # fmt: skip
        loss = estimate({s: d["loss"] for s, d in docs.items()})
        penalty = estimate({s: d["extrapolation_penalty"] for s, d in docs.items()})
        assert row["n_seeds"] == "2" and all(len(d["loss"]) == 4 for d in docs.values())
        assert [float(row[k]) for k in ("perplexity_mean", "perplexity_ci_low", "perplexity_ci_high")] == (
            pytest.approx([math.exp(loss.mean), math.exp(loss.low), math.exp(loss.high)])
        )
        assert [float(row[f"extrapolation_penalty_{k}"]) for k in ("mean", "ci_low", "ci_high")] == (
            pytest.approx([penalty.mean, penalty.low, penalty.high])
        )
        if (
            row["eval_length"] == "64"
        ):  # the recall intervals: the same estimate, documents without a recall left out
            for metric in ("recall_accuracy", "recall_accuracy_control"):
                found = estimate(
                    {s: [math.nan if v is None else v for v in d[metric]] for s, d in docs.items()}
                )
                assert [float(row[f"{metric}_{k}"]) for k in ("mean", "ci_low", "ci_high")] == pytest.approx(
                    [found.mean, found.low, found.high]
                )
            assert row["recall_count"] == "4"
        else:
            assert row["recall_count"] == row["recall_accuracy_mean"] == row["recall_accuracy_ci_low"] == ""
    # claims.csv: every test, Holm-corrected across both training lengths; no verdict for untrained models
    claims = list(csv.DictReader((out / "claims.csv").open()))
    assert list(claims[0])[:8] == [
        "claim",
        "source",
        "measured",
        "ci_low",
        "ci_high",
        "p",
        "p_holm",
        "verdict",
    ]
    # per training length: rope_pi, rope and alibi against NoPE, rope_pi and alibi against RoPE, the claims
    # that RoPE and NoPE degrade, ALiBi better than RoPE (already a comparison: tested once); and each
    # encoding's recalls within its window where the window holds any (RoPE-PI's are RoPE's: tested once)
    windows = [(c["train_length"], c["claim"].split("'")[0]) for c in claims if c["metric"] == WINDOW_METRIC]
    assert len(claims) - len(windows) == 2 * (3 + 2 + 2)
    assert sorted(windows) == [("32", "alibi"), ("32", "nope"), ("32", "rope")]
    assert {c["verdict"] for c in claims} == {"undertrained"}
    ps = sorted(float(c["p"]) for c in claims)
    assert max(float(c["p_holm"]) for c in claims) <= 1.0
    assert min(float(c["p_holm"]) for c in claims) == pytest.approx(min(1.0, len(claims) * ps[0]))
    report = (out / "report.md").read_text()
    for heading in ("## Trained at 16 tokens", "## Trained at 32 tokens", "### Extrapolation penalty",
                    "## Speed and memory", "## Tests and verdicts", "## Did the models learn?", "### Cued recall",
                    "Within the training window: each cued recall read in its own 32-token window"):  # fmt: skip
        assert heading in report
    assert "rope_pi (zero-shot)" in report and "seeds and documents crossed" in report
    assert "exp of the mean loss" in report and "Where one seed is behind" not in report
    assert "Each document's share, averaged over the documents with a scored recall" in report  # not pooled
    assert "runs are undertrained" in report
    assert (
        "Evaluation documents: the validation split: the first 4 documents (in stored order) of at least 64"
        in report
    )
    capsys.readouterr()

    # a rerun with other settings is refused before it touches anything
    assert ltsgen([*args[:-2], "--steps", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "compare.json" in err and "steps: 3 -> 5" in err


def test_rope_pi_and_yarn_fine_tuned_at_each_longer_length_and_a_rerun_keeps_every_run(
    data, tmp_path, capsys
):
    """The fine-tuned rows and runs; then a rerun through an engine that pickles each spec and runs them in
    reverse order keeps every run, the base run and the fine-tunings that start from it, and writes the same
    results.json."""
    out = tmp_path / "ft"
    args = ["compare", "--data", str(data), "--encodings", "rope_pi,yarn", "--train-lengths", "16",
            "--eval-lengths", "16,32,48", "--steps", "2", "--finetune-steps", "2", "--eval-sequences", "4", *TINY,
            "--out", str(out)]  # fmt: skip
    assert ltsgen(args) == 0
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [(r["encoding"], r["eval_length"]) for r in rows] == [
        ("rope_pi", "16"), ("rope_pi", "32"), ("rope_pi", "48"), ("yarn", "16"), ("yarn", "32"), ("yarn", "48"),
        ("rope_pi+finetuned", "32"), ("rope_pi+finetuned", "48"), ("yarn+finetuned", "32"), ("yarn+finetuned", "48"),
    ]  # fmt: skip
    assert all(r["train_length"] == "16" for r in rows)
    # a fine-tuned run's penalty is measured with the comparison's window (16), not its own length (32)
    assert all(float(r["extrapolation_penalty"]) != 0.0 for r in rows if r["eval_length"] == "32")
    # on the documents of the comparison's longest length, as every run: its values pair with theirs
    runs = out / "runs" / "T16-seed0"
    base = json.loads((runs / "rope" / "eval-rope_pi.json").read_text())["results"][1]
    tuned = json.loads((runs / "rope_pi-finetuned-32" / "eval.json").read_text())
    assert tuned["documents_length"] == 48 and tuned["results"][0]["documents"] == base["documents"]
    assert tuned["results"][0]["unigram_loss"] == base["unigram_loss"]
    tuned = json.loads((out / "runs" / "T16-seed0" / "yarn-finetuned-32" / "config.json").read_text())
    assert tuned["train"]["init_from"].endswith("T16-seed0/rope") and tuned["train"]["train_length"] == 32
    assert tuned["model"]["encoding_options"]["factor"] == 2.0
    assert tuned["model"]["encoding_options"]["original_length"] == 16
    report = (out / "report.md").read_text()
    assert "yarn (fine-tuned 2 steps)" in report
    # one seed (before: its intervals and p-values were said to cross seeds and documents, nothing more)
    assert "Where one seed is behind a value (`n_seeds` in summary.csv and claims.csv), they cover" in report
    capsys.readouterr()

    # a rerun keeps every run and logs each as kept; any engine can carry them (each spec survives pickling,
    # any order). One rerun, with the command's settings and its log (print), shows both: each rerun writes
    # the whole report again, the slow part of a rerun.
    before = (out / "results.json").read_bytes()
    seen = []
    evaluated = (
        out / "runs" / "T16-seed0" / "rope" / "eval-rope_pi.json"
    )  # as `ltsgen evaluate` on other data
    evaluated.write_text(json.dumps({**json.loads(evaluated.read_text()), "data": "elsewhere"}))
    evaluated = evaluated.with_name("eval-yarn.json")  # as `ltsgen evaluate --as-encoding yarn` with options
    evaluated.write_text(json.dumps({**json.loads(evaluated.read_text()), "options_asked": {"beta_fast": 4}}))

    class Reversed(SerialEngine):
        def map(self, fn, specs):
            seen.extend(specs)
            return [fn(pickle.loads(pickle.dumps(spec))) for spec in reversed(specs)]

    base = training_config(build_parser().parse_args(args), encoding="rope", train_length=16)
    base = replace(base, data=f"{os.path.relpath(data)}/")  # the same data, spelled another way
    compare(base, ["rope_pi", "yarn"], [16, 32, 48], train_lengths=[16], eval_sequences=4, finetune_steps=2,
            engine=Reversed(), progress=False)  # fmt: skip
    assert len(seen) == 5  # rope (the family's one training), rope_pi and yarn fine-tuned at 32 and 48
    timings = re.compile(rb'"(seconds|peak_memory_mib)": [0-9.e-]+')  # of the evaluation made again
    after = (out / "results.json").read_bytes().replace(f'"{base.data}"'.encode(), f'"{data}"'.encode())
    assert timings.sub(b"", after) == timings.sub(b"", before)
    log = capsys.readouterr().out
    assert (
        log.count("trained earlier, kept") == 5 and log.count("evaluated earlier, kept") == 4
    )  # not on other data, nor with other options


def test_an_evaluation_split_too_small_stops_before_any_training(tmp_path, capsys):
    data = write_tiny_dataset(tmp_path / "few", validation=2)
    out = tmp_path / "cmp"
    args = ["compare", "--data", str(data), "--encodings", "nope", "--train-lengths", "16", "--eval-lengths",
            "16,64", "--steps", "2", "--eval-sequences", "8", *TINY, "--out", str(out)]  # fmt: skip
    assert ltsgen(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "validation: 2 of 2 documents reach 64 tokens" in err
    assert "needs at least 4 (of --eval-sequences 8)" in err
    assert not (out / "runs").exists()
    # a start refused for its data or settings does not hold the folder to them: nor does a mistyped --data
    assert not (out / "compare.json").exists() and not (out / "tokenizer.json").exists()
    assert ltsgen([*args[:2], f"{data}X", *args[3:]]) == 2
    assert capsys.readouterr().err.strip().endswith(f"{data}X/manifest.json: not found")
    assert ltsgen([*args[:2], str(write_tiny_dataset(tmp_path / "more")), *args[3:]]) == 0
    assert json.loads((out / "compare.json").read_text())["data"] == str(tmp_path / "more")


def test_the_entropy_sentence_says_how_many_sequences_it_read():
    runs = [{"train_length": 16, "eval": {"results": [{"entropy_sequences": 3, "num_sequences": n}]}}
            for n in (3, 6)]  # fmt: skip
    assert _entropy_sentence(runs[1:], 16) == (
        "Entropy is measured on the first 3 of the 6 evaluation sequences per length."
    )
    assert (
        _entropy_sentence(runs[:1], 16) == "Entropy is measured on every evaluation sequence (3 per length)."
    )
    assert _entropy_sentence(runs, 16) == (
        "Entropy is measured on the first 3 of the 3, 6 evaluation sequences per length."
    )


def test_an_option_no_compared_encoding_has_names_the_closest(data, tmp_path, capsys):
    args = [
        "compare",
        "--data",
        str(data),
        "--encodings",
        "FIRE,alibi",
        "--out",
        str(tmp_path / "cmp"),
        *TINY,
    ]
    assert ltsgen([*args, "--encoding-option", "treshold=64"]) == 2
    assert capsys.readouterr().err == (
        "ltsgen compare: error: --encoding-option treshold: no compared encoding has such an option (did you "
        "mean 'threshold'?); they take c, mlp_layers, mlp_width, share_across_layers, threshold\n"
    )
    assert ltsgen(["compare", "--data", str(data), "--encodings", "alibi", "--encoding-option", "x=1",
                   "--out", str(tmp_path / "cmp"), *TINY]) == 2  # fmt: skip
    assert capsys.readouterr().err.endswith("no compared encoding has such an option; they take no options\n")
    assert (
        ltsgen([*args, "--encoding-option", "threshold=0"]) == 2
    )  # out of range: before anything is written
    assert (
        capsys.readouterr().err == "ltsgen compare: error: fire threshold must be positive or None, got 0.0\n"
    )
    assert not (tmp_path / "cmp").exists()


def test_the_loss_plot_takes_runs_evaluated_at_different_lengths(tmp_path):
    """A seed without the longest length (before: IndexError, and no report.md)."""
    from ltsgen.training.report import plot_loss_vs_position

    def result(length: int) -> dict:
        curve = {"position": [1, length // 2, length], "loss": [5.0, 4.0, 3.0]}
        return {"eval_length": length, "per_position": curve, "same_token_loss_full": 3.5,
                "same_token_loss_window": 3.4}  # fmt: skip

    runs = [{"encoding": "fire", "train_length": 16, "seed": seed,
             "eval": {"results": [result(n) for n in (16, 32, 64)[: 3 - seed]]}} for seed in range(2)]  # fmt: skip
    plot_loss_vs_position(tmp_path / "loss.png", runs)
    assert (tmp_path / "loss.png").read_bytes().startswith(b"\x89PNG")


def test_the_speed_table_shows_each_encoding_with_the_training_behind_it_and_a_stale_recall_plot_goes(
    tmp_path,
):
    """Before: rows by the trained encoding, so a zero-shot RoPE-PI's memory was never shown, and a fine-tuning's
    tokens/s was RoPE-PI's "training" speed, at 0.15x NoPE; and a rerun of a grid without cued recalls kept an
    earlier grid's recall_vs_distance.png."""
    from ltsgen.training.report import _speed_section, write_recall_plot

    def made(label: str, trained: str, tokens_per_s: float) -> dict:
        return {"encoding": label, "train_length": 16, "seed": 0, "eval": {"results": [{"eval_length": 32}]},
                "train": {"encoding": trained, "tokens_per_s": tokens_per_s}}  # fmt: skip

    runs = [made("nope", "nope", 100.0), made("rope", "rope", 50.0), made("rope_pi", "rope", 50.0),
            made("rope_pi+finetuned", "rope_pi", 10.0)]  # fmt: skip
    rows = [{"encoding": label, "eval_length": 32, "peak_memory_mib": mib}
            for label, mib in (("nope", 7.0), ("rope", 8.0), ("rope_pi", 9.0), ("rope_pi+finetuned", 11.0))]  # fmt: skip
    table = [line for line in "\n".join(_speed_section(runs, rows, 2)).splitlines() if line.startswith("| ")][
        1:
    ]
    assert table == [
        "| nope | 100 | 1.00 | 7 |",
        "| rope | 50 | 0.50 | 8 |",
        "| rope_pi (zero-shot) | 50 | 0.50 | 9 |",
        "| rope_pi (fine-tuned 2 steps) | 10 | - | 11 |",
    ]
    stale = tmp_path / "recall_vs_distance.png"
    stale.write_bytes(b"\x89PNG")
    assert write_recall_plot(tmp_path, runs) is None and not stale.exists()


def test_a_rerun_whose_encoding_options_make_the_same_runs_is_not_refused(tmp_path):
    """Options spelled otherwise, or a default given by hand, train the same runs; another value does not."""
    from ltsgen.training.compare import _check_settings
    from ltsgen.training.errors import TrainingError

    path = tmp_path / "compare.json"
    settings = {
        "encodings": ["nope", "rope", "alibi"],
        "train_lengths": [16, 32],
        "encoding_options": {"base": "500"},
    }
    path.write_text(json.dumps(settings))
    for same in ({"base": "5e2"}, {"base": 500.0}):
        _check_settings(path, {**settings, "encoding_options": same})
    path.write_text(json.dumps({**settings, "encoding_options": {}}))
    _check_settings(path, {**settings, "encoding_options": {"base": "10000"}})  # RoPE's default
    with pytest.raises(TrainingError, match=r"encoding_options: \{\} -> \{'base': '500'\}"):
        _check_settings(path, settings)
    # and an evaluation read with options spelled otherwise is kept, not made again (before: evaluated again)
    from ltsgen.training.compare import _resolved

    assert _resolved("rope_pi", 16, {"base": "5e2", "factor": 2}) == _resolved(
        "rope_pi", 16, {"base": 500.0, "factor": "2.0"}
    )
    assert _resolved("rope_pi", 16, {"base": "5e2"}) != _resolved("rope_pi", 16, {"base": "600"})


def test_an_encoding_named_twice_is_refused():
    """Before, "rope,RoPE" was one run said as two names, taken once without a word."""
    from ltsgen.training.compare import resolve_encodings
    from ltsgen.training.errors import TrainingError

    assert resolve_encodings("rope,ALiBi") == ["rope", "alibi"]
    with pytest.raises(TrainingError, match=r"^--encodings 'rope,alibi,RoPE': rope is given twice$"):
        resolve_encodings("rope,alibi,RoPE")
