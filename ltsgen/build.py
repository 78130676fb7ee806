"""The resumable, parallel, deterministic build driver shared by every ltsgen builder.

A builder describes its output as a list of ``Job`` s (each writes one or a few shards through
``ShardWriter``) and a top-level ``run_job(job, output) -> stats`` function; ``run_build`` does the rest,
in a local folder or an object-store prefix (``ltsgen.loaders.storage``):

- a finished build with the same arguments whose shards all verify is "up to date": nothing is written
  (a read-only folder works), except a missing card and intermediate files left by a kill;
- otherwise it takes the lock first (``flock`` locally, a renewed lease object on an object store; a second
  build in the same directory is refused), then claims the directory: one holding a build with other
  arguments (that got as far as a shard) is refused unless ``overwrite``, which removes only what that
  build wrote (the shards of its manifest and journal, its manifest, the card, plots and tokenizer it
  recorded in ``.ltsgen/outputs.json``, and ``.ltsgen/``); a directory of other files is refused unless
  ``overwrite``, which builds beside them and keeps them all (one where the new build writes is refused);
- keeps every job that the journal ``DIR/.ltsgen/journal.jsonl`` records as done *and* whose shards still
  match their recorded size and sha256; hands the others to an engine (``ltsgen.engines``: this process,
  a local process pool or Ray tasks), which runs them and returns their results as they complete;
- appends one journal line per finished job (after its shards were published under their final names),
  so a kill -9 at any moment loses at most the jobs in flight, and leaves only temporary files, which the
  next run removes (locally; an object store never sees an unfinished shard);
- writes ``manifest.json`` last, atomically, then the data card (unless a file it would replace is not as
  ltsgen wrote it), then removes the build's intermediate files (``BuildSpec.scratch``).

On an object store a shard is verified by its size and the store's version tag (ETag or generation)
recorded in the journal when it was written, without reading it back; locally by its size and sha256.

Output bytes are a pure function of the jobs: the number of workers and any interruption change nothing.
Every failure to write (a full disk, a read-only folder) is a one-line error naming the file.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ltsgen.card import PLOTS_MISSING, can_plot, card_conflict, ordered_splits, write_card
from ltsgen.engines import Engine, RayEngine, SerialEngine, make_engine
from ltsgen.errors import LtsgenError, did_you_mean
from ltsgen.loaders.contract import (
    CARD_NAME,
    FORMATS,
    MANIFEST_NAME,
    STANDARD_SPLITS,
    Manifest,
    ShardInfo,
    read_manifest,
    write_manifest,
)
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.files import sha256_file
from ltsgen.loaders.storage import LockHeld, Storage, StorageError, as_storage
from ltsgen.outputs import (
    JOURNAL_PATH,
    LOCK_PATH,
    OUTPUTS_PATH,
    STATE_DIR,
    STATE_PATH,
    TEMPORARY,
    WRITING_PATH,
    JobResult,
    announce,
    foreign_files,
    remove_build,
    remove_temporary_files,
    temporary_files,
    write_outputs,
    written_files,
)
from ltsgen.shards import ShardWriter


class BuildError(LtsgenError):
    """A build that cannot start or finish; the message is one line naming the directory or file."""


@dataclass(frozen=True)
class Job:
    """One unit of work. ``key`` is unique and stable across runs; ``payload`` is builder data (picklable);
    ``weight`` is what the progress bar counts for it (e.g. its number of samples); ``shards``: the
    relative paths of the shards it writes, where known before it runs, so that a build refuses to start
    where a file it did not write sits at one of them (rather than replace it)."""

    key: str
    payload: Any = None
    weight: int = 1
    shards: tuple[str, ...] = ()


class ShardOutput:
    """Handed to ``run_job``: opens the job's shard writers and remembers what they wrote."""

    def __init__(self, directory: Storage, fmt: str, token_dtype: str | None) -> None:
        self.directory = directory
        self.fmt = fmt
        self.token_dtype = token_dtype
        self.writers: list[ShardWriter] = []

    def open(self, relpath: str) -> ShardWriter:
        """A writer for ``DIR/relpath`` (use it as a context manager)."""
        announce(self.directory, relpath)
        writer = ShardWriter(self.directory, relpath, self.fmt, self.token_dtype)
        self.writers.append(writer)
        return writer


