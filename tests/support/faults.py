"""Helpers of the fault-injection tests: real ``ltsgen`` processes, kills, locks and a small corpus.

Nothing here fakes a fault: processes are started and killed with real signals, locks are taken by a
second process, disk limits are the kernel's (``ulimit -f``), and the corpus is real JSON lines.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from process_tools import forked, wait_until

REPO = Path(__file__).resolve().parents[2]
LTSGEN = str(Path(sys.executable).parent / "ltsgen")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
WORDS = (
    "the a little big red blue cat dog sun moon tree house river stone bird friend happy sad ran saw found "
    "gave took said went came home night day under over near far old new small bright dark green yellow"
).split()


def write_corpus(path: Path, documents: int = 150, seed: int = 0) -> Path:
    """A C4-shaped JSON-lines file: ``documents`` texts of 20 to 3,000 words (log-uniform), with url and
    timestamp fields; the same arguments give the same bytes."""
    rng = np.random.default_rng(seed)
    lengths = np.exp(rng.uniform(np.log(20), np.log(3000), documents)).astype(int)
    with open(path, "w", encoding="utf-8") as out:
        for number, length in enumerate(lengths):
            words = rng.choice(WORDS, size=length)
            text = " ".join(words) + "."
            record = {
                "text": text,
                "url": f"https://example.org/{number}",
                "timestamp": "2019-04-25T12:00:00Z",
            }
            out.write(json.dumps(record) + "\n")
    return path


def corpus_and_tokenizer(folder: Path, documents: int = 60) -> tuple[Path, Path]:
    """``write_corpus`` in ``folder`` and a 300-token BPE trained on it by ``ltsgen tokenizer`` (in process)."""
    from ltsgen.cli import main

    corpus = write_corpus(folder / "c4.jsonl", documents=documents)
    tokenizer = folder / "tok.json"
    argv = [
        "tokenizer",
        "--source",
        "c4",
        "--input",
        str(corpus),
        "--vocab-size",
        "300",
        "--out",
        str(tokenizer),
    ]
    assert main(argv) == 0
    return corpus, tokenizer


def ltsgen(
    *args: str, limit_file_blocks: int | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """Run ``ltsgen ARGS`` in a real process; ``limit_file_blocks`` sets ``ulimit -f`` (1 KiB blocks)."""
    command = [LTSGEN, *map(str, args)]
    if limit_file_blocks is not None:
        command = ["bash", "-c", f'ulimit -f {limit_file_blocks}; exec "$@"', "ltsgen", *command]
    return subprocess.run(command, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=timeout)


def start(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """Start ``ltsgen ARGS`` in its own process group (so that a kill reaches its workers too), with
    ``env`` added to its environment."""
    return subprocess.Popen(
        [LTSGEN, *map(str, args)],
        cwd=REPO,
        env={**ENV, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def forked_ltsgen(*args: str) -> multiprocessing.Process:
    """``ltsgen ARGS`` run by ``ltsgen.cli.main`` in a child ``forked`` from this process (which has torch
    loaded), its output dropped; its exit code is main's."""
    return forked(_main_quietly, list(map(str, args)))


def _main_quietly(argv: list[str]) -> None:
    from ltsgen.cli import main

    with open(os.devnull, "w") as devnull, contextlib.redirect_stdout(devnull):
        code = main(argv)
    sys.exit(code)


def kill_when(process: subprocess.Popen, ready: Callable[[], bool], timeout: float = 120.0) -> None:
    """kill -9 ``process`` (alone) as soon as ``ready()`` holds; fail if it ends first."""
    try:
        wait_until(process, ready, timeout)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    finally:
        end(process)


def end(process: subprocess.Popen) -> None:
    """Make sure ``process`` and its process group are gone and its pipes closed."""
    if process.poll() is None:
        process.kill()
        process.wait(timeout=30)
    try:
        os.killpg(process.pid, signal.SIGKILL)  # workers left in its group
    except (ProcessLookupError, PermissionError):
        pass
    process.stdout.close()
    process.stderr.close()


@contextmanager
def hold_lock(directory: Path) -> Iterator[None]:
    """Another process holds ``DIR/.ltsgen/lock`` (as a running build does) for the ``with`` block."""
    (directory / ".ltsgen").mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, sys, time\n"
        "lock = open(sys.argv[1], 'a')\n"
        "fcntl.flock(lock, fcntl.LOCK_EX)\n"
        "print('locked', flush=True)\n"
        "time.sleep(600)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(directory / ".ltsgen" / "lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait(timeout=30)
        holder.stdout.close()


def tree(directory: Path, state: bool = False) -> dict[str, str]:
    """Every file under ``directory`` -> sha256 (``.ltsgen/`` only when ``state``)."""
    return {
        p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and (state or ".ltsgen" not in p.relative_to(directory).parts)
    }


def one_line_error(result: subprocess.CompletedProcess, command: str) -> str:
    """The single stderr line of a failed run (exit status 2, no traceback), returned for more checks."""
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"ltsgen {command}: error: "), result.stderr[-2000:]
    return lines[0]
