"""What the trainer reads: the run's tokenizer, packed training batches, and evaluation sets that hold the
same documents at every length.

Every dataset access goes through ``ltsgen.loaders`` (manifest, shards, exact-length sets), so a dataset
may be a local folder or any URL the loaders read.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from ltsgen.errors import first_line
from ltsgen.loaders.buckets import eval_records
from ltsgen.loaders.contract import (
    EVAL_CONCAT_SPLIT,
    EVAL_SPLIT,
    MANIFEST_NAME,
    TEST_SPLIT,
    TOKENIZER_NAME,
    TRAIN_SPLIT,
    VALIDATION_SPLIT,
    Manifest,
    parse_manifest,
)
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.files import atomic_path, sha256_file
from ltsgen.loaders.packing import parse_tokenizer
from ltsgen.loaders.sources import join, located, read_bytes
from ltsgen.training.errors import TrainingError
from ltsgen.training.recall import (
    DocumentRecalls,
    RecallSet,
    document_recalls,
    recall_set,
    value_pool,
)

HELD_OUT_SPLITS = (VALIDATION_SPLIT, TEST_SPLIT)
TOKENIZER_TRAINING_CHARS = 50_000_000  # enough text for a small BPE; bounds the time spent training one
#: An evaluation needs at least this fraction of the asked documents at its longest length (fewer: an error;
#: between this and all of them: it goes on with those it has and says so).
MIN_EVAL_FRACTION = 0.5

#: Trains a tokenizer: ``(texts, vocab_size) -> tokenizers.Tokenizer``; ``ltsgen.tokenizer.train_tokenizer``.
TokenizerTrainer = Callable[[Iterable[str], int], Tokenizer]


def open_manifest(data_dir: str | Path) -> Manifest:
    """The manifest of a dataset directory or URL, read through the loaders."""
    where = join(str(data_dir), MANIFEST_NAME)
    return parse_manifest(read_bytes(where), where)


def training_data(data: str | Path) -> str | dict[str, float]:
    """What ``--data`` trains on: one dataset, or a mixture ``{source: weight}`` (``PATH=WEIGHT,...``)."""
    from ltsgen.loaders.mixture import parse_mixture

    return parse_mixture(str(data))


def first_source(data: str | Path) -> str:
    """The dataset a run takes its tokenizer and evaluation documents from: a mixture's first source."""
    sources = training_data(data)
    return next(iter(sources)) if isinstance(sources, dict) else sources


def same_setting(key: str, saved: Any, given: Any) -> bool:
    """Whether a run's or comparison's setting ``key`` is the same in ``saved`` and ``given``: ``data`` and
    ``init_from`` name the same datasets (in the same order) and run, local paths compared resolved (``lts``,
    ``lts/`` and its absolute path agree); any other setting is equal."""
    if key in ("data", "init_from") and isinstance(saved, str) and isinstance(given, str):
        return _located(key, saved) == _located(key, given)
    return saved == given


def _located(key: str, value: str) -> Any:
    sources = training_data(value) if key == "data" else value
    if isinstance(sources, dict):  # weights in any scale: lts=7,c4=3 is lts=0.7,c4=0.3
        from ltsgen.loaders.mixture import resolve_weights

        weights = resolve_weights(list(sources.values()))
        return [(located(source), weight) for source, weight in zip(sources, weights, strict=True)]
    return located(sources)


# --------------------------------------------------------------------------------------------------
# tokenizer


def read_tokenizer(path: str | Path) -> Tokenizer:
    """A ``tokenizer.json`` file, with a one-line error naming it; truncation and padding turned off."""
    try:
        raw = Path(path).read_bytes()
    except OSError as error:
        raise TrainingError(f"{path}: cannot be read ({error.strerror or first_line(error)})") from None
    return parse_tokenizer(raw, str(path))