RunJob = Callable[[Job, ShardOutput], "dict[str, Any] | None"]


@dataclass(frozen=True)
class BuildSpec:
    """Everything a build needs. ``builder`` = {"name", "version", "arguments"} (and any other
    part of the identity, e.g. the story engine's "engine_version"): the arguments that
    determine the output (never the worker count); a rerun with other ones is refused. ``directory`` is a
    local path or a ``Storage`` (any URL, with its options)."""

    directory: Path | str | Storage
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

    def summary(self, directory: Path | str | Storage, unit: str = "samples") -> str:
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
                f"{counted(shards, f'{self.manifest.format} shard')} ({counted(self.jobs_run, 'job')} run"
                f"{kept}); shards written at {rate:,.0f} words/s, {self.seconds:.1f}s wall time in all "
                "(statistics and card included)"
            )
        return "\n".join([line, *(f"  note: {note}" for note in self.notes)])


def counted(count: int, noun: str) -> str:
    """``1 job``, ``2 jobs``."""
    return f"{count:,} {noun}{'' if count == 1 else 's'}"


def stable_fraction(key: str) -> float:
    """A uniform number in [0, 1) fixed by ``key`` (sha256), independent of platform and Python."""
    return int.from_bytes(hashlib.sha256(key.encode("utf-8")).digest()[:8], "big") / 2**64


def parse_splits(text: str) -> dict[str, float]:
    """``"train=0.98,validation=0.01,test=0.01"`` -> {name: fraction} in the order train, validation, test
    (given in any order); fractions must sum to 1."""
    splits: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        try:
            fraction = float(value)
        except ValueError:
            fraction = -1.0
        if not sep or not name or not name.replace("_", "").isalnum() or not 0 <= fraction <= 1:
            raise BuildError(f"--splits: {part.strip()!r} is not name=fraction (e.g. train=0.98)")
        if name not in STANDARD_SPLITS:
            hint = did_you_mean(name, STANDARD_SPLITS, n=1, cutoff=0.3)
            hint = f"{hint} " if hint else ""
            raise BuildError(
                f"--splits: unknown split {name!r}; {hint}training and evaluation read "
                f"{', '.join(STANDARD_SPLITS)}"
            )
        if name in splits:
            raise BuildError(f"--splits: split {name!r} given twice")
        splits[name] = fraction
    if abs(sum(splits.values()) - 1.0) > 1e-6:
        raise BuildError(f"--splits: fractions sum to {sum(splits.values()):g}, not 1")
    return dict(_in_standard_order(splits))  # as assign_split reads them


def assign_split(key: str, splits: dict[str, float]) -> str:
    """The split of the sample ``key``: a stable hash of the key against the cumulative fractions, taken in
    the order train, validation, test (then any other name), whatever order ``splits`` lists them in."""
    ordered = _in_standard_order(splits)
    point, cumulative = stable_fraction(key), 0.0
    for name, fraction in ordered:
        cumulative += fraction
        if point < cumulative:
            return name
    return next(name for name, fraction in reversed(ordered) if fraction > 0)


def _in_standard_order(splits: dict[str, float]) -> list[tuple[str, float]]:
    """``splits``' (name, fraction) pairs in the order train, validation, test, then other names as given."""
    return sorted(splits.items(), key=lambda item: _SPLIT_ORDER.get(item[0], len(_SPLIT_ORDER)))


_SPLIT_ORDER = {name: rank for rank, name in enumerate(STANDARD_SPLITS)}


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
    shards = {path for job in spec.jobs for path in job.shards}
    with claim(spec.directory, spec.builder, overwrite, writes=shards.__contains__):
        return build_claimed(spec, engine=engine, progress=progress, card=card)


