"""What the trainer reads: the run's tokenizer, packed training batches, exact-length evaluation sets."""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ltsgen.loaders.contract import (
    EVAL_SPLIT,
    TEST_SPLIT,
    TOKENIZER_NAME,
    TRAIN_SPLIT,
    VALIDATION_SPLIT,
    ContractError,
    atomic_path,
    read_manifest,
    sha256_file,
)
from ltsgen.loaders.sources import join
from ltsgen.loaders.storage import Storage
from ltsgen.training.errors import TrainingError

PREFIX_SPLITS = (VALIDATION_SPLIT, TEST_SPLIT)
TOKENIZER_TRAINING_CHARS = 50_000_000  # enough text for a small BPE; bounds the time spent training one


class DataError(TrainingError):
    """A dataset or tokenizer the trainer cannot use; the message names the file."""


# --------------------------------------------------------------------------------------------------
# tokenizer


def resolve_tokenizer(data_dir, run_dir, *, tokenizer_path=None, vocab_size=2048, placement=None):
    """The run's tokenizer, saved as RUN/tokenizer.json; returns ``(tokenizer, path in RUN)``.

    Taken from, in order: ``tokenizer_path``; the dataset's own ``DIR/tokenizer.json``; one trained
    earlier for this run (RUN/tokenizer.json); else a byte-level BPE of ``vocab_size`` trained on the
    training split's text. Under torchrun only rank 0 trains or copies; the others wait and load.
    """
    from ltsgen.tokenizer import load_tokenizer, train_tokenizer
    from ltsgen.training import distributed

    data, run_dir = Storage(data_dir), Path(run_dir)  # the dataset: a local folder or any URL
    target = run_dir / TOKENIZER_NAME
    if tokenizer_path:
        origin, name = Storage(Path(tokenizer_path).parent), Path(tokenizer_path).name
    else:
        origin, name = data, TOKENIZER_NAME
    source = origin.location(name) if tokenizer_path or data.is_file(TOKENIZER_NAME) else None
    is_main = placement is None or placement.is_main
    if source is not None and not origin.is_file(name):
        raise DataError(f"{source}: tokenizer not found")
    if tokenizer_path:
        _check_matches_tokenized_data(data_dir, Path(tokenizer_path))
    if is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
        if source is not None and not target.exists():
            with atomic_path(target) as tmp:
                origin.download(name, tmp)
        elif source is not None and sha256_file(target) != origin.sha256(name):
            raise DataError(
                f"{target}: the run has another tokenizer than {source}; a run keeps its tokenizer"
            )
        elif not target.exists():
            tokenizer = train_tokenizer(_training_texts(data_dir), vocab_size)
            with atomic_path(target) as tmp:
                tokenizer.save(str(tmp))
    if placement is not None:
        distributed.barrier(placement)
    return load_tokenizer(str(target)), target


def _check_matches_tokenized_data(data_dir, source: Path) -> None:
    """Token ids stored in the dataset only mean something with the tokenizer that made them."""
    manifest = read_manifest(data_dir)
    stored = manifest.tokenizer or {}
    tokenized = any(shard.tokens is not None for shards in manifest.splits.values() for shard in shards)
    if tokenized and stored.get("sha256") and stored["sha256"] != sha256_file(source):
        raise DataError(
            f"{source}: {data_dir} is tokenized with another tokenizer ({stored.get('path')}); omit --tokenizer"
        )


