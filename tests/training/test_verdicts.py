"""The tests a comparison's report makes (``ltsgen.training.verdicts``), on evaluations made up here: which
tests run, over which seeds, and which runs count as trained."""

from __future__ import annotations

import numpy as np
import pytest

from ltsgen.training import verdicts
from ltsgen.training.verdicts import ENTROPY, PENALTY, TRAINED_MARGIN, trained_runs


def run(
    encoding: str, seed: int, lengths: dict[int, float], margin: float = 2.0, train_length: int = 32
) -> dict:
    """A run evaluated at each length of ``lengths`` (length -> its mean penalty) on 8 documents."""
    noise = np.random.default_rng(seed).normal(0, 0.01, size=8)
    results = [
        {
            "eval_length": length,
            "unigram_loss": 5.0,
            "same_token_loss_window": 5.0 - margin,
            "per_document": {PENALTY: list(penalty + noise), ENTROPY: list(1.0 + noise)},
        }
        for length, penalty in lengths.items()
    ]
    return {"encoding": encoding, "train_length": train_length, "seed": seed, "eval": {"results": results}}


def test_penalty_tests_run_without_an_evaluation_length_within_the_training_length():
    runs = [run(name, seed, {64: penalty, 128: penalty}) for seed in range(3)
            for name, penalty in (("rope", 0.5), ("alibi", -0.1), ("ape", 0.0))]  # fmt: skip
    rows = verdicts.tests(runs)
    assert {row["metric"] for row in rows} == {"penalty", "penalty: alibi - rope", "penalty: ape - rope"}
    assert all(row["eval_length"] == 128 for row in rows)  # APE's entropy claims need a length within T
    rows = verdicts.tests(
        [run(name, seed, {32: 0.0, 128: 0.5}) for seed in range(3) for name in ("rope", "ape")]
    )
    assert any(row["metric"].startswith("growth of the last-T-queries attention entropy") for row in rows)


def test_a_run_left_out_as_diverged_takes_its_seed_out_of_the_tests_that_need_it():
    runs = [run(name, seed, {32: 0.0, 128: penalty}) for seed in range(3)
            for name, penalty in (("rope", 0.5), ("alibi", -0.1))]  # fmt: skip
    runs = [r for r in runs if (r["encoding"], r["seed"]) != ("rope", 1)]  # diverged: not evaluated
    rows = {row["claim"]: row for row in verdicts.tests(runs)}
    assert rows["ALiBi extrapolates better than RoPE"]["n_seeds"] == 2  # seeds 0 and 2, paired
    assert (
        rows["RoPE's loss on the same tokens rises with context beyond the training length"]["n_seeds"] == 2
    )


def test_a_label_with_no_run_evaluated_where_a_test_reads_it_is_left_out_of_that_test():
    """RoPE-PI fine-tuned at 64 but diverged at 128 in every seed; APE with no length within T for its
    entropy claims. Before: ``ValueError: no seed in common`` from the report, which was not written."""
    runs = [run(name, seed, {32: 0.0, 64: 0.1, 128: penalty}) for seed in range(3)
            for name, penalty in (("rope", 0.5), ("nope", 0.4))]  # fmt: skip
    runs += [run("rope_pi+finetuned", seed, {64: 0.0}) for seed in range(3)]
    runs += [run("ape", seed, {128: 0.0}) for seed in range(3)]
    rows = {row["claim"]: row for row in verdicts.tests(runs)}
    assert not any("rope_pi+finetuned" in claim for claim in rows)
    assert not any(row["metric"].startswith("growth") for row in rows.values())
    assert rows["ape extrapolates better than rope"]["n_seeds"] == 3


def test_runs_that_share_a_key_count_by_the_least_trained():
    tuned = [
        run("rope_pi+finetuned", 0, {64: 0.0}, margin=0.1),
        run("rope_pi+finetuned", 0, {128: 0.0}, margin=1.4),
    ]
    status = trained_runs(tuned)[("rope_pi+finetuned", 32, 0)]
    assert status["margin"] == pytest.approx(0.1) and not status["trained"] and 0.1 < TRAINED_MARGIN


