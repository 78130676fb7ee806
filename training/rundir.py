"""The files of a run folder, written atomically (temporary file + rename), and the clean-up of leftovers.

RUN/config.json          the training and model settings (encoding options resolved, defaults included)
RUN/checkpoint.pt        model, optimizer, scheduler, generators and loader state (+ checkpoint.pt.sha256)
RUN/metrics.jsonl        one JSON object per logged step
RUN/tokenizer.json       the run's tokenizer
RUN/train_summary.json   written when the run has finished
RUN/eval.json            evaluation (eval-<encoding>.json: the weights evaluated under another scaling)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ltsgen.loaders.contract import TOKENIZER_NAME, atomic_path

CONFIG_NAME = "config.json"
CHECKPOINT_NAME = "checkpoint.pt"
DIGEST_NAME = CHECKPOINT_NAME + ".sha256"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "train_summary.json"
EVAL_NAME = "eval.json"
RUN_FILES = (CONFIG_NAME, CHECKPOINT_NAME, DIGEST_NAME, METRICS_NAME, TOKENIZER_NAME, SUMMARY_NAME)


def eval_name(encoding: str | None = None) -> str:
    """``eval.json``, or ``eval-<encoding>.json`` for the weights evaluated as ``encoding``."""
    return EVAL_NAME if encoding is None else f"eval-{encoding}.json"


def write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def remove_temporaries(run_dir: Path) -> list[Path]:
    """Delete the temporary files an interrupted write left in ``run_dir`` (``.<name>.*.tmp``); returns them."""
    if not run_dir.is_dir():
        return []
    stale = [path for path in run_dir.glob(".*.tmp") if path.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