def _training_texts(data_dir) -> Iterator[str]:
    from ltsgen.loaders.formats import read_shard

    manifest = read_manifest(data_dir)
    budget = TOKENIZER_TRAINING_CHARS
    for shard in manifest.shards(TRAIN_SPLIT):
        for record in read_shard(join(data_dir, shard.path), manifest.format, columns=["text"]):
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
    (seed, epoch, samples consumed), so a resumed run continues with the very next batch.
    """

    def __init__(self, data_dir, *, seq_len, batch_size, seed, tokenizer, eos, rank=0, world_size=1) -> None:
        from ltsgen.loaders import StreamingDataset

        self.blocks = StreamingDataset(
            str(data_dir), TRAIN_SPLIT, shuffle=True, seed=seed, rank=rank, world_size=world_size,
            batch_size=batch_size, seq_len=seq_len, tokenizer=tokenizer, eos_id=eos,
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
    """``input_ids`` [N, L]: N sequences of exactly L tokens, and where their long-range facts sit.

    ``facts[i]`` lists ``(position, distance)`` for sequence i: a token of a fact's value at a later use,
    and its distance in tokens to the fact's first mention.
    """

    length: int
    input_ids: torch.Tensor
    description: str
    facts: list[list[tuple[int, int]]] = field(default_factory=list)


def load_eval_sets(data_dir, lengths, tokenizer, max_sequences: int) -> dict[int, EvalSet]:
    """Exact-length evaluation sets, up to ``max_sequences`` per length.

    The dataset's own set ``DIR/eval/<L>/`` when it has one (bucketed corpora); otherwise the first L tokens
    of the documents (in stored order) of the validation split (else test) that have at least L tokens.
    A length no document reaches gets an empty set.
    """
    from ltsgen.loaders import load_eval_set

    manifest = read_manifest(data_dir)
    stored = {shard.bucket for shard in manifest.splits.get(EVAL_SPLIT, [])}
    sets: dict[int, EvalSet] = {}
    for length in lengths:
        if str(length) in stored:
            tokens = load_eval_set(data_dir, length)[:max_sequences]
            sets[length] = EvalSet(
                length, tokens, f"{EVAL_SPLIT}/{length}: {len(tokens)} sequences of {length} tokens"
            )
    remaining = [length for length in lengths if length not in sets]
    if remaining:
        split = next((name for name in PREFIX_SPLITS if name in manifest.splits), None)
        if split is None:
            raise DataError(f"{join(data_dir, 'manifest.json')}: no validation or test split to evaluate on")
        sets.update(_prefix_eval_sets(data_dir, manifest, split, remaining, tokenizer, max_sequences))
    return sets


def _prefix_eval_sets(data_dir, manifest, split, lengths, tokenizer, max_sequences) -> dict[int, EvalSet]:
    from ltsgen.loaders.formats import read_shard

    rows: dict[int, list[torch.Tensor]] = {length: [] for length in lengths}
    facts: dict[int, list[list[tuple[int, int]]]] = {length: [] for length in lengths}
    longest = max(lengths)
    try:
        for shard in manifest.shards(split):
            for record in read_shard(join(data_dir, shard.path), manifest.format):
                open_lengths = [length for length in lengths if len(rows[length]) < max_sequences]
                if not open_lengths:
                    break
                encoding = tokenizer.encode(record["text"], add_special_tokens=False)
                ids = encoding.ids
                if len(ids) < min(open_lengths):
                    continue
                positions = _fact_positions(record, encoding.offsets, min(len(ids), longest))
                for length in open_lengths:
                    if len(ids) >= length:
                        rows[length].append(torch.tensor(ids[:length], dtype=torch.long))
                        facts[length].append([(pos, dist) for pos, dist in positions if pos < length])
            else:
                continue
            break
    except ContractError as error:
        raise DataError(str(error)) from None
    return {
        length: EvalSet(
            length,
            torch.stack(rows[length]) if rows[length] else torch.empty(0, length, dtype=torch.long),
            f"{split} split: first {length} tokens of {len(rows[length])} documents of at least {length} tokens",
            facts[length],
        )
        for length in lengths
    }


def _fact_positions(
    record: dict[str, Any], offsets: list[tuple[int, int]], limit: int
) -> list[tuple[int, int]]:
    """Token positions (< ``limit``) of each fact value's later uses, with their distance to the first mention.

    ``meta["facts"]`` gives character offsets; the tokenizer's offsets map them to tokens: the first mention
    is the token holding its first character, a use covers every token overlapping the value's characters.
    """
    meta = record.get("meta") or {}
    if isinstance(meta, str):
        meta = json.loads(meta)
    found: list[tuple[int, int]] = []
    if not isinstance(meta, dict) or not meta.get("facts"):
        return found
    ends = [end for _, end in offsets]
    for fact in meta["facts"]:
        width = max(1, len(str(fact.get("value", ""))))
        first = bisect.bisect_right(ends, int(fact["first"]))
        for use in fact.get("uses", []):
            use = int(use)
            token = bisect.bisect_right(ends, use)
            while token < limit and offsets[token][0] < use + width:
                if token > first:
                    found.append((token, token - first))
                token += 1
    return sorted(set(found))
