"""Process helpers for crash tests: a process's children and whether they are gone (Linux /proc)."""

from __future__ import annotations

import time
from pathlib import Path


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie waiting for its parent does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def still_alive(pids: list[int], seconds: float = 10.0) -> list[int]:
    """The pids still running after waiting up to ``seconds`` for all of them to end."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]
