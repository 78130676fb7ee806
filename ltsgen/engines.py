"""Engines: where jobs run (a build's jobs, a comparison's runs). One interface, ``engine.map(fn, jobs)``,
yielding ``fn(job)`` for every job as each one completes (not in job order); the caller keeps everything
else (lock, journal, manifest, card), as datatrove's executors leave a pipeline's bookkeeping to the
pipeline. Ground floor: this module imports nothing of ltsgen's but its errors.

- ``SerialEngine``: in this process, in order.
- ``ProcessEngine(workers)``: a pool of worker processes on this machine, started on the first ``map`` and
  reused until ``close``. Workers are plain subprocesses fed pickled jobs over pipes: no ``multiprocessing``
  queues, so no POSIX semaphores in ``/dev/shm`` and no resource-tracker process that a kill of the
  process group could leave behind. A worker exits when its parent dies (kill -9 included): it watches its
  parent process and its input pipe.
- ``RayEngine(address, workers)``: Ray tasks (Ray core), joining the cluster at ``address`` (else at
  ``$RAY_ADDRESS``, Ray's own variable) or starting a local Ray runtime on this machine's cores; an address
  that does not answer, or tasks that ask for more than a local runtime has, is one line, not a wait.
  ``fn`` and the jobs must be importable and picklable on every node, and whatever a job writes must go
  where the driver can see it (an object store, or a folder every node mounts).

``fn`` must be a top-level function (or a ``functools.partial`` of one) and jobs must pickle. Errors that a
user can fix (``LtsgenError``) come back as they were raised; any other error comes back with the worker's
traceback attached.
"""

from __future__ import annotations

import os
import pickle
import queue
import signal
import struct
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from ltsgen.errors import LtsgenError, UsageError, require

ENGINES = ("local", "ray")
RAY_CONNECT_TIMEOUT = 5.0  # seconds for a Ray head's address to take a connection
MAX_LOCAL_WORKERS = 256  # processes on one machine (a mistyped --workers would start them all)
_FRAME = struct.Struct("<Q")  # the length of a frame's data
_TASK = struct.Struct("<Q")  # a job frame's data: its task number, then the pickled (fn, job)
_PARENT_POLL_SECONDS = 0.2
_JOBS_PER_WORKER = 2  # jobs queued per worker, so that none waits while the caller prepares the next


class EngineError(LtsgenError):
    """A worker that died or could not start; the message is one line."""


class RemoteTraceback(Exception):
    """The traceback of an error raised in a worker (attached as ``__cause__``)."""

    def __str__(self) -> str:
        return str(self.args[0])


class Engine:
    """Runs ``fn`` over jobs; see the module docstring. Use as a context manager, or call ``close``."""

    name = "serial"
    workers = 1

    @property
    def started(self) -> bool:
        """Whether ``map`` can run jobs at once, without starting workers first."""
        return True

    @property
    def cpus_per_job(self) -> int | None:
        """The CPU threads each job may use in the process it runs in; None: jobs run in this process."""
        return None

    def start(self) -> None:
        """Join or start what runs the jobs now rather than in the first ``map`` (Ray's runtime takes
        seconds), so that a build's job-phase timing leaves it out."""

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[Any]:
        raise NotImplementedError

    def close(self) -> None:
        """Release the workers (a later ``map`` starts new ones)."""

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SerialEngine(Engine):
    """Every job in this process, in order."""

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[Any]:
        for job in jobs:
            yield fn(job)


def make_engine(
    name: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    resources: dict[str, float] | None = None,
) -> Engine:
    """The engine for ``--engine``/``--workers``/``--ray-address``.

    Args:
        name: ``"local"`` (this machine: serial for one worker, else a process pool) or ``"ray"``.
        workers: local: processes (default 1); Ray: tasks in flight at once (default: the cluster's CPUs).
        ray_address: a Ray cluster to join (``"auto"``, ``"ray://head:10001"``, ``"10.0.0.1:6379"``).
        resources: Ray: what each task reserves (``{"num_cpus": 1}`` unless given; ``num_gpus`` too).
    """
    if name not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {name!r}")
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    if name == "local" and workers is not None and workers > MAX_LOCAL_WORKERS:
        raise UsageError(
            f"--workers {workers:,} is more than the {MAX_LOCAL_WORKERS} processes one machine runs; "
            "--engine ray spreads jobs over a cluster"
        )
    if name == "ray":
        _import_ray()  # said before a command claims its --out
        return RayEngine(ray_address, workers, resources)
    if ray_address is not None:
        raise UsageError("--ray-address needs --engine ray")
    return ProcessEngine(workers) if workers and workers > 1 else SerialEngine()


