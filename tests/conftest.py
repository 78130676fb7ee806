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


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3-compatible server on 127.0.0.1 (a random free port), for the whole session. Its
    ``AWS_*`` variables are set in this process (and so in every child), so no S3 client can reach a real
    endpoint while it runs."""
    from s3_server import S3Server

    server = S3Server.start()
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
