"""The ``ltsgen buckets`` build: read, clean, tokenize, deduplicate, hold out evaluation sets, bucket, write.

Two passes, both resumable and independent of the worker count:

1. *Tokenize*: the main process streams documents from the readers and cuts them into chunks of about
   ``CHUNK_CHARS`` characters (a cut fixed by the input alone); a process pool tokenizes each chunk into
   ``DIR/.ltsgen/chunks/chunk-NNNNNN.arrow``, written atomically, so a rerun skips finished chunks.
   Exact duplicates (same sha1 of the text) are dropped while reading, before tokenizing.
2. *Bucket*: with every document's token count known, evaluation documents are chosen (nested, longest
   length first), the rest are split by id and bucketed by token count, and ``ltsgen.build.run_build`` writes one job per shard (journaled, verified on resume),
   then the manifest and data card. The chunk files are removed at the end.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np

from ltsgen import __version__
from ltsgen.build import (
    BuildError,
    BuildResult,
    BuildSpec,
    Job,
    ShardOutput,
    assign_split,
    build_claimed,
    chunk_by_size,
    claim,
    finished_build,
)
from ltsgen.corpora.buckets import bucket_indices, bucket_names, concat_sequences, select_eval_documents
from ltsgen.corpora.card_text import bucket_card
from ltsgen.corpora.inputs import input_size
from ltsgen.corpora.readers import (
    ReaderOptions,
    Screen,
    dataset_source,
    input_files,
    read_documents,
)
from ltsgen.corpora.spool import (
    SUMMARY_COLUMNS,
    chunk_name,
    read_chunk,
    text_digest,
    token_arrays,
    write_chunk,
)
from ltsgen.engines import Engine, SerialEngine, make_engine
from ltsgen.loaders.contract import (
    EVAL_CONCAT_SPLIT,
    EVAL_SPLIT,
    FORMATS,
    MAX_DOC_CHARS,
    TOKENIZER_NAME,
    shard_relpath,
    token_dtype,
)
from ltsgen.loaders.packing import parse_tokenizer
from ltsgen.loaders.sources import join, read_bytes
from ltsgen.loaders.storage import Storage, as_storage, is_url
from ltsgen.outputs import STATE_DIR, expect_outputs, record_outputs, remove_build
from ltsgen.tokenizer import TokenizerError, load_tokenizer, manifest_entry

CHUNK_CHARS = 1 << 19  # characters of text per tokenizing chunk (about 0.2 s of one core)
# Below this many tokens the shard-writing pass runs in the main process unless the engine's workers are
# already running: starting fresh worker processes (about 1-2 s) would cost more than it saves. The output
# is the same either way.
PARALLEL_WRITE_TOKENS = 1 << 23
SPOOL_NAME = "chunks"  # DIR/.ltsgen/chunks/: the tokenized chunks, removed once the manifest is written


@dataclass
class BucketConfig:
    """Everything that determines a bucket build's output (never the worker count)."""

    source: str
    inputs: list[str]
    out: Path | str | Storage  # a local path, a URL, or a Storage with its options
    tokenizer: str
    bucket_lengths: list[int]
    eval_lengths: list[int]
    eval_sequences: int = 100
    eval_concat: bool = False
    splits: dict[str, float] = field(
        default_factory=lambda: {"train": 0.98, "validation": 0.01, "test": 0.01}
    )
    fmt: str = "parquet"
    shard_tokens: int = 1 << 24
    seed: int = 0
    reader: ReaderOptions = field(default_factory=ReaderOptions)
    skip_bad: bool = False
    strict: bool = False
    max_doc_chars: int = MAX_DOC_CHARS

    def screen(self) -> Screen:
        """A fresh cleaning policy with its counters."""
        return Screen(skip_bad=self.skip_bad, strict=self.strict, max_chars=self.max_doc_chars)

    def command(self) -> str:
        """The ``ltsgen buckets`` command line that rebuilds this dataset (``--out DIR`` left open)."""
        inputs = " ".join(shlex.quote(name) for name in self.inputs)  # a glob stays one argument
        parts = ["ltsgen buckets", f"--source {self.source}", f"--input {inputs}"]
        parts += [
            f"--tokenizer {shlex.quote(self.tokenizer)}",
            "--out DIR",
            "--bucket-lengths " + ",".join(map(str, self.bucket_lengths)),
        ]
        if self.eval_lengths != self.bucket_lengths:
            parts.append("--eval-lengths " + ",".join(map(str, self.eval_lengths)))
        parts.append(f"--eval-sequences {self.eval_sequences}")
        parts += ["--eval-concat"] * self.eval_concat
        parts.append("--splits " + ",".join(f"{name}={fraction:g}" for name, fraction in self.splits.items()))
        parts += [f"--format {self.fmt}", f"--shard-tokens {self.shard_tokens}", f"--seed {self.seed}"]
        for option, value in self.reader.identity().items():
            if (option, value) != ("hf_split", "train"):
                parts.append(f"--{option.replace('_', '-')} {value}")
        parts += ["--skip-bad"] * self.skip_bad + ["--strict"] * self.strict
        parts.append(f"--max-doc-chars {self.max_doc_chars}")
        return " ".join(parts)

    def arguments(self) -> dict[str, Any]:
        """The builder arguments recorded in the manifest (input files with their sizes)."""
        files = (
            [{"name": name} for name in self.inputs]
            if self.source == "hf"
            else [
                {"path": str(p), "bytes": input_size(p)}
                for p in input_files(self.source, self.inputs, self.reader)
            ]
        )
        return {
            "source": self.source,
            "inputs": files,
            "bucket_lengths": self.bucket_lengths,
            "eval_lengths": self.eval_lengths,
            "eval_sequences": self.eval_sequences,
            "eval_concat": self.eval_concat,
            "splits": self.splits,
            "format": self.fmt,
            "shard_tokens": self.shard_tokens,
            "seed": self.seed,
            "reader": self.reader.identity(),
            "skip_bad": self.skip_bad,
            "strict": self.strict,
            "max_doc_chars": self.max_doc_chars,
        }