def finished_build(spec: BuildSpec, *, card: bool = True) -> BuildResult | None:
    """The result of a complete build of ``spec`` already in its directory (its shards verified), else None.

    Reads only, unless the build left work behind (a missing card, intermediate files): that is done
    under the lock, when no other build holds it.
    """
    store = as_storage(spec.directory)
    store.check_writable()  # an --out never writable (hf://) is said before anything is read there
    manifest = finished_manifest(store, spec.builder)
    if manifest is None:
        return None
    result = BuildResult(manifest, "up to date", 0, len(spec.jobs), *_totals(manifest), 0.0)
    leftovers = [name for name in spec.scratch if store.exists(f"{STATE_DIR}/{name}")]
    missing_card = card and not store.exists(CARD_NAME)
    if missing_card or leftovers or temporary_files(store):  # a run killed while it wrote the card, say
        try:
            with _writing(store), store.lock(LOCK_PATH):
                _finish(store, spec, result, card=missing_card)
        except LockHeld:  # another build holds the directory: it finishes this itself
            pass
    return result


@contextmanager
def claim(
    directory: Path | str | Storage,
    builder: dict[str, Any],
    overwrite: bool,
    writes: Callable[[str], bool] | None = None,
) -> Iterator[None]:
    """Hold the directory's lock with the directory made ours for ``builder`` (see the module docstring).

    The refusals that need no lock come first, so that a refused build writes nothing; the lock is taken
    before anything is removed, and the directory is examined again under it. ``writes(relpath)``: whether
    the build may write that file; a file no build wrote where it does is refused, even with ``overwrite``.
    """
    store = as_storage(directory)
    wanted = json.loads(json.dumps(builder, sort_keys=True))
    with ExitStack() as stack:
        try:
            store.check_writable()
            if store.is_local and store.root.exists() and not store.root.is_dir():
                raise BuildError(f"{store}: exists and is not a directory")
            held = store.lock_holder(LOCK_PATH)
            if held is not None:  # first: a running build's directory is half written
                raise build_running(store, held)
            _refuse(store, wanted, overwrite, writes)
            try:
                stack.enter_context(store.lock(LOCK_PATH))
            except LockHeld as error:
                raise build_running(store, error.reason) from None
            _refuse(store, wanted, overwrite, writes)
            previous = _previous_builder(store)
            if previous is not None and previous != wanted:
                remove_build(store)
            if previous != wanted or not store.exists(STATE_PATH):
                store.write_bytes(STATE_PATH, (json.dumps(wanted, sort_keys=True, indent=2) + "\n").encode())
            if not store.exists(OUTPUTS_PATH):
                write_outputs(store, {})
        except StorageError as error:
            if store.read_only:
                raise BuildError(str(error)) from None
            raise BuildError(f"{store}: cannot write there ({error.reason})") from None
        except OSError as error:
            raise BuildError(f"{store}: cannot write there ({error.strerror or error})") from None
        yield


def build_running(store: Storage, reason: str) -> BuildError:
    """The refusal of a directory whose lock another build holds (``reason``: who, as the lock says)."""
    return BuildError(f"{store}: another build is running there ({reason})")