def resolve_tokenizer(
    data_dir,
    run_dir,
    *,
    tokenizer_path=None,
    vocab_size: int = 2048,
    placement=None,
    train_tokenizer: TokenizerTrainer | None = None,
) -> tuple[Tokenizer, Path]:
    """The run's tokenizer, saved as RUN/tokenizer.json; returns ``(tokenizer, path in RUN)``.

    Taken from, in order: ``tokenizer_path`` (a file, or a folder with a tokenizer.json); the dataset's own
    ``DIR/tokenizer.json``; one kept earlier for this run (RUN/tokenizer.json); else ``train_tokenizer``
    trains one of ``vocab_size`` on the training split's text. Under torchrun only rank 0 trains or copies
    (``distributed.main_first``); the others wait and load. For a mixture the dataset is its first source,
    and every other tokenized source must match the run's tokenizer.
    """
    from ltsgen.training import distributed

    sources = training_data(data_dir)
    data_dir = first_source(data_dir)
    run_dir = Path(run_dir)
    target = run_dir / TOKENIZER_NAME
    manifest = open_manifest(data_dir)
    own = (
        join(str(data_dir), (manifest.tokenizer or {}).get("path", TOKENIZER_NAME))
        if manifest.tokenizer
        else None
    )
    if tokenizer_path is not None:  # a file, or a folder with one; checked here, not as the run's copy
        if "://" in str(tokenizer_path):  # Path() would make http://host/t.json into http:/host/t.json
            raise TrainingError(
                f"--tokenizer {tokenizer_path}: a local file or folder is read; download it first"
            )
        given = Path(tokenizer_path)
        tokenizer_path = given / TOKENIZER_NAME if given.is_dir() else given
        if not tokenizer_path.is_file():
            raise TrainingError(f"{given}: tokenizer not found")
        read_tokenizer(tokenizer_path)
    source = tokenizer_path or own
    recorded = (manifest.tokenizer or {}).get("sha256")
    if source == own and own is not None and recorded and _sha256_of(own) != recorded:
        raise TrainingError(
            f"{own}: sha256 does not match the one {join(str(data_dir), MANIFEST_NAME)} records (a changed "
            "or damaged tokenizer)"
        )
    if source is not None or target.exists():
        check_tokenizer_matches(data_dir, source or target, manifest)
    elif _tokenized(manifest):
        raise TrainingError(
            f"{join(str(data_dir), MANIFEST_NAME)}: the dataset holds token ids, and no tokenizer is given or "
            "stored with it; pass the tokenizer that made them"
        )

    def keep_in_run() -> None:  # the main rank copies, checks or trains the run's tokenizer
        run_dir.mkdir(parents=True, exist_ok=True)
        if source is not None and not target.exists():
            with atomic_path(target) as tmp:
                tmp.write_bytes(read_bytes(source))
        elif source is not None and sha256_file(target) != _sha256_of(source):
            raise TrainingError(
                f"{target}: the run has another tokenizer than {source}; a run keeps its tokenizer"
            )
        elif not target.exists():
            if train_tokenizer is None:
                raise TrainingError(
                    f"{join(str(data_dir), MANIFEST_NAME)}: no tokenizer given and none stored with the data; "
                    "pass a tokenizer.json"
                )
            tokenizer = train_tokenizer(_training_texts(data_dir, manifest), vocab_size)
            with atomic_path(target) as tmp:
                tokenizer.save(str(tmp))

    distributed.main_first(placement, keep_in_run, run_dir)
    for source in sources if isinstance(sources, dict) else []:
        check_tokenizer_matches(source, target)
    tokenizer = read_tokenizer(target)
    eos = (manifest.tokenizer or {}).get("eos_id")
    if eos is not None and eos >= tokenizer.get_vocab_size():
        raise TrainingError(
            f"{join(str(data_dir), MANIFEST_NAME)}: tokenizer.eos_id {eos} is outside the vocabulary of "
            f"{tokenizer.get_vocab_size()} tokens of {target}"
        )
    return tokenizer, target


def _sha256_of(location: str | Path) -> str:
    return hashlib.sha256(read_bytes(location)).hexdigest()


