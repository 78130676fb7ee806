"""The resumable, parallel, deterministic build driver shared by every ltsgen builder.

A builder describes its output as a list of ``Job`` s (each writes one or a few shards through
``ShardWriter``) and a top-level ``run_job(job, output) -> stats`` function; ``run_build`` does the rest:

- a finished build with the same arguments whose shards all verify is "up to date": nothing is written
  (a read-only directory works), except a missing card and intermediate files left by a kill;
- otherwise it takes the lock ``DIR/.ltsgen/lock`` first (a second build in the same directory is refused),
  then claims the directory: one holding a build with other arguments (that got as far as a shard) is
  refused unless ``overwrite``, which removes only what that build wrote (the shards of its manifest and
  journal, its manifest, the card, plots and tokenizer it wrote, ``.ltsgen/``); a directory of other
  files is refused unless ``overwrite``, which builds beside them and keeps them all;
- keeps every job that the journal ``DIR/.ltsgen/journal.jsonl`` records as done *and* whose shards still
  match their recorded size and sha256; hands the others to an engine (``ltsgen.engines``: this process,
  a local process pool or Ray tasks), which runs them and returns their results as they complete;
- appends one journal line per finished job (after its shards were renamed into place), so a kill -9 at any
  moment loses at most the jobs in flight, and leaves only temporary files, which the next run removes;
- writes ``manifest.json`` last, atomically, then the data card, then removes the build's intermediate
  files (``BuildSpec.scratch``).

Output bytes are a pure function of the jobs: the number of workers and any interruption change nothing.
Every failure to write (a full disk, a read-only folder) is a one-line ``BuildError`` naming the file.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ltsgen.card import CARD_FILES, ordered_splits
from ltsgen.engines import Engine, RayEngine, SerialEngine, make_engine
from ltsgen.errors import LtsgenError
from ltsgen.loaders.contract import (
    CARD_NAME,
    FORMATS,
    MANIFEST_NAME,
    TOKENIZER_NAME,
    ContractError,
    Manifest,
    ShardInfo,
    atomic_path,
    read_manifest,
    sha256_file,
    write_manifest,
)
from ltsgen.shards import ShardWriter

STATE_DIR = ".ltsgen"
STATE_NAME = "build.json"
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
OUTPUTS_NAME = "outputs.json"  # files other than shards that builds wrote here: relative path -> sha256
# What builds made before OUTPUTS_NAME existed wrote beside their shards (a directory with a manifest and no
# record): the card, its plots and the tokenizer.
LEGACY_OUTPUTS = (*CARD_FILES, TOKENIZER_NAME)
# the temporary files of atomic writes (``.<final name>.<random>.tmp``) of the files a build writes
_TEMPORARY = re.compile(
    r"^\.(?:shard-\d+\.(?:tar|parquet|jsonl\.zst)|manifest\.json|README\.md|tokenizer\.json|\w+_histogram\.png)"
    r"(?:\.[^/]*)?\.tmp$"
)


class BuildError(LtsgenError):
    """A build that cannot start or finish; the message is one line naming the directory or file."""


@dataclass(frozen=True)
class Job:
    """One unit of work. ``key`` is unique and stable across runs; ``payload`` is builder data (picklable);
    ``weight`` is what the progress bar counts for it (e.g. its number of samples)."""

    key: str
    payload: Any = None
    weight: int = 1


@dataclass
class JobResult:
    """What a finished job left behind: its shards and the JSON statistics its ``run_job`` returned."""

    key: str
    shards: list[ShardInfo]
    stats: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        shards = [{k: v for k, v in vars(s).items() if v is not None} for s in self.shards]
        return json.dumps({"job": self.key, "shards": shards, "stats": self.stats}, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> JobResult:
        data = json.loads(line)
        return cls(data["job"], [ShardInfo.from_dict(s) for s in data["shards"]], data.get("stats") or {})


class ShardOutput:
    """Handed to ``run_job``: opens the job's shard writers and remembers what they wrote."""

    def __init__(self, directory: Path, fmt: str, token_dtype: str | None) -> None:
        self.directory = directory
        self.fmt = fmt
        self.token_dtype = token_dtype
        self.writers: list[ShardWriter] = []

    def open(self, relpath: str) -> ShardWriter:
        """A writer for ``DIR/relpath`` (use it as a context manager)."""
        writer = ShardWriter(self.directory, relpath, self.fmt, self.token_dtype)
        self.writers.append(writer)
        return writer


