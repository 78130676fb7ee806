"""Checkpoints: plain state dicts written atomically, read back with ``weights_only=True``.

A checkpoint holds tensors, numbers and strings only (configs and loader state as JSON text), so loading
one never runs code from the file.
"""

from __future__ import annotations

import os
import pickle
import random
from pathlib import Path
from typing import Any

import torch

from ltsgen.loaders.contract import atomic_path
from ltsgen.training.errors import TrainingError

CHECKPOINT_NAME = "checkpoint.pt"


class CheckpointError(TrainingError):
    """A checkpoint that cannot be read; the message names the file."""


def save_checkpoint(path: str | os.PathLike, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` through a temporary file and a rename: a crash never leaves half a file."""
    path = Path(path)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    return path


def load_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """Read a checkpoint on the CPU with ``weights_only=True``, with a one-line error naming the file."""
    path = Path(path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: checkpoint not found") from None
    except (RuntimeError, pickle.UnpicklingError, EOFError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise CheckpointError(f"{path}: not a readable checkpoint ({first_line})") from None


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