@dataclass
class BucketsResult:
    build: BuildResult
    statistics: dict[str, Any]
    tokenize_seconds: float
    tokens: int

    def summary(self, directory: Path) -> str:
        if self.build.status == "up to date":
            return self.build.summary(directory)
        cleaning = self.statistics["Cleaning"]
        rate = self.tokens / self.tokenize_seconds if self.tokenize_seconds > 0 else 0.0
        lines = [
            self.build.summary(directory),
            "  " + ", ".join(f"{key} {value:,}" for key, value in cleaning.items()),
            f"  tokenized {self.tokens:,} tokens in {self.tokenize_seconds:.1f}s ({rate:,.0f} tokens/s)",
        ]
        for row in table_rows(self.statistics["Training buckets"]):
            lines.append(
                f"  {row['bucket']:>12}: {row['documents']:>8,} documents {row['tokens']:>12,} tokens"
            )
        for row in table_rows(self.statistics.get("Evaluation sets", {"columns": [], "rows": []})):
            lines.append(
                f"  eval {row['length']:>7}: {row['sequences']:,} sequences, {row['concatenated']:,} concatenated"
            )
        return "\n".join(lines)


def build_buckets(
    config: BucketConfig,
    *,
    engine: Engine | None = None,
    workers: int = 1,
    overwrite: bool = False,
    progress: bool = True,
    card: bool = True,
) -> BucketsResult:
    """Run, resume or confirm a bucket build (see the module docstring).

    Args:
        config: what to build.
        engine: where both passes run their jobs (the caller closes it); default: ``workers`` local
            processes.
        workers: with no ``engine``: 1 runs everything in this process, more in a local process pool.
        overwrite, progress, card: as for ``ltsgen.build.run_build``.
    """
    if engine is None:
        with make_engine("local", workers) as own:
            return build_buckets(config, engine=own, overwrite=overwrite, progress=progress, card=card)
    tokenizer, tokenizer_text = _load_tokenizer(config)
    try:
        tokenizer_info = manifest_entry(tokenizer, tokenizer_text)
    except TokenizerError as error:  # no end-of-text token, say: name the file given
        raise TokenizerError(f"{config.tokenizer}: {error}") from None
    arguments = config.arguments()
    arguments["tokenizer"] = tokenizer_info["sha256"]
    builder = {"name": "ltsgen buckets", "version": __version__, "arguments": arguments}
    directory = as_storage(config.out)
    source = dataset_source(config.source, config.reader, config.inputs)
    spec = BuildSpec(
        directory=directory,
        builder=builder,
        source=source,
        fmt=config.fmt,
        splits=[],
        jobs=[],
        run_job=write_shard,
        token_dtype=token_dtype(tokenizer_info["vocab_size"]),
        tokenizer=tokenizer_info,
        buckets=bucket_names(config.bucket_lengths),
        unit="documents",
        scratch=[SPOOL_NAME],
    )
    finished = finished_build(spec, card=card)
    if finished is not None:
        return BucketsResult(finished, finished.manifest.extra.get("statistics", {}), 0.0, 0)

    with claim(directory, builder, overwrite, writes=_may_write(config)):
        if (
            not directory.is_file(TOKENIZER_NAME)
            or directory.sha256(TOKENIZER_NAME) != tokenizer_info["sha256"]
        ):
            expect_outputs(directory, {TOKENIZER_NAME: tokenizer_text})  # ltsgen's even if killed just after
            directory.write_bytes(TOKENIZER_NAME, tokenizer_text)
        record_outputs(directory, [TOKENIZER_NAME])
        spool = directory.child(f"{STATE_DIR}/{SPOOL_NAME}")
        screen = config.screen()
        engine.start()  # a Ray runtime's start-up is not the tokenizing pass's time
        started = time.perf_counter()
        chunks, tokens = tokenize_to_chunks(config, screen, spool, directory, engine, progress)
        tokenize_seconds = time.perf_counter() - started
        if chunks == 0:
            remove_build(directory)
            raise BuildError(screen.nothing_kept(" ".join(config.inputs), "build from"))
        plan = plan_shards(config, spool, chunks, tokenizer_info["eos_id"], directory, source, screen)
        spec = replace(spec, splits=plan.splits, jobs=plan.jobs, finalize=lambda results: plan.extra)
        writer = engine if engine.started or tokens >= PARALLEL_WRITE_TOKENS else SerialEngine()
        result = build_claimed(spec, engine=writer, progress=progress, card=card)
    if not any(result.manifest.splits.get(split) for split in config.splits):
        result.notes.append(
            f"every document went to the evaluation sets ({config.eval_sequences} per length asked): "
            f"{', '.join(config.splits)} are empty; a smaller --eval-sequences keeps documents to train on"
        )
    chosen_per_length = result.manifest.extra.get("eval", {}).get("documents", {})
    held_out = len({document for chosen in chosen_per_length.values() for document in chosen})
    left = sum(shard.samples for split in config.splits for shard in result.manifest.splits.get(split, []))
    if 0 < left < held_out:  # the evaluation sets come first: a small corpus is mostly held out
        result.notes.append(
            f"the evaluation sets hold {held_out:,} documents, more than the {left:,} left to "
            f"{', '.join(config.splits)}; a smaller --eval-sequences ({config.eval_sequences} per length) "
            "keeps more to train on"
        )
    unreached = [length for length, chosen in chosen_per_length.items() if not chosen]
    if config.eval_sequences and unreached:
        concat = (
            " (its eval_concat set, of held-out documents run together, is built)"
            if config.eval_concat
            else ""
        )
        result.notes.append(
            f"no document reaches {', '.join(unreached)} tokens: no evaluation set of documents of that "
            f"length{concat} (lower --eval-lengths, or add longer documents)"
        )
    return BucketsResult(result, plan.extra["statistics"], tokenize_seconds, tokens)