RunJob = Callable[[Job, ShardOutput], "dict[str, Any] | None"]


@dataclass
class BuildSpec:
    """Everything a build needs. ``builder`` = {"name", "version", "arguments"}: the arguments that
    determine the output (never the worker count); a rerun with other ones is refused."""

    directory: Path
    builder: dict[str, Any]
    source: str
    fmt: str
    splits: list[str]
    jobs: list[Job]
    run_job: RunJob  # a top-level function, so that worker processes can import it
    token_dtype: str | None = None
    tokenizer: dict[str, Any] | None = None
    buckets: list[str] | None = None
    # main process, after every job: (results in job order) -> manifest.extra
    finalize: Callable[[list[JobResult]], dict[str, Any]] | None = None
    unit: str = "samples"  # what the progress bar counts (the jobs' weights)
    # intermediate files and folders under DIR/.ltsgen/, removed once the manifest is written (on every path)
    scratch: list[str] = field(default_factory=list)


@dataclass
class BuildResult:
    manifest: Manifest
    status: str  # "built", "resumed" or "up to date"
    jobs_run: int
    jobs_kept: int
    samples: int
    words: int
    seconds: float  # wall time of the whole run: jobs, statistics, manifest and card
    job_words: int = 0  # words of the jobs run now (not those kept from an earlier run)
    job_seconds: float = 0.0  # wall time of running them, what the progress bar's rate divides by
    notes: list[str] = field(default_factory=list)  # one line each, said after the summary

    def summary(self, directory: Path, unit: str = "samples") -> str:
        splits = ", ".join(
            f"{split} {sum(s.samples for s in shards):,}" for split, shards in ordered_splits(self.manifest)
        )
        if self.status == "up to date":
            line = f"{directory}: build already complete ({self.samples:,} {unit}: {splits}); nothing to do"
        else:
            rate = self.job_words / self.job_seconds if self.job_seconds > 0 else 0.0
            shards = sum(len(s) for s in self.manifest.splits.values())
            kept = f", {self.jobs_kept} kept from an earlier run" if self.jobs_kept else ""
            line = (
                f"{directory}: {self.status} {self.samples:,} {unit} ({splits}), {self.words:,} words in "
                f"{shards} {self.manifest.format} shards ({self.jobs_run} jobs run{kept}); shards written at "
                f"{rate:,.0f} words/s, {self.seconds:.1f}s wall time in all (statistics and card included)"
            )
        return "\n".join([line, *(f"  note: {note}" for note in self.notes)])


