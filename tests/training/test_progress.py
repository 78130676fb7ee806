"""The grid's progress bar reads each run's steps from its metrics.jsonl, wherever the run trains."""

from __future__ import annotations

import io
import json

from ltsgen.training.progress import GridProgress, steps_done


def _metrics(run, *steps, tail: str = "") -> None:
    run.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"step": step, "loss": 1.0}) + "\n" for step in steps)
    (run / "metrics.jsonl").write_text(lines + tail, encoding="utf-8")


def test_steps_done_reads_the_last_whole_line_and_a_finished_run_counts_in_full(tmp_path):
    assert steps_done(tmp_path / "absent", 10) == 0
    _metrics(tmp_path / "a", *range(1, 400), tail='{"step": 40')  # a line in the middle of its write
    assert steps_done(tmp_path / "a", 1000) == 399
    _metrics(tmp_path / "b", 5, 10)
    (tmp_path / "b" / "train_summary.json").write_text("{}", encoding="utf-8")
    assert steps_done(tmp_path / "b", 30) == 30  # trained earlier: the whole run


def test_the_bar_counts_every_run_and_names_those_in_flight(tmp_path):
    runs = [
        ("rope", tmp_path / "rope", 10),
        ("alibi", tmp_path / "alibi", 20),
        ("fire", tmp_path / "fire", 30),
    ]
    _metrics(tmp_path / "rope", 10)
    grid = GridProgress(runs, enabled=True, log=print, interval=3600)
    grid.bar.fp = io.StringIO()
    with grid:
        assert (grid.bar.n, grid.bar.total) == (10, 60)  # what was done before starts the bar
        _metrics(tmp_path / "alibi", 5, 15)
        grid.refresh()
        assert grid.bar.n == 25 and grid.bar.postfix == "1/3 runs; alibi 15/20"
        _metrics(tmp_path / "alibi", 20)
        _metrics(tmp_path / "fire", 3)
        grid.refresh()
        assert grid.bar.n == 33 and grid.bar.postfix == "2/3 runs; fire 3/30"


def test_a_disabled_bar_sends_the_lines_to_the_log(tmp_path):
    said = []
    with GridProgress([("rope", tmp_path / "rope", 10)], enabled=False, log=said.append) as grid:
        grid.write("rope: trained 10 steps")
        grid.refresh()
    assert said == ["rope: trained 10 steps"]
