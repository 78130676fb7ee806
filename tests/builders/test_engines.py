"""``ltsgen.engines``: results as they complete, errors as raised, and worker processes that never outlive
their parent or leave anything in /dev/shm (real subprocesses, real kill -9)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from engine_jobs import fail_on, square, wait_for_flag  # worker processes import these by name
from process_tools import children, still_alive

from ltsgen.engines import EngineError, ProcessEngine, RemoteTraceback, SerialEngine, make_engine
from ltsgen.errors import UsageError
from ltsgen.loaders import LoaderError

LTSGEN = str(Path(sys.executable).parent / "ltsgen")


def test_every_engine_returns_every_result():
    jobs = list(range(30))
    assert list(SerialEngine().map(square, jobs)) == [x * x for x in jobs]
    before = set(children(os.getpid()))
    with ProcessEngine(8) as engine:  # no more processes than jobs (before: 8 started for 1 job)
        assert list(engine.map(square, [3])) == [9] and len(set(children(os.getpid())) - before) == 1
    pulled = []

    def taken_as_needed():
        for job in range(50):
            pulled.append(job)
            yield job

    with ProcessEngine(2) as engine:  # jobs are taken as workers free up (a corpus's chunks, say)
        results = engine.map(square, taken_as_needed())
        first = next(results)
        assert len(pulled) <= 2 * 2 + 1  # before: all 50, before any result
        assert sorted([first, *results]) == [x * x for x in range(50)]
    with ProcessEngine(2) as engine:
        assert sorted(engine.map(square, jobs)) == [x * x for x in jobs]
        assert sorted(engine.map(square, iter(range(5)))) == [0, 1, 4, 9, 16]  # the same workers again
        assert list(engine.map(square, [])) == []


def test_results_come_as_jobs_complete(tmp_path):
    flag = tmp_path / "flag"
    with ProcessEngine(2) as engine:
        results = engine.map(wait_for_flag, [(str(flag), "wait"), (str(flag), "quick")])
        assert next(results) == "quick"  # job 0 cannot finish before the flag exists
        flag.touch()
        assert list(results) == ["wait"]


def test_errors_come_back_as_raised():
    with ProcessEngine(2) as engine:
        with pytest.raises(LoaderError, match="^job 3 is bad$") as error:
            list(engine.map(fail_on, [(i, "contract") for i in range(6)]))
        assert error.value.__cause__ is None  # a user's error stays one line
        with pytest.raises(ZeroDivisionError) as error:
            list(engine.map(fail_on, [(i, "bug") for i in range(6)]))
        assert isinstance(error.value.__cause__, RemoteTraceback)
        assert "engine_jobs.py" in str(error.value.__cause__)  # the worker's traceback, for a bug report
        with pytest.raises(EngineError, match="worker process exited with status 7"):
            list(engine.map(fail_on, [(i, "exit") for i in range(6)]))
        assert sorted(engine.map(square, range(4))) == [0, 1, 4, 9]  # a fresh pool after a failure


def test_engine_choice_is_checked():
    with pytest.raises(UsageError, match="--engine must be one of local, ray"):
        make_engine("spark")
    with pytest.raises(UsageError, match="--ray-address needs --engine ray"):
        make_engine("local", 2, "auto")
    with pytest.raises(UsageError, match="--workers must be at least 1"):
        make_engine("local", 0)
    # before: a process started for each, a "can't start new thread" traceback at 10**20
    with pytest.raises(
        UsageError, match=r"^--workers 100,000,000,000,000,000,000 is more than the 256 processes"
    ):
        make_engine("local", 10**20)
    assert isinstance(make_engine("local", 1), SerialEngine) and isinstance(
        make_engine("local"), SerialEngine
    )


def _shm_mappings(pids: list[int]) -> list[str]:
    found = []
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        # a mapping "(deleted)" was unlinked at once and cannot be left behind; any other could
        found += [line for line in maps if "/dev/shm/" in line and not line.endswith("(deleted)")]
    return found


PARENT = """
import sys, time
sys.path.insert(0, {here!r})
from engine_jobs import sleep_forever
from ltsgen.engines import ProcessEngine
engine = ProcessEngine(2)
for _ in engine.map(sleep_forever, range(2)):
    pass