def stable_fraction(key: str) -> float:
    """A uniform number in [0, 1) fixed by ``key`` (sha256), independent of platform and Python."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2**64


def parse_splits(text: str) -> dict[str, float]:
    """``"train=0.98,validation=0.01,test=0.01"`` -> ordered {name: fraction}; fractions must sum to 1."""
    splits: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            fraction = float(value)
        except ValueError:
            fraction = -1.0
        if not sep or not name or not name.replace("_", "").isalnum() or not 0 <= fraction <= 1:
            raise BuildError(f"--splits: {part.strip()!r} is not name=fraction (e.g. train=0.98)")
        if name in splits:
            raise BuildError(f"--splits: split {name!r} given twice")
        splits[name] = fraction
    if abs(sum(splits.values()) - 1.0) > 1e-6:
        raise BuildError(f"--splits: fractions sum to {sum(splits.values()):g}, not 1")
    return splits


def assign_split(key: str, splits: dict[str, float]) -> str:
    """The split of the sample ``key``: a stable hash of the key against the cumulative fractions."""
    point, cumulative = stable_fraction(key), 0.0
    for name, fraction in splits.items():
        cumulative += fraction
        if point < cumulative:
            return name
    return next(name for name, fraction in reversed(splits.items()) if fraction > 0)


def chunk_by_size(items: Iterable[Any], size_of: Callable[[Any], float], limit: float) -> list[list[Any]]:
    """Cut ``items`` in order into consecutive chunks whose sizes add up to at most ``limit`` (never empty)."""
    chunks: list[list[Any]] = []
    current: list[Any] = []
    total = 0.0
    for item in items:
        size = size_of(item)
        if current and total + size > limit:
            chunks.append(current)
            current, total = [], 0.0
        current.append(item)
        total += size
    if current:
        chunks.append(current)
    return chunks


def run_build(
    spec: BuildSpec,
    *,
    engine: Engine | None = None,
    workers: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    card: bool = True,
) -> BuildResult:
    """Run (or resume, or confirm) the build described by ``spec``; see the module docstring.

    Args:
        spec: the build.
        engine: where the jobs run (the caller closes it); default: ``workers`` local processes.
        workers: with no ``engine``: 1 runs the jobs in this process, more in a local process pool.
        overwrite: replace a build with other arguments in the directory (removing only what it wrote),
            or build beside files no build wrote (keeping them).
        progress, card: show a progress bar; write the data card at the end.
    """
    if engine is None:
        if workers < 1:
            raise BuildError(f"--workers must be at least 1, not {workers}")
        with make_engine("local", workers) as own:
            return run_build(spec, engine=own, overwrite=overwrite, progress=progress, card=card)
    finished = finished_build(spec, card=card)
    if finished is not None:
        return finished
    with claim(spec.directory, spec.builder, overwrite):
        return build_claimed(spec, engine=engine, progress=progress, card=card)


def finished_build(spec: BuildSpec, *, card: bool = True) -> BuildResult | None:
    """The result of a complete build of ``spec`` already in its directory (its shards verified), else None.

    Reads only, unless the build left work behind (a missing card, intermediate files): that is done
    under the lock, when no other build holds it.
    """
    directory = Path(spec.directory)
    manifest = finished_manifest(directory, spec.builder)
    if manifest is None:
        return None
    result = BuildResult(manifest, "up to date", 0, len(spec.jobs), *_totals(manifest), 0.0)
    leftovers = [directory / STATE_DIR / name for name in spec.scratch]
    missing_card = card and not (directory / CARD_NAME).exists()
    if missing_card or any(path.exists() for path in leftovers):
        with _writing(directory):
            (directory / STATE_DIR).mkdir(exist_ok=True)
            with _lock(directory, wait=False) as held:
                if held:
                    _finish(directory, spec, result, card=missing_card)
    return result


@contextmanager
def claim(directory: str | os.PathLike, builder: dict[str, Any], overwrite: bool) -> Iterator[None]:
    """Hold ``DIR/.ltsgen/lock`` with the directory made ours for ``builder`` (see the module docstring).

    The refusals that need no lock come first, so that a refused build writes nothing; the lock is taken
    before anything is removed, and the directory is examined again under it.
    """
    directory = Path(directory)
    wanted = json.loads(json.dumps(builder, sort_keys=True))
    if directory.exists() and not directory.is_dir():
        raise BuildError(f"{directory}: exists and is not a directory")
    _refuse(directory, wanted, overwrite)
    with _writing(directory):
        (directory / STATE_DIR).mkdir(parents=True, exist_ok=True)
    with _lock(directory, wait=False) as held:
        if not held:
            raise BuildError(f"{directory}: another build is running there")
        with _writing(directory):
            _refuse(directory, wanted, overwrite)
            previous = _previous_builder(directory)
            if previous is not None and previous != wanted:
                remove_build(directory)
            state = directory / STATE_DIR / STATE_NAME
            if previous != wanted or not state.exists():
                with atomic_path(state) as tmp:
                    tmp.write_text(json.dumps(wanted, sort_keys=True, indent=2) + "\n", encoding="utf-8")
            if not (directory / STATE_DIR / OUTPUTS_NAME).exists():
                _write_outputs(directory, {})
        yield


def _refuse(directory: Path, wanted: dict[str, Any], overwrite: bool) -> None:
    """Refuse, unless ``overwrite``, a directory with another build or with files no build wrote."""
    if overwrite or not directory.is_dir():
        return
    previous = _previous_builder(directory)
    if previous is not None and previous != wanted and _holds_shards(directory):
        raise BuildError(
            f"{directory}: holds a build with other arguments ({_difference(previous, wanted)}); rerun with "
            "--overwrite to replace it (removes only the files that build wrote)"
        )
    if previous is None:
        foreign = next(iter(foreign_files(directory)), None)
        if foreign is not None:
            raise BuildError(
                f"{directory}: is not empty and holds no ltsgen build ({foreign.relative_to(directory)}, ...); "
                "choose a new or empty directory, or --overwrite to build beside its files (they are kept)"
            )


def _holds_shards(directory: Path) -> bool:
    """Whether the build in ``directory`` got as far as a shard or a manifest (a build that failed before
    either, on bad input say, leaves nothing to protect: another build may replace it without asking)."""
    return any(name == MANIFEST_NAME or "/" in name for name in written_files(directory))


@contextmanager
def _lock(directory: Path, *, wait: bool) -> Iterator[bool]:
    """Hold ``DIR/.ltsgen/lock``; yields False when ``wait`` is False and another process holds it.

    A POSIX record lock (``lockf``): it belongs to this process alone, so worker processes forked from it
    do not keep it, and it is released when this process ends, however it ends (kill -9 included).
    """
    import fcntl

    with open(directory / STATE_DIR / LOCK_NAME, "a") as lock:  # "a": taking it modifies nothing
        try:
            fcntl.lockf(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as error:
            if error.errno not in (errno.EACCES, errno.EAGAIN):
                raise
            yield False
            return
        yield True


@contextmanager
def _writing(directory: Path) -> Iterator[None]:
    """Turn a failure to write (full disk, read-only folder, file size limit) into one ``BuildError``."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or error
        path = Path(error.filename) if error.filename else directory
        if path == directory or STATE_DIR in path.parts:  # the directory itself, or the build's state
            raise BuildError(f"{directory}: cannot write there ({reason})") from None
        raise BuildError(f"{path}: cannot write ({reason})") from None


