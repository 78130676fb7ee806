"""Shared test set-up: one torch thread (2-core machines), offline hub, the real data fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Small real-text fixtures (C4, arXiv, code, TinyStories), each folder with its PROVENANCE.md."""
    return FIXTURES