def _refuse(
    store: Storage, wanted: dict[str, Any], overwrite: bool, writes: Callable[[str], bool] | None
) -> None:
    """Refuse, unless ``overwrite``, a directory with another build or with files no build wrote; and, even
    with it, a new build that would replace a file no build wrote (where ``writes`` says it may write)."""
    if not store.exists():
        return
    previous = _previous_builder(store)
    if previous == wanted:
        return
    if not overwrite and previous is not None and _holds_shards(store):
        if "arguments" in previous and previous.get("name") != wanted.get("name"):
            raise BuildError(  # another builder's: listing how all its arguments differ would say nothing more
                f"{store}: holds a build of {previous.get('name')}, not of {wanted.get('name')}; use another "
                "--out, or --overwrite to replace it (removes only the files that build wrote)"
            )
        raise BuildError(
            f"{store}: holds a build with other arguments ({_difference(previous, wanted)}); rerun with "
            "--overwrite to replace it (removes only the files that build wrote)"
        )
    foreign = sorted(foreign_files(store))
    if not overwrite and previous is None and foreign:
        raise BuildError(
            f"{store}: is not empty and holds no ltsgen build ({foreign[0]}, ...); choose a new or empty "
            "directory, or --overwrite to build beside its files (they are kept)"
        )
    in_the_way = next((name for name in foreign if writes is not None and writes(name)), None)
    if in_the_way is not None:
        raise BuildError(
            f"{store.location(in_the_way)}: not written by ltsgen, and this build writes there; move it "
            "away (--overwrite keeps files of yours, it never replaces them)"
        )


def _holds_shards(store: Storage) -> bool:
    """Whether the build in the directory got as far as a shard or a manifest (a build that failed before
    either, on bad input say, leaves nothing to protect: another build may replace it without asking)."""
    return any(name == MANIFEST_NAME or "/" in name for name in written_files(store))


@contextmanager
def _writing(store: Storage) -> Iterator[None]:
    """Turn a failure to write a local file (full disk, read-only folder, file size limit) into one
    ``BuildError`` naming the file (the final name, for the temporary file of an atomic write)."""
    try:
        yield
    except OSError as error:
        reason = error.strerror or error
        path = Path(error.filename) if error.filename else None
        if path is None or STATE_DIR in path.parts:  # the directory itself, or the build's state
            raise BuildError(f"{store}: cannot write there ({reason})") from None
        temporary = TEMPORARY.match(path.name)
        raise BuildError(
            f"{path.with_name(temporary['name']) if temporary else path}: cannot write ({reason})"
        ) from None


def build_claimed(
    spec: BuildSpec, *, engine: Engine, progress: bool = True, card: bool = True
) -> BuildResult:
    """Run the jobs of ``spec`` not yet done, write the manifest and card; inside ``claim`` only."""
    started = time.perf_counter()
    store = as_storage(spec.directory)
    if spec.fmt not in FORMATS:
        raise BuildError(f"unknown format {spec.fmt!r} (choose from {', '.join(FORMATS)})")
    keys = [job.key for job in spec.jobs]
    if len(set(keys)) != len(keys):
        raise BuildError("the build plan has duplicate job keys")
    with _writing(store):
        remove_temporary_files(store)  # left by an interrupted run
        kept = verified_journal(store, set(keys))
        todo = [job for job in spec.jobs if job.key not in kept]
        results = dict(kept)
        if todo:
            engine.start()  # a Ray runtime's start-up is not the jobs' time
        jobs_started = time.perf_counter()
        for result in _run_jobs(spec, store, todo, engine, progress):
            results[result.key] = result
        job_seconds = time.perf_counter() - jobs_started
        job_words = sum(s.words for key in results if key not in kept for s in results[key].shards)
        manifest = _manifest(spec, [results[key] for key in keys])
        write_manifest(store, manifest)
        store.remove_log(WRITING_PATH)  # the manifest names every shard now
        status = "resumed" if kept else "built"
        result = BuildResult(
            manifest, status, len(todo), len(kept), *_totals(manifest), 0.0, job_words, job_seconds
        )
        _finish(store, spec, result, card=card)
    result.seconds = time.perf_counter() - started
    return result


def _finish(store: Storage, spec: BuildSpec, result: BuildResult, *, card: bool) -> None:
    """After the manifest: the card (unless a file it would replace is not ltsgen's), then the scratch and
    the temporary files of attempts that did not finish (a job an engine ran again after its worker died, a
    card drawn by a killed run)."""
    if card:
        conflict = card_conflict(store)
        if conflict is None:
            write_card(store, verify=False)  # every shard was written or checked by this run
            if not can_plot():
                result.notes.append(PLOTS_MISSING)
        else:
            result.notes.append(
                f"{conflict}; the card was not written (`ltsgen card {store}` replaces a card ltsgen wrote, "
                "once a file of yours is moved away)"
            )
    for name in spec.scratch:
        store.remove_tree(f"{STATE_DIR}/{name}")
    remove_temporary_files(store)


