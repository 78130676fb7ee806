"""The files of a run folder, written atomically (temporary file + rename), and the clean-up of leftovers.

RUN/config.json          the training and model settings (encoding options resolved, defaults included)
RUN/checkpoint.pt        model, optimizer, scheduler, generators and loader state (+ checkpoint.pt.sha256)
RUN/metrics.jsonl        one JSON object per logged step
RUN/tokenizer.json       the run's tokenizer
RUN/token_counts.json    each record's token count, when the run tokenizes text (a resume plans from it)
RUN/train_summary.json   written when the run has finished
RUN/eval.json            evaluation (eval-<encoding>.json: the weights evaluated under another scaling)
RUN/.ltsgen/run.json     marks the folder as an ltsgen run; RUN/.ltsgen/lock is held while a run writes

A run (or a comparison) folder follows a build's rules: it is a new or empty folder, or one an earlier run
(comparison) of ltsgen made; a folder holding a dataset or files of the user's is refused before anything is
written, and a failed run removes only the files a run writes.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ltsgen.errors import first_line
from ltsgen.loaders.contract import MANIFEST_NAME, TOKENIZER_NAME
from ltsgen.loaders.files import atomic_path, temporaries_of
from ltsgen.loaders.storage import LockHeld, Storage, StorageError
from ltsgen.training.errors import TrainingError

CONFIG_NAME = "config.json"
CHECKPOINT_NAME = "checkpoint.pt"
DIGEST_NAME = CHECKPOINT_NAME + ".sha256"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "train_summary.json"
EVAL_NAME = "eval.json"
TOKEN_COUNTS_NAME = "token_counts.json"
RUN_FILES = (
    CONFIG_NAME,
    CHECKPOINT_NAME,
    DIGEST_NAME,
    METRICS_NAME,
    TOKENIZER_NAME,
    TOKEN_COUNTS_NAME,
    SUMMARY_NAME,
)
STATE_DIR = ".ltsgen"
LOCK_PATH = f"{STATE_DIR}/lock"  # the very claim a build takes on its directory (ltsgen.outputs.LOCK_PATH)
#: what marks a folder as ltsgen's, by kind; and, for folders made before the mark, the files that show it
MARKS = {"run": f"{STATE_DIR}/run.json", "comparison": f"{STATE_DIR}/comparison.json"}
LEGACY_SIGNS = {"run": (CHECKPOINT_NAME, DIGEST_NAME), "comparison": ("compare.json",)}


_TEMPORARY = temporaries_of([*map(re.escape, RUN_FILES), r"eval(?:-\w+)?\.json"])
_MARK_TEMPORARY = temporaries_of(re.escape(Path(mark).name) for mark in MARKS.values())


def eval_name(encoding: str | None = None) -> str:
    """``eval.json``, or ``eval-<encoding>.json`` for the weights evaluated as ``encoding``."""
    return EVAL_NAME if encoding is None else f"eval-{encoding}.json"


def final_name(path: str | Path) -> Path:
    """The file that the temporary file ``path`` of an atomic write was to become (else ``path``)."""
    path = Path(path)
    temporary = _TEMPORARY.match(path.name)
    return path.with_name(path.name[1:].rsplit(".", 2)[0]) if temporary else path


def file_error(error: OSError, folder: Path) -> TrainingError:
    """A run's ``OSError`` (a full disk, a file-size limit, a folder that cannot be written) as one line:
    the file it names (its final name, not an atomic write's temporary one), else ``folder``."""
    where = final_name(error.filename) if error.filename else folder
    return TrainingError(f"{where}: {error.strerror or error}")


def write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def read_json(path: Path) -> Any:
    """A JSON file of a run; a damaged one is a one-line ``TrainingError`` naming it."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainingError(f"{path}: not found") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        reason = getattr(error, "strerror", None) or first_line(error)
        raise TrainingError(f"{path}: damaged, not readable JSON ({reason})") from None


def read_record(path: Path, required: dict[str, type | tuple[type, ...]]) -> dict[str, Any]:
    """A JSON object of a run with the ``required`` fields of those types; else a one-line ``TrainingError``."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise TrainingError(f"{path}: damaged, not a JSON object")
    for name, kind in required.items():
        value = data.get(name)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise TrainingError(f"{path}: damaged, {name!r} is missing or of the wrong type")
    return data


@dataclass
class Claim:
    """A folder held for one run or comparison: ``created`` when this claim made it."""

    folder: Path
    kind: str
    created: bool


@contextmanager
def claim_folder(folder: Path, kind: str, what: str = "--out") -> Iterator[Claim]:
    """Hold ``folder`` for a ``kind`` ("run" or "comparison") for the ``with`` block: the build lock
    (``LOCK_PATH``; a second process is refused in one line naming the holder, a killed holder's lock is
    free), with the folder marked as ltsgen's. Refused, before anything is written: a path that is a file, a
    folder holding a dataset, another kind of ltsgen folder, or files of the user's."""
    folder = Path(folder)
    holder = Storage(folder).lock_holder(LOCK_PATH)
    if holder is not None:  # first: what a running process writes is half done
        raise _held(folder, holder, what)
    _refuse(folder, kind, what)
    created = not folder.exists()
    with ExitStack() as held:
        try:
            held.enter_context(Storage(folder).lock(LOCK_PATH))
            _refuse(folder, kind, what)  # again, under the lock
            write_json(folder / MARKS[kind], {"kind": kind})
        except LockHeld as error:
            raise _held(folder, error.reason, what) from None
        except StorageError as error:
            raise TrainingError(f"{folder}: cannot write there ({error.reason})") from None
        except OSError as error:
            raise TrainingError(f"{folder}: cannot write there ({error.strerror or error})") from None
        yield Claim(folder, kind, created)


def _held(folder: Path, reason: str, what: str) -> TrainingError:
    return TrainingError(
        f"{folder}: another ltsgen process is writing there ({reason.partition(': ')[2]}); wait for it to "
        f"end or choose another {what}"
    )


def _refuse(folder: Path, kind: str, what: str) -> None:
    if not folder.exists():
        return
    if not folder.is_dir():
        raise TrainingError(f"{folder}: exists and is not a folder; choose another {what}")
    if (folder / MANIFEST_NAME).exists() or (folder / STATE_DIR / "build.json").exists():
        raise TrainingError(f"{folder}: holds a dataset ({MANIFEST_NAME}); choose another {what}")
    for other, mark in MARKS.items():
        if other != kind and (folder / mark).exists():
            raise TrainingError(f"{folder}: holds an ltsgen {other}, not a {kind}; choose another {what}")
    if (folder / MARKS[kind]).exists() or all((folder / name).is_file() for name in LEGACY_SIGNS[kind]):
        return
    entries = sorted(path.name for path in folder.iterdir() if path.name != STATE_DIR)
    if entries:
        raise TrainingError(
            f"{folder}: is not empty and holds no ltsgen {kind} ({entries[0]}, ...); choose a new or empty "
            f"{what} (ltsgen never writes over files of yours)"
        )


def clean_up_failed_run(claim: Claim) -> None:
    """After a failed run: remove the temporary files of its writes; where it left nothing to resume from
    (no checkpoint) and nothing that says why (no summary), the files a run writes too (the folder, when the
    run made it). Never raises: a folder that cannot be changed (read-only) keeps what it has."""
    run_dir = claim.folder
    try:
        remove_temporaries(run_dir)
        if (run_dir / CHECKPOINT_NAME).exists() or (run_dir / SUMMARY_NAME).exists():
            return
        if claim.created:
            shutil.rmtree(run_dir, ignore_errors=True)
            return
        for name in (*RUN_FILES, MARKS["run"]):
            (run_dir / name).unlink(missing_ok=True)
    except OSError:
        pass


def remove_temporaries(run_dir: Path, pattern: re.Pattern[str] = _TEMPORARY) -> list[Path]:
    """Delete the temporary files that an interrupted write left in ``run_dir`` (``.<name>.<random>.tmp``,
    only for the names a run writes, or those of ``pattern``: see ``temporaries_of``) and in its
    ``.ltsgen/`` (only a mark's); returns them."""
    if not run_dir.is_dir():
        return []
    stale = [path for path in run_dir.glob(".*.tmp") if path.is_file() and pattern.match(path.name)]
    stale += [
        p for p in (run_dir / STATE_DIR).glob(".*.tmp") if p.is_file() and _MARK_TEMPORARY.match(p.name)
    ]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
