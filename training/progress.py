"""One progress bar over the steps of every run of a grid, read from each run's ``metrics.jsonl``.

Each run writes its metrics line every ``log_every`` steps wherever it trains (this process, worker
processes, Ray tasks on a shared file system), so a thread here that reads the last line of each run's
file every few seconds shows the grid's steps, the runs in flight with their steps, and an ETA for the
whole grid, without the runs reporting to it.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tqdm import tqdm

from ltsgen.training.rundir import METRICS_NAME, SUMMARY_NAME

TAIL_BYTES = 4096  # the last metrics line is far shorter


def steps_done(run_dir: Path, steps: int) -> int:
    """The last step ``run_dir/metrics.jsonl`` records (``steps`` once the run has its summary)."""
    if (run_dir / SUMMARY_NAME).exists():
        return steps
    try:
        with (run_dir / METRICS_NAME).open("rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            tail = handle.read().decode("utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return 0
    for line in reversed(tail):
        try:
            return min(steps, int(json.loads(line)["step"]))
        except (ValueError, KeyError, TypeError):  # a line cut by the tail or in the middle of its write
            continue
    return 0


class GridProgress:
    """A tqdm bar over ``runs`` (tag, run folder, steps): steps done in all, the runs in flight, the ETA.

    Use as a context manager; ``write`` prints a line above the bar (or through ``log`` when disabled).
    """

    def __init__(self, runs: list[tuple[str, Path, int]], *, enabled: bool, log, interval: float = 2.0):
        self.runs = runs
        self.log = log
        self.interval = interval
        self.done = {tag: steps_done(folder, steps) for tag, folder, steps in runs}
        self.bar = tqdm(
            total=sum(steps for _, _, steps in runs), initial=sum(self.done.values()), desc="compare",
            unit="step", disable=not enabled, dynamic_ncols=True,
        )  # fmt: skip
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True) if enabled else None

    def __enter__(self) -> GridProgress:
        if self._thread is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.refresh()
        self.bar.close()

    def write(self, line: str) -> None:
        self.bar.write(line) if not self.bar.disable else self.log(line)

    def refresh(self) -> None:
        """Read every run's last step and move the bar."""
        if self.bar.disable:
            return
        now = {tag: steps_done(folder, steps) for tag, folder, steps in self.runs}
        moved = sum(now.values()) - sum(self.done.values())
        self.done = now
        finished = sum(now[tag] == steps for tag, _, steps in self.runs)
        running = [f"{tag} {now[tag]}/{steps}" for tag, _, steps in self.runs if 0 < now[tag] < steps]
        self.bar.set_postfix_str(f"{finished}/{len(self.runs)} runs" + "".join(f"; {r}" for r in running))
        self.bar.update(max(moved, 0))

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()