def _previous_builder(store: Storage) -> dict[str, Any] | None:
    if store.exists(STATE_PATH):
        try:
            return json.loads(store.read_text(STATE_PATH))
        except (ValueError, RecursionError):
            return {"name": f"unreadable {store.location(STATE_PATH)}"}
    if store.exists(MANIFEST_NAME):
        try:
            return json.loads(json.dumps(read_manifest(store).builder, sort_keys=True))
        except LoaderError as error:
            raise BuildError(str(error)) from None
    return None


DIFFERENCES_SHOWN = 6  # differing arguments named in a refusal; the others counted
VALUE_CHARS = 60  # characters of one value shown in it


def _difference(old: dict[str, Any], new: dict[str, Any]) -> str:
    """What differs between two builders, in one short line: each value capped (a list of many items,
    the input files say, shown by its count), and the differences past the first few counted."""
    changes = []
    # name, version and any other part of the identity, then the arguments
    for part in sorted((set(old) | set(new)) - {"arguments"}):
        if old.get(part) != new.get(part):
            changes.append(f"{part} {_shown(old.get(part))} -> {_shown(new.get(part))}")
    old_args, new_args = old.get("arguments") or {}, new.get("arguments") or {}
    for key in sorted(set(old_args) | set(new_args)):
        if old_args.get(key) != new_args.get(key):
            changes.append(f"{key} {_shown(old_args.get(key))} -> {_shown(new_args.get(key))}")
    if len(changes) > DIFFERENCES_SHOWN:
        changes[DIFFERENCES_SHOWN:] = [f"and {len(changes) - DIFFERENCES_SHOWN} more"]
    return ", ".join(changes) or "different builder"


def _shown(value: Any) -> str:
    """A builder value as a refusal shows it: whole when short, else a list or object by its number of items
    (the input files, say), any other value cut at ``VALUE_CHARS`` characters."""
    text = str(value)
    if len(text) <= VALUE_CHARS:
        return text
    if isinstance(value, (list, dict)):
        items = f"{len(value)} {'item' if len(value) == 1 else 'items'}"
        return f"[{items}]" if isinstance(value, list) else f"{{{items}}}"
    return text[: VALUE_CHARS - 3] + "..."


def finished_manifest(directory: Path | str | Storage, builder: dict[str, Any]) -> Manifest | None:
    """The manifest of a complete build with these arguments whose shards all verify, else None."""
    store = as_storage(directory)
    if not store.exists(MANIFEST_NAME):
        return None
    try:
        manifest = read_manifest(store)
    except LoaderError:
        return None
    if json.loads(json.dumps(manifest.builder, sort_keys=True)) != json.loads(
        json.dumps(builder, sort_keys=True)
    ):
        return None
    shards = [s for split in manifest.splits.values() for s in split]
    check = ShardCheck(store)
    return manifest if all(check(s) for s in shards) else None


class ShardCheck:
    """Does a shard in the directory still hold the bytes recorded for it? Locally: its size and sha256.
    On an object store: its size and the version tag the journal recorded after the upload (one listing
    of the store for all of them), else its sha256 read back."""

    def __init__(self, store: Storage) -> None:
        self.store = store
        self.listing = None if store.is_local else store.listing()
        self.stamps: dict[str, str] = {}
        if not store.is_local:
            for line in store.read_lines(JOURNAL_PATH):
                try:
                    self.stamps.update(JobResult.from_json(line).stamps)
                except (ValueError, RecursionError, KeyError, TypeError):
                    continue

    def __call__(self, shard: ShardInfo, stamps: dict[str, str] | None = None) -> bool:
        store = self.store
        if store.is_local:
            path = store.local_path(shard.path)
            return path.is_file() and path.stat().st_size == shard.bytes and sha256_file(path) == shard.sha256
        size, stamp = self.listing.get(shard.path, (None, None))
        if size != shard.bytes:
            return False
        recorded = (stamps or {}).get(shard.path) or self.stamps.get(shard.path)
        return (recorded is not None and recorded == stamp) or store.sha256(shard.path) == shard.sha256