def check_tokenizer_matches(data_dir, tokenizer_path, manifest: Manifest | None = None) -> None:
    """Token ids stored in a dataset (tokenized shards, exact-length sets) only mean something with the
    tokenizer that made them: a tokenizer whose sha256 differs from the manifest's is an error, and so is a
    tokenized dataset whose manifest records no sha256 (nothing tells which tokenizer its ids belong to)."""
    manifest = manifest or open_manifest(data_dir)
    stored = manifest.tokenizer or {}
    if not _tokenized(manifest):
        return
    if not stored.get("sha256"):
        raise TrainingError(
            f"{join(str(data_dir), MANIFEST_NAME)}: the dataset holds token ids but records no tokenizer "
            f"sha256, so {tokenizer_path} cannot be checked against them; rebuild it with its tokenizer"
        )
    if stored["sha256"] != _sha256_of(tokenizer_path):
        raise TrainingError(
            f"{tokenizer_path}: {data_dir} is tokenized with another tokenizer ({stored.get('path')}, sha256 "
            f"{stored['sha256'][:12]}...); its token ids would be read as other tokens"
        )


def _tokenized(manifest: Manifest) -> bool:
    return any(shard.tokens is not None for shards in manifest.splits.values() for shard in shards)


def _training_texts(data_dir, manifest: Manifest) -> Iterator[str]:
    from ltsgen.loaders.formats import read_shard

    budget = TOKENIZER_TRAINING_CHARS
    for shard in manifest.shards(TRAIN_SPLIT):
        for record in read_shard(join(str(data_dir), shard.path), manifest.format, columns=["text"]):
            yield record["text"]
            budget -= len(record["text"])
            if budget <= 0:
                return


# --------------------------------------------------------------------------------------------------
# training batches


class TrainingBatches:
    """Endless batches ``[batch_size, seq_len + 1]`` of packed token ids for one rank, epoch after epoch.

    A thin driver of ``ltsgen.loaders.StreamingDataset`` in packing mode: documents in the seeded order of
    each epoch, packed with EOS between them (text tokenized on the fly when the dataset is not tokenized),
    rank ``r`` taking slice ``r`` of every global batch. Its state between batches is the loader's
    (seed, epoch, samples consumed), so a resumed run continues with the very next batch. ``data_dir`` may
    be a mixture ``PATH=WEIGHT,...`` (``training_data``), each source read in its own epochs.
    ``token_counts``: the file that keeps the records' token counts for text tokenized on the fly.
    """

    def __init__(
        self, data_dir, *, seq_len, batch_size, seed, tokenizer, rank=0, world_size=1, token_counts=None
    ) -> None:
        from ltsgen.loaders import StreamingDataset

        self.blocks = StreamingDataset(
            training_data(data_dir), TRAIN_SPLIT, shuffle=True, seed=seed, rank=rank, world_size=world_size,
            batch_size=batch_size, seq_len=seq_len, tokenizer=tokenizer, token_counts=token_counts,
        )  # fmt: skip
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[torch.Tensor]:
        while True:
            batch: list[torch.Tensor] = []
            for block in self.blocks:
                batch.append(block["input_ids"])
                if len(batch) == self.batch_size:
                    yield torch.stack(batch)
                    batch = []
            self.blocks.set_epoch(self.blocks.epoch + 1)

    def state_dict(self) -> dict[str, Any]:
        return self.blocks.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.blocks.load_state_dict(state)


# --------------------------------------------------------------------------------------------------
# evaluation sets


@dataclass
class EvalSet:
    """``input_ids`` [N, L]: the first L tokens of each of N documents, and their cued recalls (None when the
    documents carry none, or come from stored exact-length sets, which hold no text offsets)."""

    length: int
    input_ids: torch.Tensor
    documents: list[str]
    recalls: RecallSet | None = None


@dataclass
class EvalSets:
    """One exact-length set per evaluation length, all cut from the same documents in the same order."""

    sets: dict[int, EvalSet]
    description: str  # where the documents come from
    notice: str | None = None  # set when fewer documents than asked for reach the longest length

    @property
    def documents(self) -> list[str]:
        return next(iter(self.sets.values())).documents


