"""Jobs for the engine tests: top-level functions that worker processes import by name."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ltsgen.loaders import LoaderError


def square(x: int) -> int:
    return x * x


def wait_for_flag(job: tuple[str, str]) -> str:
    """``"wait"``: return once the file ``flag`` exists; ``"quick"``: return at once."""
    flag, role = job
    deadline = time.monotonic() + 60
    while role == "wait" and not Path(flag).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    return role


def fail_on(job: tuple[int, str]) -> int:
    number, how = job
    if number == 3:
        if how == "contract":
            raise LoaderError(f"job {number} is bad")
        if how == "exit":
            os._exit(7)
        return 1 // 0
    return number


def sleep_forever(job: int) -> int:
    time.sleep(3600)
    return job
