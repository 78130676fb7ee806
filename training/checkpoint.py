"""Checkpoints: plain state dicts written atomically, verified by sha256 and read with ``weights_only=True``.

A checkpoint holds tensors, numbers and strings only (configs and loader state as JSON text), so loading
one never runs code from the file. ``checkpoint.pt.sha256`` beside it lists the digests it may have; a
checkpoint whose bytes match none of them is refused, so a flipped byte never reaches the optimizer.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import random
from pathlib import Path
from typing import Any

import torch

from ltsgen.errors import first_line
from ltsgen.loaders.files import atomic_path, sha256_file
from ltsgen.training.errors import TrainingError

# every field of a run's checkpoint and its type; the configs and the loader states are stored as JSON text
FIELDS = {"step": int, "model": dict, "optimizer": dict, "scheduler": dict, "rng": dict, "loader_states": list,
          "model_config": dict, "train_config": dict}  # fmt: skip
JSON_FIELDS = ("loader_states", "model_config", "train_config")
_KINDS = {int: "an integer", dict: "a mapping", list: "a list"}


def digest_path(path: Path) -> Path:
    return path.with_name(path.name + ".sha256")


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` through a temporary file and a rename, and its sha256 beside it.

    While the new file replaces the old one, the digest file accepts both, so a crash at any moment leaves
    a checkpoint that verifies, after any number of interrupted writes: every digest listed is kept until a
    write ends (the first may be of a write that never got there, the file at ``path`` of another). A full
    disk or a file-size limit is a one-line ``TrainingError``; the previous checkpoint stays as it was.
    """
    path = Path(path)
    digests = digest_path(path)
    buffer = io.BytesIO()  # serialised in memory, written here: a failed write is a plain OSError
    torch.save(state, buffer)
    data = buffer.getbuffer()
    digest = hashlib.sha256(data).hexdigest()
    try:
        with atomic_path(path) as tmp:
            with tmp.open("wb") as handle:
                handle.write(data)
            _write_digests(digests, [digest, *_read_digests(digests)])
        _write_digests(digests, [digest])
    except OSError as error:
        raise TrainingError(f"{path}: cannot write the checkpoint ({error.strerror or error})") from None
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Verify a checkpoint against its sha256, read it on the CPU with ``weights_only=True`` and check its
    fields (``FIELDS``); its JSON fields come back parsed."""
    path = Path(path)
    if not path.exists():
        raise TrainingError(f"{path}: checkpoint not found")
    accepted = _read_digests(digest_path(path))
    if not accepted:
        raise TrainingError(f"{path}: no checksum beside it ({digest_path(path).name}); cannot verify it")
    if sha256_file(path) not in accepted:
        raise TrainingError(
            f"{path}: damaged checkpoint (its sha256 matches no digest in {digest_path(path).name})"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as error:
        raise TrainingError(f"{path}: not a readable checkpoint ({first_line(error)})") from None
    return _fields_of(path, state)


def _fields_of(path: Path, state: Any) -> dict[str, Any]:
    """``state`` with its JSON fields parsed, once every field a run writes is there with its type."""
    if not isinstance(state, dict):
        raise TrainingError(f"{path}: not a checkpoint of a run (it holds a {type(state).__name__})")
    missing = [key for key in FIELDS if key not in state]
    if missing:
        raise TrainingError(f"{path}: not a checkpoint of a run (no {', '.join(missing)})")
    fields = dict(state)
    for key in JSON_FIELDS:
        try:
            fields[key] = json.loads(state[key])
        except (TypeError, ValueError):
            raise TrainingError(f"{path}: damaged checkpoint, its {key} is not JSON text") from None
    for key, kind in FIELDS.items():
        if not isinstance(fields[key], kind) or isinstance(fields[key], bool):
            raise TrainingError(f"{path}: damaged checkpoint, its {key} is not {_KINDS[kind]}")
    return fields


def load_weights(model: torch.nn.Module, weights: dict[str, Any], path: Path) -> None:
    """Load ``weights`` (from the checkpoint at ``path``) into ``model``; weights that do not fit are a
    one-line error naming the first that does not."""
    try:
        model.load_state_dict(weights)
    except RuntimeError as error:  # PyTorch's header line, then what does not fit
        details = [line.strip() for line in str(error).strip().splitlines()[1:] if line.strip()]
        what = details[0][:200] if details else first_line(error)
        raise TrainingError(f"{path}: its weights do not fit this model ({what})") from None


def _read_digests(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii").split()
    except (FileNotFoundError, UnicodeDecodeError):
        return []


def _write_digests(path: Path, digests: list[str]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text("\n".join(digests) + "\n", encoding="ascii")


def rng_state() -> dict[str, Any]:
    """Every random generator the loop touches: Python's, torch's CPU one and CUDA's when present."""
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