def load_eval_sets(
    data_dir, lengths, tokenizer: Tokenizer, max_sequences: int, concat: bool = False
) -> EvalSets:
    """Up to ``max_sequences`` documents, the same at every length: sequence i at length L is the first L
    tokens of document i.

    From the dataset's stored exact-length sets ``DIR/eval/<L>/`` when it has one for every length (the
    documents of the longest length, found at each shorter one, as the bucket pipeline nests them);
    otherwise the first documents (in stored order) of at least ``max(lengths)`` tokens of the first held-out
    split (validation, then test) that has enough of them. With ``concat``, the bucket pipeline's
    concatenated stream ``DIR/eval_concat/<max(L)>/`` (held-out documents joined by EOS, cut into windows),
    each window cut to every length. Fewer than ``max_sequences`` documents: a notice;
    fewer than ``MIN_EVAL_FRACTION`` of them: a ``TrainingError`` naming each split and its counts. A mixture is
    evaluated on its first source.
    """
    lengths = sorted(set(lengths))
    mixed, data_dir = isinstance(training_data(data_dir), dict), first_source(data_dir)
    manifest = open_manifest(data_dir)
    stored = {shard.bucket for shard in manifest.splits.get(EVAL_SPLIT, [])}
    needed = max(1, math.ceil(max_sequences * MIN_EVAL_FRACTION))
    try:
        if concat:
            found = _concat_eval_sets(data_dir, manifest, lengths, max_sequences, needed)
        elif all(str(length) in stored for length in lengths):
            found = _stored_eval_sets(data_dir, lengths, max_sequences, needed)
        else:
            found = _held_out_eval_sets(data_dir, manifest, lengths, tokenizer, max_sequences, needed)
    except LoaderError as error:
        raise TrainingError(str(error)) from None
    if mixed:
        found.description = f"the mixture's first source {data_dir}: {found.description}"
    count = len(found.documents)
    if count < max_sequences and concat:
        found.notice = (
            f"only {count} of the {max_sequences} requested windows: the build cut {count} of {lengths[-1]} "
            f"tokens (its --eval-sequences); every length is evaluated on these {count}"
        )
    elif count < max_sequences:
        found.notice = (
            f"only {count} of the {max_sequences} requested documents reach {lengths[-1]} tokens; "
            f"every length is evaluated on these {count}"
        )
    return found


def _stored_eval_sets(data_dir, lengths: list[int], max_sequences: int, needed: int) -> EvalSets:
    rows: dict[int, dict[str, torch.Tensor]] = {}
    for length in lengths:
        rows[length] = {
            _document_id(record, length): torch.as_tensor(record["input_ids"].astype("int64"))
            for record in eval_records(str(data_dir), length, columns=("id", "input_ids", "meta"))
        }
    documents = list(rows[lengths[-1]])[:max_sequences]
    if len(documents) < needed:
        raise TrainingError(
            f"{join(str(data_dir), EVAL_SPLIT)}/{lengths[-1]}: {len(documents)} sequences of {lengths[-1]} "
            f"tokens; an evaluation needs at least {needed} (of --eval-sequences {max_sequences}): lower "
            "--eval-sequences"
        )
    sets = {}
    for length in lengths:
        missing = [document for document in documents if document not in rows[length]]
        if missing:
            raise TrainingError(
                f"{join(str(data_dir), EVAL_SPLIT)}/{length}: lacks document {missing[0]} of "
                f"{EVAL_SPLIT}/{lengths[-1]}; the exact-length sets are not nested"
            )
        sets[length] = EvalSet(length, torch.stack([rows[length][d] for d in documents]), documents)
    description = f"the stored exact-length sets {EVAL_SPLIT}/<L>: {len(documents)} documents at every length"
    return EvalSets(sets, description)


def _concat_eval_sets(data_dir, manifest, lengths: list[int], max_sequences: int, needed: int) -> EvalSets:
    """The first windows of the concatenated held-out stream at the longest length, each cut to every length
    (so the same windows are read at every length, as with documents)."""
    longest = lengths[-1]
    where = f"{join(str(data_dir), EVAL_CONCAT_SPLIT)}/{longest}"
    if not any(shard.bucket == str(longest) for shard in manifest.splits.get(EVAL_CONCAT_SPLIT, [])):
        raise TrainingError(f"{where}: not in the dataset (build it with `ltsgen buckets --eval-concat`)")
    ids, rows = [], []
    records = eval_records(str(data_dir), longest, split=EVAL_CONCAT_SPLIT, columns=("id", "input_ids"))
    for record in itertools.islice(records, max_sequences):
        ids.append(record["id"])
        rows.append(torch.as_tensor(record["input_ids"].astype("int64")))
    if len(ids) < needed:
        raise TrainingError(
            f"{where}: {len(ids)} windows of {longest} tokens; an evaluation needs at least {needed} (of "
            f"--eval-sequences {max_sequences}): lower --eval-sequences, or build with a larger --eval-sequences"
        )
    tokens = torch.stack(rows)
    sets = {length: EvalSet(length, tokens[:, :length].contiguous(), ids) for length in lengths}
    description = (
        f"the concatenated held-out stream {EVAL_CONCAT_SPLIT}/{longest}: its first {len(ids)} windows of "
        f"{longest} tokens, cut to each length"
    )
    return EvalSets(sets, description)