def build_claimed(
    spec: BuildSpec, *, engine: Engine, progress: bool = True, card: bool = True
) -> BuildResult:
    """Run the jobs of ``spec`` not yet done, write the manifest and card; inside ``claim`` only."""
    started = time.perf_counter()
    directory = Path(spec.directory)
    if spec.fmt not in FORMATS:
        raise BuildError(f"unknown format {spec.fmt!r} (choose from {', '.join(FORMATS)})")
    keys = [job.key for job in spec.jobs]
    if len(set(keys)) != len(keys):
        raise BuildError("the build plan has duplicate job keys")
    with _writing(directory):
        remove_temporary_files(directory)  # left by an interrupted run
        kept = _verified_journal(directory, set(keys))
        todo = [job for job in spec.jobs if job.key not in kept]
        results = dict(kept)
        jobs_started = time.perf_counter()
        for result in _run_jobs(spec, directory, todo, engine, progress):
            results[result.key] = result
        job_seconds = time.perf_counter() - jobs_started
        job_words = sum(s.words for key in results if key not in kept for s in results[key].shards)
        manifest = _manifest(spec, [results[key] for key in keys])
        write_manifest(directory, manifest)
        status = "resumed" if kept else "built"
        result = BuildResult(
            manifest, status, len(todo), len(kept), *_totals(manifest), 0.0, job_words, job_seconds
        )
        _finish(directory, spec, result, card=card)
    result.seconds = time.perf_counter() - started
    return result


