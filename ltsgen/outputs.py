"""What a build keeps in its directory and which files there are its own.

A build's state lives in ``DIR/.ltsgen/``: ``build.json`` (the builder's identity and arguments), the journal
``journal.jsonl`` (one ``JobResult`` line per finished job), ``tokens.jsonl`` (the same for the token shards
that attaching a tokenizer writes), ``writing.jsonl`` (each shard announced before it is published), the lock,
and ``outputs.json``, the record of the files other than shards that builds wrote beside them (card, plots,
tokenizer) with their sha256.
``written_files`` and ``remove_build`` read these to remove what an earlier build wrote and nothing else;
``expect_outputs`` (before the files are published), ``record_outputs`` (after) and ``output_state`` let
the card and the tokenizer writers tell their own files from a user's, a run killed between the two
included. The build driver (``ltsgen.build``) and the card writer (``ltsgen.card``) both import this module,
which imports neither.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ltsgen.loaders.contract import CARD_NAME, MANIFEST_NAME, TOKENIZER_NAME, ShardInfo, read_manifest
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.files import temporaries_of
from ltsgen.loaders.storage import Storage, StorageError, as_storage

STATE_DIR = ".ltsgen"
STATE_NAME = "build.json"
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
OUTPUTS_NAME = "outputs.json"  # files other than shards that builds wrote here: relative path -> sha256
# (a list of them while a file is being replaced, ``{"pending": [...]}`` while first written: ``expect_outputs``)
STATE_PATH = f"{STATE_DIR}/{STATE_NAME}"
JOURNAL_PATH = f"{STATE_DIR}/{JOURNAL_NAME}"
TOKENS_JOURNAL_PATH = f"{STATE_DIR}/tokens.jsonl"  # the token shards `ltsgen tokenizer --data` finished
WRITING_PATH = f"{STATE_DIR}/writing.jsonl"  # each shard a build or an attach is about to publish
LOCK_PATH = f"{STATE_DIR}/{LOCK_NAME}"
OUTPUTS_PATH = f"{STATE_DIR}/{OUTPUTS_NAME}"
# the data card and its length histograms (``ltsgen.card``)
WORDS_PLOT = "length_histogram.png"
TOKENS_PLOT = "token_length_histogram.png"
CARD_FILES = (CARD_NAME, WORDS_PLOT, TOKENS_PLOT)
# What builds made before OUTPUTS_NAME existed wrote beside their shards (a directory with a manifest and no
# record): the card, its plots and the tokenizer.
LEGACY_OUTPUTS = (*CARD_FILES, TOKENIZER_NAME)
# the temporary file of an atomic write (``.<final name>.<random>.tmp``) of a file that a build writes
TEMPORARY = temporaries_of(
    [r"shard-\d+\.(?:tar|parquet|jsonl\.zst)", r"manifest\.json", r"README\.md", r"tokenizer\.json",
     r"tokenizer_config\.json", r"special_tokens_map\.json", r"\w+_histogram\.png"]
)  # fmt: skip


@dataclass
class JobResult:
    """What a finished job left behind: its shards, the JSON statistics its ``run_job`` returned, and (on
    an object store) each shard's version tag as the store gave it just after the upload."""

    key: str
    shards: list[ShardInfo]
    stats: dict[str, Any] = field(default_factory=dict)
    stamps: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        shards = [{k: v for k, v in vars(s).items() if v is not None} for s in self.shards]
        line = {"job": self.key, "shards": shards, "stats": self.stats}
        if self.stamps:
            line["stamps"] = self.stamps
        return json.dumps(line, sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> JobResult:
        data = json.loads(line)
        shards = [ShardInfo.from_dict(s) for s in data["shards"]]
        return cls(data["job"], shards, data.get("stats") or {}, data.get("stamps") or {})


def _read_outputs(store: Storage) -> dict[str, str] | None:
    """The recorded outputs (relative path -> sha256), or None where no record was kept."""
    if not store.is_file(OUTPUTS_PATH):
        return None
    try:
        outputs = json.loads(store.read_text(OUTPUTS_PATH))
    except (StorageError, ValueError):
        return None
    return outputs if isinstance(outputs, dict) else None


def write_outputs(store: Storage, outputs: dict[str, str]) -> None:
    """Replace the record of outputs (a build starts it empty)."""
    store.write_bytes(OUTPUTS_PATH, (json.dumps(outputs, sort_keys=True, indent=2) + "\n").encode())


def expect_outputs(directory: Path | str | Storage, contents: dict[str, bytes]) -> None:
    """Before the files ``contents`` names are published: record the sha256 each will have, beside the one
    recorded before, so that a run killed between a publish and ``record_outputs`` leaves files still
    known as ltsgen's, the old or the new (a rerun then replaces them, and ``--overwrite`` removes them).
    A name ltsgen never wrote is recorded as pending: a file of other bytes there stays the user's. Only
    where the directory has ``.ltsgen/``."""
    store = as_storage(directory)
    if not store.exists(STATE_DIR):
        return
    outputs = _read_outputs(store) or {}
    for name, data in contents.items():
        digests, written = _recorded(outputs.get(name))
        digests = sorted({*digests, hashlib.sha256(data).hexdigest()})
        outputs[name] = digests if written else {"pending": digests}
    write_outputs(store, outputs)


def _recorded(recorded: Any) -> tuple[list[str], bool]:
    """(the sha256 a recorded output may have, whether ltsgen ever wrote it): one digest once written, a
    list of them (the old and the new) while it is replaced, ``{"pending": [...]}`` while first written."""
    if isinstance(recorded, str):
        return [recorded], True
    if isinstance(recorded, list):
        digests, written = recorded, True
    elif isinstance(recorded, dict) and isinstance(recorded.get("pending"), list):
        digests, written = recorded["pending"], False
    else:  # not a record ltsgen writes
        return [], False
    return [digest for digest in digests if isinstance(digest, str)], written


def record_outputs(directory: Path | str | Storage, names: Iterable[str]) -> None:
    """Record the files ``names`` (relative paths, not shards) as written by ltsgen, with their sha256, so
    that ``--overwrite`` removes them and ``ltsgen card`` can tell hand edits. Only where the directory has
    ``.ltsgen/`` (a build's); elsewhere nothing is recorded."""
    store = as_storage(directory)
    if not store.exists(STATE_DIR):
        return
    outputs = _read_outputs(store) or {}
    outputs.update({name: store.sha256(name) for name in names})
    write_outputs(store, outputs)


def output_state(directory: Path | str | Storage, name: str) -> str:
    """Whose ``DIR/name`` is: ``"absent"``, ``"ltsgen"`` (as ltsgen wrote it), ``"changed"`` (ltsgen
    wrote it, and it was edited since) or ``"other"`` (ltsgen did not write it)."""
    store = as_storage(directory)
    if not store.is_file(name):
        return "absent"
    outputs = _read_outputs(store)
    if outputs is None:  # a build made before records were kept, or no build at all
        legacy = name in LEGACY_OUTPUTS and store.is_file(MANIFEST_NAME)
        return "ltsgen" if legacy else "other"
    if name not in outputs:
        return "other"
    digests, written = _recorded(outputs[name])
    if store.sha256(name) in digests:
        return "ltsgen"
    return "changed" if written else "other"


def _inside(relpath: Any) -> bool:
    """A relative path that stays inside its directory (manifests and journals are data, not trusted)."""
    if not isinstance(relpath, str) or not relpath or relpath.startswith("/") or "\\" in relpath:
        return False
    return ".." not in relpath.split("/")


def written_files(directory: Path | str | Storage) -> set[str]:
    """The files (relative paths, outside ``.ltsgen/``) that earlier ltsgen builds wrote in the directory:
    the manifest and the shards it and the journal name, whatever they hold now, and the recorded outputs
    (card, plots, tokenizer) that are still as written."""
    store = as_storage(directory)
    present = store.files()
    written: set[str] = set()
    if MANIFEST_NAME in present:
        try:
            manifest = read_manifest(store)
        except LoaderError:
            manifest = None
        if manifest is not None:
            written.add(MANIFEST_NAME)
            written.update(shard.path for shards in manifest.splits.values() for shard in shards)
            token_shards = (manifest.tokenizer or {}).get("shards") or {}
            written.update(entry["path"] for entry in token_shards.values())
    written.update(logged_files(store, JOURNAL_PATH, TOKENS_JOURNAL_PATH, WRITING_PATH))
    outputs = _read_outputs(store)
    for name in LEGACY_OUTPUTS if outputs is None else outputs:
        if name in present and output_state(store, name) == "ltsgen":
            written.add(name)
    return {name for name in written if _inside(name) and name in present}


def announce(directory: Path | str | Storage, relpath: str) -> None:
    """Record in ``WRITING_PATH`` that a shard is about to be published at ``relpath``, before it is: a run
    killed between the publish and the journal line of its finished job (a job that writes several shards
    publishes each as it ends) left a file that is still known as ltsgen's, which ``--overwrite`` removes
    and a rerun replaces. Workers append to it concurrently (a local log's line is one small append; an
    object store keeps one object per line). Cleared once a manifest names every shard."""
    as_storage(directory).append_line(WRITING_PATH, json.dumps({"writing": relpath}))


def logged_files(store: Storage, *logs: str) -> set[str]:
    """The files the lines of ``logs`` (journals, ``WRITING_PATH``) name."""
    return {path for log in logs for line in store.read_lines(log) for path in _journaled_files(line)}


def _journaled_files(line: str) -> list[Any]:
    """The files a journal line names: a finished job's shards, or the file an ``announce`` line names
    (none for a torn or foreign line)."""
    try:
        data = json.loads(line)
        if isinstance(data, dict) and "writing" in data:
            return [data["writing"]]
        return [shard.path for shard in JobResult.from_json(line).shards]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


def foreign_files(directory: Path | str | Storage) -> Iterator[str]:
    """Files (relative paths) in the directory that no ltsgen build wrote: a new build keeps them."""
    store = as_storage(directory)
    written = written_files(store)
    for relpath in store.files():
        name = relpath.rsplit("/", 1)[-1]
        if relpath.split("/")[0] != STATE_DIR and relpath not in written and not TEMPORARY.match(name):
            yield relpath


def temporary_files(directory: Path | str | Storage) -> list[str]:
    """The temporary files that a killed build left (only the names ltsgen's writers use; an object store has
    none: it never sees an unfinished file)."""
    store = as_storage(directory)
    if not store.is_local:
        return []
    return [
        relpath
        for relpath in store.files()
        if relpath.split("/")[0] != STATE_DIR and TEMPORARY.match(relpath.rsplit("/", 1)[-1])
    ]


def remove_temporary_files(directory: Path | str | Storage) -> None:
    """Remove ``temporary_files``."""
    store = as_storage(directory)
    for relpath in temporary_files(store):
        store.remove(relpath)


def remove_build(directory: Path | str | Storage) -> None:
    """Remove what earlier builds wrote in the directory (``written_files``, their temporary files and
    ``.ltsgen/`` but its lock), and the folders that this leaves empty; nothing else."""
    store = as_storage(directory)
    written = written_files(store)
    outputs = _read_outputs(store)
    # the files first, the manifest (which names the shards) last of them, then the records: a run killed
    # part way leaves every file still named as ltsgen's, and the next removes the rest
    for relpath in sorted(written, key=lambda relpath: relpath == MANIFEST_NAME):
        store.remove(relpath)
    kept = {name: sha for name, sha in (outputs or {}).items() if store.is_file(name)}
    if kept:  # files ltsgen wrote that were edited since stay, and stay known as such
        write_outputs(store, kept)
    state = [relpath for relpath in store.files(STATE_DIR) if relpath != LOCK_PATH]
    for relpath in sorted(state, key=lambda relpath: relpath == STATE_PATH):  # the builder's identity last
        if not (kept and relpath == OUTPUTS_PATH):
            store.remove(relpath)
    remove_temporary_files(store)
    remove_emptied_folders(store, written)


def remove_emptied_folders(directory: Path | str | Storage, removed: Iterable[str]) -> None:
    """Remove the folders of the files ``removed`` (relative paths) that their removal left empty; a folder
    that still holds anything stays (object stores have no folders to leave empty)."""
    store = as_storage(directory)
    if not store.is_local:
        return
    root = store.local_path()
    emptied = {parent for relpath in removed for parent in Path(relpath).parents if parent != Path(".")}
    for folder in sorted(emptied, key=lambda p: len(p.parts), reverse=True):
        path = root / folder  # never through a symlink, nor a symlink itself: nothing outside the folder goes
        inside = not store.leads_out(folder.as_posix()) and not path.is_symlink()
        if inside and path.is_dir() and not any(path.iterdir()):
            path.rmdir()