def verified_journal(directory: Storage, keys: set[str], journal: str = JOURNAL_PATH) -> dict[str, JobResult]:
    """Jobs of this plan that a previous run finished and whose shards are intact (torn lines ignored)."""
    lines = directory.read_lines(journal)
    if not lines:
        return {}
    check = ShardCheck(directory)
    kept: dict[str, JobResult] = {}
    for line in lines:
        try:
            result = JobResult.from_json(line)
        except (ValueError, RecursionError, KeyError, TypeError):
            continue
        if result.key in keys and all(check(s, result.stamps) for s in result.shards):
            kept[result.key] = result
    return kept


def execute_job(
    run_job: RunJob, directory: Storage, fmt: str, token_dtype: str | None, job: Job
) -> JobResult:
    """Run one job (in this process or a worker); every writer it opened must have finished."""
    output = ShardOutput(directory, fmt, token_dtype)
    try:
        stats = run_job(job, output) or {}
    except OSError as error:  # a full disk or a file size limit: name the shard being written
        where = directory.location(output.writers[-1].relpath) if output.writers else directory
        raise BuildError(f"{where}: cannot write ({error.strerror or error})") from None
    except LtsgenError:
        raise
    except Exception as error:  # a bug: its traceback, and the job it happened in
        error.add_note(f"while running job {job.key}")
        raise
    unfinished = [w.relpath for w in output.writers if w.info is None]
    if unfinished:
        raise BuildError(f"job {job.key}: shard writers not closed: {unfinished}")
    stamps = {} if directory.is_local else {w.relpath: directory.stamp(w.relpath) for w in output.writers}
    return JobResult(job.key, [w.info for w in output.writers], stats, {k: v for k, v in stamps.items() if v})


def _run_jobs(spec: BuildSpec, directory: Storage, todo: list[Job], engine: Engine, progress: bool):
    """Yield results of ``todo`` as the engine finishes them, journaling each one, with a progress bar."""
    from tqdm import tqdm

    weights = {job.key: job.weight for job in spec.jobs}
    words = 0
    started = time.perf_counter()
    if len(todo) <= 1 and not isinstance(engine, RayEngine):
        engine = SerialEngine()  # one job: not worth starting worker processes for
    run = partial(execute_job, spec.run_job, directory, spec.fmt, spec.token_dtype)
    end_torn_line(directory, JOURNAL_PATH)
    with tqdm(
        total=sum(weights.values()),
        initial=sum(weights.values()) - sum(job.weight for job in todo),
        unit=f" {spec.unit}",
        disable=not progress,
        dynamic_ncols=True,
    ) as bar:
        for result in engine.map(run, todo):
            directory.append_line(JOURNAL_PATH, result.to_json())
            words += sum(s.words for s in result.shards)
            bar.set_postfix_str(
                f"{words / max(time.perf_counter() - started, 1e-9):,.0f} words/s", refresh=False
            )
            bar.update(weights[result.key])
            yield result


def end_torn_line(store: Storage, relpath: str) -> None:
    """End a local log's last line when a kill or a full disk cut it, so that the next line reads."""
    if not (store.is_local and store.is_file(relpath)):
        return
    path = store.local_path(relpath)
    with open(path, "rb") as log:
        log.seek(max(path.stat().st_size - 1, 0))
        torn = log.read(1) not in (b"", b"\n")
    if torn:
        store.append_line(relpath, "")


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