def _document_id(record: dict[str, Any], length: int) -> str:
    meta = record.get("meta") or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    suffix = f"-{length}"
    fallback = record["id"][: -len(suffix)] if record["id"].endswith(suffix) else record["id"]
    return str(meta.get("document_id", fallback)) if isinstance(meta, dict) else fallback


def _held_out_eval_sets(data_dir, manifest, lengths, tokenizer, max_sequences, needed) -> EvalSets:
    longest = lengths[-1]
    counts = []
    for split in HELD_OUT_SPLITS:
        if split not in manifest.splits:
            counts.append(f"{split}: not in the dataset")
            continue
        if not manifest.splits[split]:
            counts.append(f"{split}: no shards (0 documents)")
            continue
        documents, rows, records, seen = _long_documents(data_dir, split, tokenizer, longest, max_sequences)
        if len(documents) >= needed:
            recalls = _document_recalls(records, tokenizer, longest, join(str(data_dir), split))
            sets = {
                length: EvalSet(
                    length,
                    torch.stack([row[:length] for row in rows]),
                    documents,
                    None if recalls is None else recall_set(recalls, length),
                )
                for length in lengths
            }
            description = (
                f"the {split} split: the first {len(documents)} documents (in stored order) of at least "
                f"{longest} tokens, cut to each length"
            )
            return EvalSets(sets, description)
        counts.append(f"{split}: {len(documents)} of {seen} documents reach {longest} tokens")
    raise TrainingError(
        f"{join(str(data_dir), MANIFEST_NAME)}: too few held-out documents to evaluate at {longest} tokens "
        f"({'; '.join(counts)}); an evaluation needs at least {needed} (of --eval-sequences {max_sequences}): "
        "lower the longest evaluation length or --eval-sequences, or build more or longer held-out documents"
    )


def _long_documents(data_dir, split, tokenizer, length, wanted):
    """The first ``wanted`` documents of ``split`` with at least ``length`` tokens: (ids, first ``length``
    tokens, records, documents read)."""
    from ltsgen.loaders import StreamingDataset

    dataset = StreamingDataset(
        str(data_dir), split, shuffle=False, rank=0, world_size=1, columns=("id", "text", "meta")
    )
    documents, rows, records, seen = [], [], [], 0
    for record in dataset:
        seen += 1
        encoding = tokenizer.encode(record["text"], add_special_tokens=False)
        if len(encoding.ids) < length:
            continue
        documents.append(record["id"])
        rows.append(torch.tensor(encoding.ids[:length], dtype=torch.long))
        records.append(record)
        if len(documents) == wanted:
            break
    return documents, rows, records, seen


def _document_recalls(records, tokenizer: Tokenizer, length: int, where: str) -> list[DocumentRecalls] | None:
    """Each record's cued recalls within ``length`` tokens and their controls (``ltsgen.training.recall``);
    None when no record has a fact with cues."""

    def encode(text: str) -> tuple[list[int], list[tuple[int, int]]]:
        encoding = tokenizer.encode(text, add_special_tokens=False)
        return encoding.ids, encoding.offsets

    metas = {
        str(r["id"]): json.loads(r["meta"]) if isinstance(r.get("meta"), str) else r.get("meta")
        for r in records
    }
    try:
        pool = value_pool(metas)
        if not pool:
            return None
        return [
            document_recalls(str(r["id"]), r["text"], metas[str(r["id"])], encode, pool, length)
            for r in records
        ]
    except TrainingError as error:
        raise TrainingError(f"{where}: {error}") from None
