"""Process helpers for crash tests: children forked from the test process, a process's children and whether
they are gone (Linux /proc)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def forked(
    fn: Callable[..., object], *args: object, env: dict[str, str] | None = None
) -> multiprocessing.Process:
    """``fn(*args)`` in a child forked from this process, leading a process group of its own (``os.killpg`` of
    its pid reaches the processes it starts), with ``env`` added to its environment. A real process to kill,
    which finds loaded what this one loaded: a fresh one spends 3-5 s on 2 cores importing torch (and
    torch._dynamo, for an optimizer) before its first step. Its exit code is that of ``sys.exit`` in ``fn``,
    1 if ``fn`` raised (the traceback on stderr), else 0."""
    process = multiprocessing.get_context("fork").Process(target=_lead_group, args=(fn, args, env or {}))
    process.start()
    return process


def _lead_group(fn: Callable[..., object], args: tuple, env: dict[str, str]) -> None:
    os.setsid()
    os.environ.update(env)
    fn(*args)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (for a local server, or a gloo group's MASTER_PORT)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def join_all(processes: list[multiprocessing.Process], timeout: float) -> None:
    """Wait for every ``forked`` process to exit 0; the groups of those still running at the end are
    killed."""
    deadline = time.monotonic() + timeout
    try:
        for process in processes:
            process.join(max(0.0, deadline - time.monotonic()))
            assert process.exitcode == 0, f"a forked process exited with {process.exitcode} (see its stderr)"
    finally:
        for process in processes:
            if process.exitcode is None:
                kill_forked(process)


def kill_forked(process: multiprocessing.Process) -> None:
    """kill -9 a ``forked`` process and the processes it started (its group), and reap it. A group that is
    gone already is no error, so that clean-up does not hide why a test stopped; a child that has not made its
    group yet is killed alone (it has started nothing)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        process.kill()  # a no-op once it is reaped
    process.join()


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


def wait_until(
    process: subprocess.Popen | multiprocessing.process.BaseProcess,
    ready: Callable[[], bool],
    timeout: float = 120.0,
) -> None:
    """Wait until ``ready()`` while ``process`` (a subprocess or a ``forked`` child) runs: a crash test's
    moment to kill it. Between checks it sleeps nine times as long as the last check took, from 20 ms to 100
    ms: a check that lists a bucket (16 ms against the local S3 server, client and server together) then takes
    a seventh of a core, not half of one, from the build it watches, and one slow check cannot sleep past the
    moment to kill."""
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        if ready():
            return
        assert _running(process), "the process ended before it could be killed"
        assert time.monotonic() < deadline, "the process never got to the point to kill it"
        time.sleep(min(0.1, max(0.02, 9 * (time.monotonic() - started))))


def _running(process: subprocess.Popen | multiprocessing.process.BaseProcess) -> bool:
    if isinstance(process, multiprocessing.process.BaseProcess):
        return process.is_alive()
    return process.poll() is None


def kill_9(process: subprocess.Popen) -> None:
    """kill -9 ``process`` alone; its children (workers, a local Ray runtime) must end with it. It is held
    (SIGSTOP) while its children are listed: it makes no progress between the caller's check and the kill."""
    process.send_signal(signal.SIGSTOP)
    workers = children(process.pid)
    process.send_signal(signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    assert still_alive(workers, seconds=30) == [], "child processes outlived the killed one"