def windowed(encoding: str, seed: int, gap: float, margin: float = 2.0) -> dict:
    """A run whose cued recalls in their own T-token windows beat their controls by ``gap``."""
    made = run(encoding, seed, {32: 0.0, 64: 0.1}, margin=margin)
    # each with noise of its own: a gap alike on every document has no spread to test it by
    noise, control_noise = np.random.default_rng(seed).normal(0, 0.05, size=(2, 8))
    if encoding in ("rope_pi", "yarn"):
        made["eval"]["scaling"] = "zero-shot"  # at factor 1 in a T-token window, as RoPE
    made["eval"]["recall_window"] = {
        "recall_count": 8,
        "per_document": {
            "recall_accuracy": list(0.5 + gap + noise),
            "recall_accuracy_control": list(0.5 + control_noise),
        },
    }
    return made


def test_recalls_in_their_window_are_answered_once_per_weights_and_only_for_trained_runs_of_enough_seeds():
    from ltsgen.training.report import _window_section as section

    def _window_section(runs, train_length, steps):
        return section(runs, train_length, steps, verdicts.tests(runs))

    runs = [windowed(name, seed, 0.3) for seed in range(5) for name in ("rope", "rope_pi", "yarn", "alibi")]
    stretched = [
        windowed("rope_pi", seed, 0.3) for seed in range(5)
    ]  # trained at factor 4: a test of its own
    for run in stretched:
        run["eval"]["scaling"] = "fine-tuned at factor 4"
    lines = "\n".join(_window_section([*runs[::4], *stretched], 32, None)).splitlines()
    assert [line.split(" | ")[0] for line in lines if line.startswith("| ")][1:] == [
        "| rope",
        "| rope_pi (zero-shot)",
    ]
    runs += [windowed("fire", seed, 0.3, margin=0.1) for seed in range(5)]  # did not learn
    runs += [windowed("t5", seed, 0.3) for seed in range(3)]
    lines = "\n".join(_window_section(runs, 32, None)).splitlines()
    table = [line for line in lines if line.startswith("| ")][1:]  # the rows, after the header
    answers = {row.split(" | ")[0].removeprefix("| "): row.rstrip(" |").split(" | ")[-1] for row in table}
    assert answers == {"rope": "shown", "alibi": "shown", "fire": "undertrained", "t5": "too few seeds"}
    # without RoPE compared, RoPE-PI and YaRN zero-shot are still one test (before: two rows, both in Holm)
    alone = [run for run in runs if run["encoding"] in ("rope_pi", "yarn", "alibi")]
    table = [
        line for line in "\n".join(_window_section(alone, 32, None)).splitlines() if line.startswith("| ")
    ]
    assert [row.split(" | ")[0].removeprefix("| ") for row in table[1:]] == ["rope_pi (zero-shot)", "alibi"]


def test_the_window_tests_are_corrected_with_every_other_test_of_the_report():
    """Before: the gaps within the window were a Holm family of their own, beside the claims' family, while
    the report said its correction ran across all its tests."""
    from ltsgen.training.stats import holm

    runs = [windowed(name, seed, gap) for seed in range(5) for name, gap in (("rope", 0.02), ("alibi", 0.0))]
    rng = np.random.default_rng(0)
    for made in runs:  # a gap that varies by document: a p-value between 0 and 1
        control = made["eval"]["recall_window"]["per_document"]["recall_accuracy_control"]
        control[:] = list(np.asarray(control) + rng.normal(0, 0.02, size=len(control)))
    tuned = [windowed("rope_pi+finetuned", seed, 0.3) for seed in range(5)]  # one of several lengths: no test
    rows = verdicts.tests([*runs, *tuned])
    windows = [row for row in rows if row.get("window_of")]
    assert [row["window_of"] for row in windows] == ["rope", "alibi"]
    assert rows[-len(windows) :] == windows  # after every claim, as before they were rows of claims.csv
    assert {row["source"] for row in windows} == {"recall within the window, fixed in advance"}
    assert len(rows) > len(windows) >= 2  # the claims at 64 tokens are there too
    assert [row["p_holm"] for row in rows] == holm([row["p"] for row in rows])
    alone = holm([row["p"] for row in windows])
    assert 0 < alone[0] < windows[0]["p_holm"]  # corrected for more tests than the window's two
    assert {row["metric"] for row in windows} == {verdicts.WINDOW_METRIC}
