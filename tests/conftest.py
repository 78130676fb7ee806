"""Shared test set-up: one torch thread (2-core machines), offline hub, the real data samples."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real text samples (C4, arXiv, code, TinyStories) that sit beside the repository."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"real data samples not found at {SHARED_DATA}")
    return SHARED_DATA