def _may_write(config: BucketConfig) -> Callable[[str], bool]:
    """Whether the build of ``config`` may write ``DIR/relpath``: its tokenizer, or a shard in one of its
    split and bucket folders (how many shards each gets is known only after tokenizing)."""
    buckets = bucket_names(config.bucket_lengths)
    folders = {f"{split}/{bucket}" for split in config.splits for bucket in buckets}
    folders |= {
        f"{split}/{length}" for split in (EVAL_SPLIT, EVAL_CONCAT_SPLIT) for length in config.eval_lengths
    }
    shard = re.compile(r"shard-\d{5,}\." + re.escape(FORMATS[config.fmt]))

    def may_write(relpath: str) -> bool:
        folder, _, name = relpath.rpartition("/")
        return relpath == TOKENIZER_NAME or (folder in folders and shard.fullmatch(name) is not None)

    return may_write


def _load_tokenizer(config: BucketConfig):
    """``--tokenizer`` and the exact bytes the build keeps as ``DIR/tokenizer.json``: a file or a folder
    holding one, local or at a URL (read with the inputs' storage options), or a Hugging Face Hub name."""
    name = config.tokenizer
    if is_url(name):
        where = name if name.endswith(".json") else join(name, TOKENIZER_NAME)
        text = read_bytes(where, storage_options=config.reader.storage_options)
        return parse_tokenizer(text, where), text
    tokenizer = load_tokenizer(name)
    path = Path(name)
    path = path / TOKENIZER_NAME if path.is_dir() else path
    return tokenizer, path.read_bytes() if path.is_file() else tokenizer.to_str().encode("utf-8")