"""


def test_workers_exit_when_the_parent_is_killed():
    script = textwrap.dedent(PARENT.format(here=str(Path(__file__).resolve().parents[1] / "support")))
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 60
        while len(children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = children(parent.pid)
        assert len(workers) == 2
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait()
    assert still_alive(workers) == []


def test_killing_the_process_group_of_a_build_leaves_nothing(tmp_path):
    out = tmp_path / "lts"
    command = [LTSGEN, "stories", "--out", str(out), "--num-stories", "400", "--min-words", "1000"]
    command += ["--max-words", "6000", "--samples-per-shard", "4", "--workers", "2", "--quiet"]
    build = subprocess.Popen(command, start_new_session=True, stderr=subprocess.DEVNULL)
    journal = out / ".ltsgen" / "journal.jsonl"
    try:
        deadline = time.monotonic() + 120
        while not (journal.exists() and journal.read_text().count("\n") >= 2) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert build.poll() is None, "the build ended before it could be killed"
        group = [build.pid, *children(build.pid)]
        assert len(group) == 3  # the driver and two workers, no helper process
        assert _shm_mappings(group) == []  # no POSIX semaphore or shared memory to leave behind
    finally:
        os.killpg(build.pid, signal.SIGKILL)
        build.wait()
    assert still_alive(group) == []


def _ignores_ctrl_c(pid: int) -> bool:
    """Whether the process ignores SIGINT (its SigIgn mask, from /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    mask = int(next(line for line in status.splitlines() if line.startswith("SigIgn:")).split()[1], 16)
    return bool(mask & (1 << (signal.SIGINT - 1)))


@pytest.fixture
def ctrl_c_handled():
    """Python's own SIGINT handler, as in a terminal, whatever the test run inherited: a run started in the
    background of a script (`make test &`) starts with SIGINT ignored, and Python then installs no handler."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_worker_ignores_ctrl_c_from_its_first_instruction(ctrl_c_handled):
    """Before, a worker ignored SIGINT only once its loop began: a Ctrl-C while it still imported (the
    terminal sends it to the whole group) printed a KeyboardInterrupt traceback of its own."""
    from ltsgen.engines import _Worker

    worker = _Worker.start()  # read at once: the worker has not yet finished starting Python
    try:
        assert _ignores_ctrl_c(worker.process.pid)
    finally:
        worker.stop()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # the parent's own is back


def test_ctrl_c_before_a_command_runs_is_one_line(ctrl_c_handled, monkeypatch, capsys):
    import ltsgen.cli

    def interrupted(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C while the parser is being built
        time.sleep(5)

    monkeypatch.setattr(ltsgen.cli, "build_parser", interrupted)
    assert ltsgen.cli.main(["stories", "--out", "x"]) == 130
    assert capsys.readouterr().err == "ltsgen: interrupted\n"


@pytest.mark.parametrize("given", ["--ray-address", "$RAY_ADDRESS"])
def test_a_ray_address_where_nothing_listens_is_one_line_at_once(given, monkeypatch):
    """Before, ``ray.init`` retried such an address for ever (10 minutes and more here), writing Ray's own
    log lines on stderr; and ``$RAY_ADDRESS`` (Ray's variable, which `ray job submit` sets) failed with
    "num_cpus and num_gpus must not be provided", naming neither the address nor the variable."""
    pytest.importorskip("ray")
    from process_tools import free_port

    address = f"127.0.0.1:{free_port()}"
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if given == "$RAY_ADDRESS":
        monkeypatch.setenv("RAY_ADDRESS", address)
    engine = make_engine("ray", ray_address=address if given == "--ray-address" else None)
    with pytest.raises(
        EngineError,
        match=rf"^--engine ray: cannot reach {address} \({re.escape(given)}\) \(Connection refused\)",
    ):
        list(engine.map(square, [1]))
    engine.close()
    jobs = make_engine("ray", ray_address="http://127.0.0.1:8265")  # what `ray job submit` is told
    with pytest.raises(EngineError, match=r"is the address of Ray's Jobs API \(for `ray job submit`\)"):
        list(jobs.map(square, [1]))
    ipv6 = make_engine("ray", ray_address=f"[::1]:{address.rsplit(':', 1)[1]}")
    with pytest.raises(EngineError, match=r"^--engine ray: cannot reach \[::1\]:\d+ \(--ray-address\) \("):
        list(ipv6.map(square, [1]))


def test_ray_not_installed_is_said_before_anything_is_written(tmp_path):
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "ray.py").write_text("raise ImportError('no ray here')\n")  # what a machine without Ray finds
    out = tmp_path / "lts"
    command = [
        sys.executable,
        "-m",
        "ltsgen",
        "stories",
        "--out",
        str(out),
        "--num-stories",
        "5",
        "--engine",
        "ray",
    ]
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(shadow)}
    )
    assert done.returncode == 2 and done.stderr == (  # before: said once the build had claimed --out
        "ltsgen stories: error: Ray tasks (--engine ray) need ray, which is not installed: pip install 'ltsgen[ray]'\n"
    )
    assert not out.exists()