def _finish(directory: Path, spec: BuildSpec, result: BuildResult, *, card: bool) -> None:
    """After the manifest: the card (unless a file it would replace is not ltsgen's), then the scratch."""
    if card:
        from ltsgen.card import card_conflict, write_card

        conflict = card_conflict(directory)
        if conflict is None:
            write_card(directory)
        else:
            result.notes.append(
                f"{conflict}; the card was not written (`ltsgen card {directory}` replaces it)"
            )
    for name in spec.scratch:
        path = directory / STATE_DIR / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _previous_builder(directory: Path) -> dict[str, Any] | None:
    state_path = directory / STATE_DIR / STATE_NAME
    if state_path.exists():
        try:
            return json.loads(state_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError:
            return {"name": f"unreadable {state_path}"}
    if (directory / MANIFEST_NAME).exists():
        try:
            return json.loads(json.dumps(read_manifest(directory).builder, sort_keys=True))
        except ContractError as error:
            raise BuildError(str(error)) from None
    return None


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    changes = []
    for part in ("name", "version"):
        if old.get(part) != new.get(part):
            changes.append(f"{part} {old.get(part)} -> {new.get(part)}")
    old_args, new_args = old.get("arguments") or {}, new.get("arguments") or {}
    for key in sorted(set(old_args) | set(new_args)):
        if old_args.get(key) != new_args.get(key):
            changes.append(f"{key} {old_args.get(key)} -> {new_args.get(key)}")
    return ", ".join(changes) or "different builder"


# ---------------------------------------------------------------- what a build wrote


def _read_outputs(directory: Path) -> dict[str, str] | None:
    """The recorded outputs (relative path -> sha256), or None where no record was kept."""
    path = directory / STATE_DIR / OUTPUTS_NAME
    try:
        outputs = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return outputs if isinstance(outputs, dict) else None


def _write_outputs(directory: Path, outputs: dict[str, str]) -> None:
    with atomic_path(directory / STATE_DIR / OUTPUTS_NAME) as tmp:
        tmp.write_text(json.dumps(outputs, sort_keys=True, indent=2) + "\n", encoding="utf-8")


def record_outputs(directory: str | os.PathLike, names: Iterable[str]) -> None:
    """Record the files ``names`` (relative to ``directory``, not shards) as written by ltsgen, with their
    sha256, so that ``--overwrite`` removes them and ``ltsgen card`` can tell hand edits. Only where the
    directory has ``.ltsgen/`` (a build's); elsewhere nothing is recorded."""
    directory = Path(directory)
    if not (directory / STATE_DIR).is_dir():
        return
    outputs = _read_outputs(directory) or {}
    outputs.update({name: sha256_file(directory / name) for name in names})
    _write_outputs(directory, outputs)


def output_state(directory: str | os.PathLike, name: str) -> str:
    """Whose ``DIR/name`` is: ``"absent"``, ``"ltsgen"`` (as ltsgen wrote it), ``"changed"`` (ltsgen
    wrote it, and it was edited since) or ``"other"`` (ltsgen did not write it)."""
    directory = Path(directory)
    path = directory / name
    if not path.is_file():
        return "absent"
    outputs = _read_outputs(directory)
    if outputs is None:  # a build made before records were kept, or no build at all
        legacy = name in LEGACY_OUTPUTS and (directory / MANIFEST_NAME).is_file()
        return "ltsgen" if legacy else "other"
    if name not in outputs:
        return "other"
    return "ltsgen" if sha256_file(path) == outputs[name] else "changed"


def _inside(relpath: Any) -> bool:
    """A relative path that stays inside its directory (manifests and journals are data, not trusted)."""
    if not isinstance(relpath, str) or not relpath or relpath.startswith("/") or "\\" in relpath:
        return False
    return ".." not in relpath.split("/")


def written_files(directory: Path) -> set[str]:
    """The files (relative paths, outside ``.ltsgen/``) that earlier ltsgen builds wrote in ``directory``
    and that are still as written, shards aside: those are named by the manifest and journal, whatever
    they hold now."""
    written: set[str] = set()
    if (directory / MANIFEST_NAME).is_file():
        try:
            manifest = read_manifest(directory)
        except ContractError:
            manifest = None
        if manifest is not None:
            written.add(MANIFEST_NAME)
            written.update(shard.path for shards in manifest.splits.values() for shard in shards)
    journal = directory / STATE_DIR / JOURNAL_NAME
    if journal.is_file():
        for line in journal.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                written.update(shard.path for shard in JobResult.from_json(line).shards)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
    outputs = _read_outputs(directory)
    for name in LEGACY_OUTPUTS if outputs is None else outputs:
        if output_state(directory, name) == "ltsgen":
            written.add(name)
    return {name for name in written if _inside(name) and (directory / name).is_file()}


def foreign_files(directory: Path) -> Iterator[Path]:
    """Files under ``directory`` that no ltsgen build wrote (a new build keeps them)."""
    written = written_files(directory)
    for path in sorted(directory.rglob("*")):
        relative = path.relative_to(directory)
        if (
            path.is_file()
            and relative.parts[0] != STATE_DIR
            and relative.as_posix() not in written
            and not _TEMPORARY.match(path.name)
        ):
            yield path


def remove_temporary_files(directory: Path) -> None:
    """Remove the temporary files that a killed build left (only the names ltsgen's writers use)."""
    for path in directory.rglob(".*.tmp"):
        if _TEMPORARY.match(path.name) and STATE_DIR not in path.relative_to(directory).parts:
            path.unlink()


def remove_build(directory: str | os.PathLike) -> None:
    """Remove what earlier builds wrote in ``directory`` (``written_files``, their temporary files and
    ``.ltsgen/`` but its lock), and the folders that this leaves empty; nothing else."""
    directory = Path(directory)
    written = written_files(directory)
    outputs = _read_outputs(directory)
    state = directory / STATE_DIR
    for path in state.iterdir() if state.is_dir() else []:
        if path.name != LOCK_NAME:
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    folders = set()
    for name in written:
        (directory / name).unlink()
        folders.update((directory / name).parents)
    kept = {name: sha for name, sha in (outputs or {}).items() if (directory / name).is_file()}
    if kept:  # files ltsgen wrote that were edited since stay, and stay known as such
        _write_outputs(directory, kept)
    for path in directory.rglob(".*.tmp"):
        if _TEMPORARY.match(path.name):
            path.unlink()
            folders.update(path.parents)
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        if folder != directory and directory in folder.parents and not any(folder.iterdir()):
            folder.rmdir()


def finished_manifest(directory: Path, builder: dict[str, Any]) -> Manifest | None:
    """The manifest of a complete build with these arguments whose shards all verify, else None."""
    if not (directory / MANIFEST_NAME).exists():
        return None
    try:
        manifest = read_manifest(directory)
    except ContractError:
        return None
    if json.loads(json.dumps(manifest.builder, sort_keys=True)) != json.loads(
        json.dumps(builder, sort_keys=True)
    ):
        return None
    shards = [s for split in manifest.splits.values() for s in split]
    return manifest if all(_shard_ok(directory, s) for s in shards) else None


def _shard_ok(directory: Path, shard: ShardInfo) -> bool:
    path = directory / shard.path
    return path.is_file() and path.stat().st_size == shard.bytes and sha256_file(path) == shard.sha256


def _verified_journal(directory: Path, keys: set[str]) -> dict[str, JobResult]:
    """Jobs of this plan that a previous run finished and whose shards are intact (torn lines ignored)."""
    path = directory / STATE_DIR / JOURNAL_NAME
    if not path.exists():
        return {}
    kept: dict[str, JobResult] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            result = JobResult.from_json(line)
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
        if result.key in keys and all(_shard_ok(directory, s) for s in result.shards):
            kept[result.key] = result
    return kept


def execute_job(run_job: RunJob, directory: Path, fmt: str, token_dtype: str | None, job: Job) -> JobResult:
    """Run one job (in this process or a worker); every writer it opened must have finished."""
    output = ShardOutput(directory, fmt, token_dtype)
    try:
        stats = run_job(job, output) or {}
    except OSError as error:  # a full disk or a file size limit: name the shard being written
        where = error.filename or (output.writers[-1].path if output.writers else directory)
        raise BuildError(f"{where}: cannot write ({error.strerror or error})") from None
    unfinished = [w.relpath for w in output.writers if w.info is None]
    if unfinished:
        raise BuildError(f"job {job.key}: shard writers not closed: {unfinished}")
    return JobResult(job.key, [w.info for w in output.writers], stats)


def _run_jobs(spec: BuildSpec, directory: Path, todo: list[Job], engine: Engine, progress: bool):
    """Yield results of ``todo`` as the engine finishes them, journaling each one, with a progress bar."""
    from tqdm import tqdm

    journal_path = directory / STATE_DIR / JOURNAL_NAME
    weights = {job.key: job.weight for job in spec.jobs}
    bar = tqdm(
        total=sum(weights.values()),
        initial=sum(weights.values()) - sum(job.weight for job in todo),
        unit=f" {spec.unit}",
        disable=not progress,
        dynamic_ncols=True,
    )
    words = 0
    started = time.perf_counter()
    if len(todo) <= 1 and not isinstance(engine, RayEngine):
        engine = SerialEngine()  # one job: not worth starting worker processes for
    run = partial(execute_job, spec.run_job, directory, spec.fmt, spec.token_dtype)
    with open(journal_path, "a+b") as journal, ExitStack() as stack:
        stack.callback(bar.close)
        if journal.tell():
            journal.seek(-1, os.SEEK_END)
            if journal.read(1) != b"\n":  # a line cut by a kill or a full disk: end it, so the next reads
                journal.write(b"\n")
        for result in engine.map(run, todo):
            journal.write((result.to_json() + "\n").encode("utf-8"))
            journal.flush()
            os.fsync(journal.fileno())
            words += sum(s.words for s in result.shards)
            bar.set_postfix_str(
                f"{words / max(time.perf_counter() - started, 1e-9):,.0f} words/s", refresh=False
            )
            bar.update(weights[result.key])
            yield result


def _manifest(spec: BuildSpec, results: list[JobResult]) -> Manifest:
    splits: dict[str, list[ShardInfo]] = {split: [] for split in spec.splits}
    seen: set[str] = set()
    for result in results:
        for shard in result.shards:
            split = shard.path.split("/")[0]
            if split not in splits:
                raise BuildError(f"{shard.path}: split {split!r} is not one of {spec.splits}")
            if shard.path in seen:
                raise BuildError(f"{shard.path}: written by two jobs")
            seen.add(shard.path)
            splits[split].append(shard)
    for shards in splits.values():
        shards.sort(key=lambda s: s.path)
    extra = spec.finalize(results) if spec.finalize else {}
    return Manifest(
        source=spec.source,
        format=spec.fmt,
        splits=splits,
        builder=spec.builder,
        tokenizer=spec.tokenizer,
        buckets=spec.buckets,
        extra=extra,
    )


def _totals(manifest: Manifest) -> tuple[int, int]:
    shards = [s for split in manifest.splits.values() for s in split]
    return sum(s.samples for s in shards), sum(s.words for s in shards)