# ---------------------------------------------------------------- pass 1: tokenize


def _tokenize_chunk(
    directory: Storage, spool: Storage, job: tuple[int, list[tuple[str, dict[str, Any], str, str]]]
) -> tuple[int, int]:
    """One pass-1 job (in this process or an engine's worker): tokenize a chunk and publish its file."""
    index, documents = job
    return write_chunk(spool, index, _tokenizer(directory), documents)


def _chunks(config: BucketConfig, screen: Screen) -> Iterator[list[tuple[str, dict[str, Any], str, str]]]:
    """The distinct input documents cut into consecutive chunks of about CHUNK_CHARS characters."""
    chunk: list[tuple[str, dict[str, Any], str, str]] = []
    size = 0
    seen: set[str] = set()
    for document in read_documents(config.source, config.inputs, config.reader, screen):
        digest = text_digest(document.text)
        if digest in seen:
            screen.counts["duplicates removed"] += 1
            continue
        seen.add(digest)
        chunk.append((document.text, document.meta, document.source, digest))
        size += len(document.text)
        if size >= CHUNK_CHARS:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def tokenize_to_chunks(
    config: BucketConfig, screen: Screen, spool: Storage, directory: Storage, engine: Engine, progress: bool
) -> tuple[int, int]:
    """Pass 1: tokenize (with ``directory``'s tokenizer) every chunk not already in ``spool``, on
    ``engine``; return (chunks, tokens)."""
    from tqdm import tqdm

    bar = tqdm(unit=" docs", disable=not progress, dynamic_ncols=True, desc="tokenizing")
    started = time.perf_counter()
    tokens = 0
    count = 0
    existing = set(spool.files())

    def done(documents: int, chunk_tokens: int) -> None:
        nonlocal tokens
        tokens += chunk_tokens
        bar.set_postfix_str(
            f"{tokens / max(time.perf_counter() - started, 1e-9):,.0f} tokens/s", refresh=False
        )
        bar.update(documents)

    def jobs() -> Iterator[tuple[int, list[tuple[str, dict[str, Any], str, str]]]]:
        nonlocal count
        for index, documents in enumerate(_chunks(config, screen)):
            count = index + 1
            if chunk_name(index) in existing:  # tokenized by an earlier run
                counts = read_chunk(spool, index, ["num_tokens"]).column(0).to_numpy()
                done(len(documents), int(np.sum(counts)))
            else:
                yield index, documents

    with bar:
        for documents, chunk_tokens in engine.map(partial(_tokenize_chunk, directory, spool), jobs()):
            done(documents, chunk_tokens)
    return count, tokens