# ---------------------------------------------------------------- process pool


class ProcessEngine(Engine):
    """A pool of ``workers`` subprocesses on this machine (see the module docstring)."""

    name = "local"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._workers: list[_Worker] = []

    @property
    def started(self) -> bool:
        return bool(self._workers)

    @property
    def cpus_per_job(self) -> int:
        """An equal share of this machine's CPUs."""
        return max(1, (os.cpu_count() or 1) // self.workers)

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[Any]:
        results: queue.Queue = queue.Queue()
        for worker in self._workers:
            worker.results = results
        pending = iter(jobs)  # taken as workers free up: a corpus's chunks are never all in memory at once
        in_flight: dict[int, _Worker] = {}
        next_id = 0
        finished = False

        def feed(worker: _Worker | None) -> bool:
            """Send ``worker`` the next job (None: a worker started for it); False when none is left."""
            nonlocal next_id
            for job in pending:
                if worker is None:  # a process for each job up to ``workers``, never ahead of one
                    worker = _Worker.start()
                    worker.results = results
                    self._workers.append(worker)
                in_flight[next_id] = worker
                worker.send(next_id, fn, job)
                next_id += 1
                return True
            return False

        try:
            for _ in range(_JOBS_PER_WORKER):
                for index in range(self.workers):
                    if not feed(self._workers[index] if index < len(self._workers) else None):
                        break
            while in_flight:
                task, ok, value = results.get()
                if not ok:
                    raise _rebuild(value)
                worker = in_flight.pop(task)
                feed(worker)
                yield value
            finished = True
        finally:
            if not finished:  # an error, or the caller stopped early: the workers' queues are not empty
                self.close()

    def close(self) -> None:
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()


class _Worker:
    """One worker subprocess with a sender and a receiver thread (the caller never blocks on a pipe)."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.results: queue.Queue | None = None
        self._outbox: queue.Queue = queue.Queue()
        self._sender = threading.Thread(target=self._send_loop, daemon=True)
        self._receiver = threading.Thread(target=self._receive_loop, daemon=True)
        self._sender.start()
        self._receiver.start()

    @classmethod
    def start(cls) -> _Worker:
        command = [sys.executable, "-c", "from ltsgen.engines import serve; serve()", str(os.getpid())]
        try:
            with interrupts_ignored():
                process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        except OSError as error:
            raise EngineError(f"cannot start a worker process ({error.strerror or error})") from None
        worker = cls(process)
        worker._outbox.put(pickle.dumps(sys.path))  # what the parent imports, the worker finds
        return worker

    def send(self, task: int, fn: Callable[[Any], Any], job: Any) -> None:
        self._outbox.put(_TASK.pack(task) + pickle.dumps((fn, job), protocol=pickle.HIGHEST_PROTOCOL))

    def _send_loop(self) -> None:
        while (data := self._outbox.get()) is not None:
            try:
                _write_frame(self.process.stdin, data)
            except (BrokenPipeError, OSError, ValueError):
                return  # the worker is gone; the receiver reports it

    def _receive_loop(self) -> None:
        while True:
            data = _read_frame(self.process.stdout)
            if data is None:
                break
            results = self.results
            if results is not None:
                results.put(pickle.loads(data))
        status = self.process.wait()
        results = self.results
        if results is not None and status != 0:
            died = EngineError(f"a worker process exited with status {status} while running a job")
            results.put((None, False, died))

    def stop(self) -> None:
        """Ask the worker to exit (end of its input); kill it if it does not within a few seconds."""
        self._outbox.put(None)
        self._sender.join(timeout=5)
        try:
            self.process.stdin.close()
        except OSError:
            pass
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.results = None
        self._receiver.join(timeout=5)


def _rebuild(value: Any) -> BaseException:
    if isinstance(value, BaseException):
        return value
    error, text = value
    if not isinstance(error, LtsgenError):
        error.__cause__ = RemoteTraceback(text)
    return error


def _write_frame(stream: BinaryIO, data: bytes) -> None:
    stream.write(_FRAME.pack(len(data)))
    stream.write(data)
    stream.flush()


def _read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(_FRAME.size)
    if len(header) < _FRAME.size:
        return None
    (size,) = _FRAME.unpack(header)
    data = stream.read(size)
    return data if len(data) == size else None


@contextmanager
def interrupts_ignored() -> Iterator[None]:
    """Ctrl-C ignored while the block runs, in the main thread: a process started in it inherits SIGINT
    ignored, which Python keeps, so a Ctrl-C while a worker still starts (importing, before ``serve``)
    prints no traceback of its own; the parent alone answers it."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield  # not the main thread, or a handler set outside Python, which could not be put back
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def serve() -> None:
    """A worker's main loop: read the parent's ``sys.path``, then (task, fn, job) frames from stdin; answer
    (task, ok, value) on the original stdout (the worker's own prints go to stderr); exit at the end of
    input or when the parent process is gone."""
    parent = int(sys.argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent decides
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    requests = sys.stdin.buffer

    def watch_parent() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        os._exit(1)

    threading.Thread(target=watch_parent, daemon=True).start()
    paths = _read_frame(requests)
    if paths is None:
        return
    sys.path[:] = pickle.loads(paths)
    while (data := _read_frame(requests)) is not None:
        (task,) = _TASK.unpack_from(data)
        try:
            fn, job = pickle.loads(data[_TASK.size :])
            payload = pickle.dumps((task, True, fn(job)), protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the parent
            payload = _pickled_error(task, error)
        _write_frame(answers, payload)


def _pickled_error(task: int, error: BaseException) -> bytes:
    text = "".join(traceback.format_exception(error))
    try:
        return pickle.dumps((task, False, (error, text)))
    except Exception:  # an exception that does not pickle: send its text
        return pickle.dumps((task, False, (RuntimeError(f"{type(error).__name__}: {error}"), text)))


# ---------------------------------------------------------------- Ray


def _call(fn: Callable[[Any], Any], job: Any) -> Any:
    return fn(job)


class RayEngine(Engine):
    """Ray core tasks: one task per job, at most ``workers`` in flight (default: the cluster's CPUs)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        workers: int | None = None,
        resources: dict[str, float] | None = None,
    ) -> None:
        self.address = address
        self._requested = workers
        self.workers = workers or 1
        self.resources = {"num_cpus": 1, **(resources or {})}
        self._started_here = False

    @property
    def cpus_per_job(self) -> int:
        """The CPUs each task reserves, whole (at least one)."""
        return max(1, int(self.resources["num_cpus"]))

    def start(self) -> None:
        self._ray()

    def _ray(self):
        ray = _import_ray()
        if not ray.is_initialized():
            self._start(ray)
        if self._requested is None:  # as many tasks as the cluster can run at once
            self.workers = max(1, int(min(self._slots(ray).values(), default=1)))
        return ray

    def _start(self, ray) -> None:
        """Join ``--ray-address`` (else ``$RAY_ADDRESS``) or start a local runtime; check the tasks fit."""
        import logging
        import warnings

        address = self.address or os.environ.get("RAY_ADDRESS")
        named = "--ray-address" if self.address else "$RAY_ADDRESS"
        where = f"{address} ({named})" if address else "a local Ray runtime"
        options: dict[str, Any] = {"logging_level": logging.ERROR, "log_to_driver": False}
        if address:
            _check_reachable(address, where)
        else:  # room for the tasks asked to run at once, else this machine's cores
            options["num_cpus"] = (
                self._requested * self.cpus_per_job if self._requested else os.cpu_count() or 1
            )
            options["include_dashboard"] = False
        self._started_here = True  # close() shuts down even a runtime interrupted while it starts
        try:
            with warnings.catch_warnings():  # Ray's client warns before it raises what is said below
                warnings.simplefilter("ignore")
                ray.init(address=address or None, **options)
        except (ConnectionError, RuntimeError, ValueError) as error:
            raise EngineError(f"--engine ray: cannot start or join {where} ({error})") from None
        self._check_fits(ray, where, grows=bool(address))

    def _check_fits(self, ray, where: str, grows: bool) -> None:
        """Tasks that no node holds: refused where the cluster cannot grow (a local runtime: they would wait
        for ever), else a note (an autoscaler may add the node)."""
        short = [name for name, slot in self._slots(ray).items() if slot < 1]
        if not short:
            return
        total, asked = ray.cluster_resources(), self._asked
        want = " and ".join(_amount(asked[name], name) for name in short)
        have = " and ".join(_amount(total.get(name, 0), name) for name in short)
        if not grows:
            room = (
                ""
                if self._requested
                else " or give --workers N (a local runtime then makes room for N tasks)"
            )
            raise EngineError(
                f"--engine ray: each task asks for {want} and {where} has {have}; ask for less{room}"
            )
        print(f"note: each task asks for {want}; {where} has {have} for now: the tasks wait for a node that "
              "has them (an autoscaler may add one)", file=sys.stderr, flush=True)  # fmt: skip

    @property
    def _asked(self) -> dict[str, float | None]:
        """What each task reserves, by Ray's resource names."""
        return {"CPU": self.resources.get("num_cpus"), "GPU": self.resources.get("num_gpus")}

    def _slots(self, ray) -> dict[str, float]:
        """How many tasks the cluster's CPUs, and GPUs where tasks ask for them, hold at once."""
        total = ray.cluster_resources()
        return {name: total.get(name, 0) / amount for name, amount in self._asked.items() if amount}

    def map(self, fn: Callable[[Any], Any], jobs: Iterable[Any]) -> Iterator[Any]:
        ray = self._ray()
        options: dict[str, Any] = dict(self.resources)
        fsspec_defaults = {name: value for name, value in os.environ.items() if name.startswith("FSSPEC_")}
        if fsspec_defaults:  # a command's --storage-options (ltsgen.commands.storage_defaults), on every node
            options["runtime_env"] = {"env_vars": fsspec_defaults}
        task = ray.remote(**options)(_call)
        pending = iter(jobs)
        running: list = []

        def feed() -> None:
            for job in pending:
                running.append(task.remote(fn, job))
                if len(running) >= self.workers:
                    return

        feed()
        try:
            while running:
                (done,), _ = ray.wait(running, num_returns=1)
                running.remove(done)
                try:
                    value = ray.get(done)
                except ray.exceptions.RayTaskError as error:
                    cause = error.cause if isinstance(error.cause, BaseException) else None
                    if isinstance(cause, LtsgenError):
                        raise cause from None
                    lines = str(cause or error).strip().splitlines() or [""]
                    what = f"{type(cause).__name__}: {lines[0]}" if cause else lines[-1]
                    where = "; ".join(getattr(cause, "__notes__", ()))  # the job, as execute_job notes it
                    raise EngineError(f"a Ray task failed{f' ({where})' if where else ''}: {what}") from error
                except ray.exceptions.RayError as error:
                    raise EngineError(f"a Ray task was lost ({type(error).__name__}: {error})") from None
                feed()
                yield value
        finally:
            for ref in running:
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started_here:
            _import_ray().shutdown()
            self._started_here = False


def _import_ray():
    """The ``ray`` module, or the one-line error naming the extra that installs it."""
    return require("ray", "ray", "Ray tasks (--engine ray)")


def _amount(count: float, name: str) -> str:
    return f"{count:g} {name}" + ("" if count == 1 else "s")


def _check_reachable(address: str, where: str, timeout: float = RAY_CONNECT_TIMEOUT) -> None:
    """Refuse a Ray address whose host and port do not take a connection (``ray.init`` would retry for
    ever, its log lines on stderr); ``auto`` and ``local`` are Ray's to resolve."""
    import socket

    if address.startswith(("http://", "https://")):
        raise EngineError(
            f"--engine ray: {where} is the address of Ray's Jobs API (for `ray job submit`), not of a cluster: "
            "give HEAD:6379, ray://HEAD:10001 or auto"
        )
    host, _, port = address.removeprefix("ray://").rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # an IPv6 address: [::1]:6379
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise EngineError(
            f"--engine ray: cannot reach {where} ({reason}); is a Ray head running there (`ray start --head`)?"
        ) from None
