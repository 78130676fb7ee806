"""Numeric precision of training and evaluation, as autocast contexts.

Training uses bf16 autocast on CUDA and float32 on the CPU; evaluation runs in float32 unless asked for
bf16. Position biases stay in float32 either way (see ``attention``).
"""

from __future__ import annotations

import contextlib

import torch

EVAL_DTYPES = ("float32", "bfloat16")


def training_precision(device: torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA; nothing (float32) on the CPU."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def eval_precision(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """``float32``: autocast off, even inside a caller's autocast; ``bfloat16``: bf16 autocast on ``device``."""
    if dtype == "float32":
        return torch.autocast(device.type, enabled=False)
    if dtype == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    raise ValueError(f"eval dtype must be one of {EVAL_DTYPES}, not {dtype!r}")