# ---------------------------------------------------------------- pass 2: plan and write shards


@dataclass
class ShardPlan:
    splits: list[str]
    jobs: list[Job]
    extra: dict[str, Any]


def plan_shards(
    config: BucketConfig,
    spool: Storage,
    chunks: int,
    eos: int,
    directory: Storage,
    source: str,
    screen: Screen,
) -> ShardPlan:
    """Choose evaluation documents, assign splits and buckets, and cut shards (documents are distinct)."""
    ids, sources, num_tokens, refs = _spooled_documents(spool, chunks)
    eval_sets = select_eval_documents(
        ids, num_tokens, config.eval_lengths, config.eval_sequences, config.seed
    )
    held_out = sorted({document for chosen in eval_sets.values() for document in chosen})
    buckets = bucket_indices(num_tokens, config.bucket_lengths)
    training = np.ones(len(ids), bool)
    training[held_out] = False
    groups: dict[tuple[str, int], list[int]] = {}
    for document in np.flatnonzero(training).tolist():
        split = assign_split(ids[document], config.splits)
        groups.setdefault((split, int(buckets[document])), []).append(document)

    common = {"eos": eos, "directory": directory, "spool": spool, "source": source}
    jobs = _training_jobs(config, groups, num_tokens, refs, common)
    jobs += _eval_jobs(config, eval_sets, refs, common)
    concat_counts: dict[int, int] = {}
    if config.eval_concat and held_out:
        stream_tokens = int(num_tokens[held_out].sum()) + len(held_out)
        held = refs[held_out]
        for length in eval_sets:
            concat_counts[length] = min(config.eval_sequences, stream_tokens // length)
            per_shard = max(1, config.shard_tokens // length)  # as the eval/<L> shards are cut
            for number, first in enumerate(range(0, concat_counts[length], per_shard)):
                job = _job(config.fmt, EVAL_CONCAT_SPLIT, str(length), number, "concat", held, length, common)
                job.payload["first"] = first
                job.payload["count"] = min(per_shard, concat_counts[length] - first)
                jobs.append(job)

    splits = list(config.splits) + [EVAL_SPLIT] * bool(eval_sets) + [EVAL_CONCAT_SPLIT] * bool(concat_counts)
    statistics = {
        "Cleaning": {
            "documents read": len(ids) + sum(screen.counts.values()),
            **dict(sorted(screen.counts.items())),
            "evaluation documents": len(held_out),
            "training documents": int(training.sum()),
        },
        **_bucket_tables(config, groups, sources, num_tokens, buckets, training),
    }
    if eval_sets:
        statistics["Evaluation sets"] = _table(
            {"length": length, "sequences": len(chosen), "concatenated": concat_counts.get(length, 0)}
            for length, chosen in eval_sets.items()
        )
    card = bucket_card(config.source, source, config.command(), config.bucket_lengths, sorted(eval_sets))
    extra = {
        "card": card,
        "statistics": statistics,
        "eval": {
            "lengths": sorted(eval_sets),
            "sequences": config.eval_sequences,
            "concat": config.eval_concat,
            "seed": config.seed,
            "documents": {str(length): [ids[d] for d in chosen] for length, chosen in eval_sets.items()},
        },
    }
    return ShardPlan(splits, jobs, extra)


def _spooled_documents(spool: Storage, chunks: int):
    """(ids, sources, token counts, (chunk, row) references) of the spooled documents, in chunk order."""
    tables = [read_chunk(spool, index, SUMMARY_COLUMNS) for index in range(chunks)]
    ids = [value for table in tables for value in table.column("id").to_pylist()]
    sources = [value for table in tables for value in table.column("source").to_pylist()]
    num_tokens = np.concatenate([t.column("num_tokens").to_numpy() for t in tables] + [np.zeros(0, np.int64)])
    refs = np.concatenate(
        [np.stack([np.full(t.num_rows, i), np.arange(t.num_rows)], axis=1) for i, t in enumerate(tables)]
        + [np.zeros((0, 2), np.int64)]
    )
    if len(set(ids)) != len(ids):
        raise BuildError("two different documents share a 64-bit id (sha1 prefix); please report this input")
    return ids, sources, num_tokens, refs


def _training_jobs(
    config: BucketConfig,
    groups: dict[tuple[str, int], list[int]],
    num_tokens: np.ndarray,
    refs: np.ndarray,
    common: dict[str, Any],
) -> list[Job]:
    """The training shards: each (split, bucket) group's documents cut at ``config.shard_tokens``."""

    def size(document: int) -> int:
        return int(num_tokens[document])

    jobs: list[Job] = []
    for split in config.splits:
        for index, name in enumerate(bucket_names(config.bucket_lengths)):
            for number, shard in enumerate(
                chunk_by_size(groups.get((split, index), []), size, config.shard_tokens)
            ):
                jobs.append(_job(config.fmt, split, name, number, "train", refs[shard], 0, common))
    return jobs


def _eval_jobs(
    config: BucketConfig, eval_sets: dict[int, list[int]], refs: np.ndarray, common: dict[str, Any]
) -> list[Job]:
    """The exact-length evaluation shards: each length's documents, ``config.shard_tokens // length`` a
    shard."""
    jobs: list[Job] = []
    for length, chosen in eval_sets.items():
        per_shard = max(1, config.shard_tokens // length)
        for number, start in enumerate(range(0, len(chosen), per_shard)):
            shard = chosen[start : start + per_shard]
            jobs.append(
                _job(config.fmt, EVAL_SPLIT, str(length), number, "eval", refs[shard], length, common)
            )
    return jobs


def _bucket_tables(
    config: BucketConfig,
    groups: dict[tuple[str, int], list[int]],
    sources: list[str],
    num_tokens: np.ndarray,
    buckets: np.ndarray,
    training: np.ndarray,
) -> dict[str, dict[str, list]]:
    """The card's tables of training documents per bucket and split, and of all documents by source."""
    names = bucket_names(config.bucket_lengths)
    return {
        "Training buckets": _table(
            {
                "bucket": name,
                "documents": int(np.sum(training & (buckets == index))),
                "tokens": int(num_tokens[training & (buckets == index)].sum()),
                **{split: len(groups.get((split, index), [])) for split in config.splits},
            }
            for index, name in enumerate(names)
        ),
        "Token lengths by source (documents per bucket, evaluation documents included)": _table(
            {"bucket": name, **_count(sources, np.flatnonzero(buckets == index), sorted(set(sources)))}
            for index, name in enumerate(names)
        ),
    }


def _table(rows: Iterable[dict[str, Any]]) -> dict[str, list]:
    """Rows as the card's ordered table form ``{"columns", "rows"}`` (the manifest sorts dict keys)."""
    rows = list(rows)
    columns = list(rows[0]) if rows else []
    return {"columns": columns, "rows": [[row[c] for c in columns] for row in rows]}


def table_rows(table: dict[str, list]) -> list[dict[str, Any]]:
    """The rows of a ``{"columns", "rows"}`` table as dicts."""
    return [dict(zip(table["columns"], row, strict=True)) for row in table["rows"]]


def _count(values: list[str], positions: np.ndarray, keys: list[str]) -> dict[str, int]:
    counts = Counter(values[p] for p in positions.tolist())
    return {key: counts[key] for key in keys}


def _job(fmt: str, split: str, bucket: str, number: int, kind: str, refs, length: int, common) -> Job:
    relpath = shard_relpath(split, number, fmt, bucket)
    payload = {"kind": kind, "relpath": relpath, "refs": refs, "length": length, **common}
    return Job(key=relpath, payload=payload, weight=len(refs), shards=(relpath,))


@lru_cache(maxsize=16)
def _cached_chunk(spool: Storage, index: int, version: Any):
    """Chunks stay open (memory-mapped locally) across the shard jobs of one process; ``version`` (the
    local file's inode, mtime and size, or the store's version tag) tells a rewritten file from the one
    cached."""
    return read_chunk(spool, index)


def _chunk_version(spool: Storage, index: int) -> Any:
    if spool.is_local:
        status = spool.local_path(chunk_name(index)).stat()
        return status.st_ino, status.st_mtime_ns, status.st_size
    return spool.stamp(chunk_name(index))


@lru_cache(maxsize=4)
def _tokenizer(directory: Storage):
    """The build's ``DIR/tokenizer.json``, loaded once per process."""
    return parse_tokenizer(directory.read_text(TOKENIZER_NAME), directory.location(TOKENIZER_NAME))


def _rows(spool: Storage, refs: np.ndarray) -> Iterator[tuple[str, str, str, dict[str, Any], np.ndarray]]:
    """``(id, text, source, meta, input_ids)`` of the referenced chunk rows, in ``refs`` order."""
    start = 0
    while start < len(refs):
        chunk = int(refs[start, 0])
        stop = start
        while stop < len(refs) and refs[stop, 0] == chunk:
            stop += 1
        table = _cached_chunk(spool, chunk, _chunk_version(spool, chunk))
        table = table.take(refs[start:stop, 1])
        values, offsets = token_arrays(table)
        columns = [table.column(name).to_pylist() for name in ("id", "text", "source", "meta")]
        for i, (key, text, source, meta) in enumerate(zip(*columns, strict=True)):
            yield key, text, source, json.loads(meta), values[offsets[i] : offsets[i + 1]]
        start = stop


def write_shard(job: Job, output: ShardOutput) -> dict[str, Any]:
    """Run one shard job of the plan (in the main process or a build worker)."""
    payload = job.payload
    spool, kind, length = payload["spool"], payload["kind"], payload["length"]
    with output.open(payload["relpath"]) as writer:
        if kind == "train":
            for key, text, source, meta, ids in _rows(spool, payload["refs"]):
                writer.write({"id": key, "text": text, "source": source, "meta": meta, "input_ids": ids})
        elif kind == "eval":
            decoder = _tokenizer(payload["directory"])
            for key, _, source, meta, ids in _rows(spool, payload["refs"]):
                prefix = ids[:length]
                meta = {**meta, "document_id": key, "document_tokens": int(ids.size)}
                text = decoder.decode(prefix.tolist(), skip_special_tokens=False)
                writer.write(
                    {
                        "id": f"{key}-{length}",
                        "text": text,
                        "source": source,
                        "meta": meta,
                        "input_ids": prefix,
                    }
                )
        else:
            decoder = _tokenizer(payload["directory"])
            rows = list(_rows(spool, payload["refs"]))
            starts = np.cumsum([0] + [ids.size + 1 for *_, ids in rows])
            first, count = payload["first"], payload["count"]
            windows = concat_sequences([ids for *_, ids in rows], payload["eos"], length, first + count)
            for number, (offset, ids) in enumerate(windows[first:], first):
                opening = int(np.searchsorted(starts, offset, side="right")) - 1
                closing = int(np.searchsorted(starts, offset + length, side="left"))
                meta = {"offset": offset, "documents": [rows[d][0] for d in range(opening, closing)]}
                text = decoder.decode(ids.tolist(), skip_special_tokens=False)
                writer.write(
                    {
                        "id": f"concat-{length}-{number:06d}",
                        "text": text,
                        "source": payload["source"],
                        "meta": meta,
                        "input_ids": ids,
                    }
                )
    return {}
