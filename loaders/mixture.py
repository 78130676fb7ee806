"""Mixtures: several datasets read as one stream, each in a fixed proportion of the items.

``StreamingDataset({"lts": 0.7, "s3://bucket/c4": 0.3}, ...)`` builds a ``StreamingMixture``. Like the
order of one dataset, the mixture is a pure function of the global position, so resume, ranks, workers and
elasticity are those of ``StreamingDataset`` unchanged:

- Schedule: the proportions are resolved to integer weights (at most ``RESOLUTION`` in all, see
  ``resolve_weights``) and laid out by smooth weighted round-robin (the largest accumulated credit goes
  next) over one period of ``sum(weights)`` positions, which repeats. Position ``n`` of the mixture is
  source ``labels[n % period]``, item ``(n // period) * weight + rank`` of that source's own endless
  stream. Over any run of positions each source's count stays within 2 items of its proportion in every
  mixture tested; the schedule is deterministic and identical on every rank and worker.
- Sources: each source is a ``StreamingDataset`` of its own, read endlessly epoch after epoch. Its item
  ``j`` is position ``j % total`` of its own epoch ``j // total`` (its own order, seeded by
  ``source_seed(seed, index)``, reshuffled at each of its epochs, logged on ``ltsgen.loaders.mixture``
  when first read in a process).
- Epochs of the mixture: as many items as its sources hold together (records, or packed blocks), cut into
  global batches (``remainder="wrap"`` fills the last one with the sources' next items). The mixture's
  position runs on across its epochs (epoch ``e`` starts where ``e - 1`` ended), so a source is never
  restarted, only continued.

With ``seq_len`` the items are packed blocks, so the proportions are of tokens; every source must pack
with the same tokenizer (the same sha256 and EOS id), or the mixture is refused naming two that differ.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import numbers
import os
import re
from fractions import Fraction
from typing import Any

import numpy as np

from ltsgen.errors import UsageError

from .contract import TOKENIZER_NAME
from .errors import LoaderError
from .sources import join, located

RESOLUTION = 10_000  # proportions are resolved to multiples of 1 / RESOLUTION
LOG = logging.getLogger(__name__)
# PATH=WEIGHT, the weight any number (a sign, nan and inf included, to be refused as a weight by name)
_WEIGHT = re.compile(
    r"^(.*)=\s*([-+]?(?:[0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?|nan|inf(?:inity)?))\s*$", re.I | re.S
)


def parse_mixture(text: str) -> str | dict[str, float]:
    """A ``--data`` value: one dataset, or a mixture written ``PATH=WEIGHT,PATH=WEIGHT,...``.

    A value whose first comma-separated part ends in ``=NUMBER`` is a mixture (paths and URLs may hold
    ``:`` and ``=``; the weight is what follows the last ``=``), unless it names an existing path; any
    other value is one dataset.

    Args:
        text: the option's value, e.g. ``"lts=0.7,s3://bucket/c4=0.3"``.

    Returns:
        The path itself, or ``{path: weight}`` in the order given; ``UsageError`` for a malformed mixture.
    """
    parts = text.split(",")
    if _WEIGHT.match(parts[0]) is None or os.path.exists(text):
        return text
    mixture: dict[str, float] = {}
    for part in parts:
        match = _WEIGHT.match(part)
        if match is None or not match.group(1).strip():
            raise UsageError(f"--data {text!r}: {part!r} is not PATH=WEIGHT (a mixture is PATH=WEIGHT,...)")
        source = match.group(1).strip()
        twice = next((given for given in mixture if located(given) == located(source)), None)
        if twice is not None:  # "lts" and "lts/" name one dataset
            same = "" if twice == source else f" (as {twice!r})"
            raise UsageError(f"--data {text!r}: {source!r} is given twice{same}")
        weight = float(match.group(2))
        if not 0 < weight < math.inf:
            raise UsageError(
                f"--data {text!r}: the weight of {source!r}, {match.group(2)}, is not a positive number"
            )
        mixture[source] = weight
    try:
        resolve_weights(list(mixture.values()))  # refused here, before a run or comparison writes anything
    except UsageError as error:
        raise UsageError(f"--data {text!r}: {error}") from None
    return mixture


def resolve_weights(proportions: list[float]) -> list[int]:
    """Integer weights in the ratio of ``proportions``, resolved to ``1 / RESOLUTION`` and reduced.

    Shares that are fractions with small denominators keep their exact ratio (``[1, 1, 1]`` gives
    ``[1, 1, 1]``, ``[0.7, 0.3]`` gives ``[7, 3]``); others are rounded to multiples of ``1 / RESOLUTION``
    by largest remainder.

    Args:
        proportions: positive numbers (any scale).

    Returns:
        Weights with no common divisor, summing to at most ``RESOLUTION``; ``UsageError`` when a
        proportion is not a positive number, or too small to resolve.
    """
    if not proportions or not all(
        isinstance(p, numbers.Real) and not isinstance(p, bool) and math.isfinite(p) and p > 0
        for p in proportions
    ):
        raise UsageError(f"mixture proportions must be positive numbers, not {proportions}")
    proportions = [float(p) for p in proportions]
    total = sum(map(Fraction, proportions))
    shares = [Fraction(p) / total for p in proportions]
    simple = [share.limit_denominator(RESOLUTION) for share in shares]
    period = math.lcm(*(share.denominator for share in simple))
    if period <= RESOLUTION and sum(simple) == 1:
        weights = [int(share * period) for share in simple]
    else:
        scaled = [share * RESOLUTION for share in shares]
        weights = [math.floor(share) for share in scaled]
        by_remainder = sorted(range(len(scaled)), key=lambda i: (weights[i] - scaled[i], i))
        for i in by_remainder[: RESOLUTION - sum(weights)]:  # largest remainders first
            weights[i] += 1
    if 0 in weights:
        raise UsageError(f"a mixture proportion below 1/{RESOLUTION} of the total: {proportions}")
    divisor = math.gcd(*weights)
    return [w // divisor for w in weights]


def source_seed(seed: int, index: int) -> int:
    """The seed of source ``index``'s own order in a mixture of seed ``seed`` (sources of the same shape
    are shuffled differently).

    Args:
        seed: the mixture's seed (non-negative).
        index: the source's place in the mapping.

    Returns:
        A non-negative 32-bit seed.
    """
    return int(np.random.SeedSequence([seed, index]).generate_state(1)[0])


class Schedule:
    """Which source each position of the mixture reads, and which item of that source's endless stream.

    Args:
        weights: integer weights; one period of ``sum(weights)`` positions holds ``weights[s]`` of source s.
    """

    def __init__(self, weights: list[int]) -> None:
        self.weights = np.asarray(weights, dtype=np.int64)
        self.period = int(self.weights.sum())
        labels = np.empty(self.period, dtype=np.int64)
        current = np.zeros(len(weights), dtype=np.int64)
        for position in range(self.period):  # smooth weighted round-robin: the largest credit goes next
            current += self.weights
            labels[position] = chosen = int(np.argmax(current))
            current[chosen] -= self.period
        self.labels = labels
        self.rank = np.empty(
            self.period, dtype=np.int64
        )  # how many of the period's earlier positions share it
        for source in range(len(weights)):
            where = np.flatnonzero(labels == source)
            self.rank[where] = np.arange(len(where))

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sources and items of mixture positions.

        Args:
            positions: non-negative global positions of the mixture.

        Returns:
            ``(source, item)``: int64 arrays; ``item`` indexes the source's endless stream.
        """
        cycle, offset = np.divmod(np.asarray(positions, dtype=np.int64), self.period)
        source = self.labels[offset]
        return source, cycle * self.weights[source] + self.rank[offset]


class Mixture:
    """Sources read as one stream by a ``Schedule``: which source, epoch and position each item of the mixture
    reads, and the items themselves (the mixture part of ``dataset.StreamingMixture``).

    Args:
        sources: one ``StreamingDataset`` per source (rank 0 of world size 1, batch size 1), read through its
            own order.
        roots: the sources' paths or URLs, as given.
        weights: their integer weights (``resolve_weights``); packed sources must share one tokenizer.
    """

    def __init__(self, sources: list, roots: list[str], weights: list[int]) -> None:
        self.sources = sources
        if sources[0].seq_len is not None:
            _check_shared_tokenizer(sources)
        self.mixture = [[root, w] for root, w in zip(roots, weights, strict=True)]
        self.schedule = Schedule(weights)
        self.epoch_items = sum(source.plans[0].total for source in sources)
        self._reshuffles_logged = [0] * len(sources)

    @property
    def skipped(self) -> dict[str, str]:
        """Shards skipped as corrupt in this process, in every source: path -> reason."""
        return {path: why for source in self.sources for path, why in source.skipped.items()}

    def identity(self, seq_len: int | None, roots: list[str] | None = None) -> dict[str, Any]:
        """What a state of the mixture resumes (``state.IDENTITY_KEYS``): its sources' own identities
        (``dataset``), their shared tokenizer, ``seq_len``, and ``mixture``: the sources with their weights,
        named as given, or as ``roots`` spell the same locations (``state_identity``)."""
        roots = roots or [source.root for source in self.sources]
        key = [[root, source.identity["dataset"]] for root, source in zip(roots, self.sources, strict=True)]
        return {
            "dataset": hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16],
            "tokenizer_sha256": self.sources[0].identity["tokenizer_sha256"],
            "seq_len": seq_len,
            "mixture": [[root, weight] for root, (_, weight) in zip(roots, self.mixture, strict=True)],
        }

    def state_identity(self, seq_len: int | None, saved: Any) -> dict[str, Any]:
        """The identity a state whose ``identity.mixture`` is ``saved`` is checked against: this mixture's
        named as the state names its sources, when it names the same locations with the same weights
        (``lts``, ``./lts/`` and its absolute path), so that a spelling alone refuses no state; else
        ``identity(seq_len)``, which the state check then finds different."""
        ours = [
            [located(source.root), weight]
            for source, (_, weight) in zip(self.sources, self.mixture, strict=True)
        ]
        pairs = saved if isinstance(saved, list) and len(saved) == len(ours) else []
        if (
            all(isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) for pair in pairs)
            and [[located(root), weight] for root, weight in pairs] == ours
        ):
            return self.identity(seq_len, [root for root, _ in pairs])
        return self.identity(seq_len)

    def locate(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where global positions of the mixture (across its epochs) read from.

        Args:
            positions: positions ``epoch * num_batches * global_batch_size + offset in that epoch``.

        Returns:
            ``(source, source epoch, position in that epoch)``: int64 arrays.
        """
        source, item = self.schedule.locate(positions)
        totals = np.asarray([s.plans[0].total for s in self.sources], dtype=np.int64)[source]
        return source, item // totals, item % totals

    def items(self, seed: int, first: int, count: int, seq_len: int | None) -> list | dict[str, np.ndarray]:
        """Items ``[first, first + count)`` of the mixture of seed ``seed``: records, or packed blocks as numpy
        arrays."""
        sources, epochs, positions = self.locate(np.arange(first, first + count, dtype=np.int64))
        slots: dict[tuple[int, int], list[int]] = {}  # (source, its epoch) -> slots of the batch
        for slot, key in enumerate(zip(sources.tolist(), epochs.tolist(), strict=True)):
            slots.setdefault(key, []).append(slot)
        pieces = [
            (np.asarray(where), self._read(seed, *key, positions[where])) for key, where in slots.items()
        ]
        if seq_len is None:
            records: list[Any] = [None] * count
            for where, items in pieces:
                for slot, item in zip(where.tolist(), items, strict=True):
                    records[slot] = item
            return records
        data = {}
        for name in pieces[0][1]:
            dtype = np.result_type(*(items[name].dtype for _, items in pieces))
            data[name] = np.empty((count, seq_len + 1), dtype=dtype)
            for where, items in pieces:
                data[name][where] = items[name]
        return data

    def prefetch(self) -> None:
        """Each source's ``prefetch`` (once a batch is out)."""
        for source in self.sources:
            if source._process is not None:
                source._process.prefetch()

    def _read(self, seed: int, index: int, epoch: int, positions: np.ndarray) -> list | dict[str, np.ndarray]:
        """Items at ``positions`` of epoch ``epoch`` of source ``index`` (its own seeded order)."""
        source = self.sources[index]
        if epoch > self._reshuffles_logged[index]:
            self._reshuffles_logged[index] = epoch
            LOG.info(
                "mixture source %s: reached its epoch %d (%d items per epoch), reshuffled with seed %d",
                source.root, epoch, source.plans[0].total, source.seed,
            )  # fmt: skip
        source.seed, source.epoch = source_seed(seed, index), epoch  # the seed may come from a state
        order = source._orders()[0]
        process = source._process_state()
        if source.seq_len is None:
            return [source._record(process, 0, order, int(p)) for p in positions]
        return source._blocks(process, 0, order, positions)


def _unrecorded_tokenizer(source: Any, stored: dict[str, Any]) -> str:
    """A tokenizer the manifest gives no sha256 for: its file's, or (no file) its vocabulary size."""
    try:
        raw = source._read(join(source.root, stored.get("path", TOKENIZER_NAME)))
    except LoaderError:
        return f"a tokenizer of {stored.get('vocab_size')} tokens without a file or sha256"
    return f"tokenizer sha256 {hashlib.sha256(raw).hexdigest()[:12]}"


def _check_shared_tokenizer(sources: list) -> None:
    """Refuse to pack sources whose token ids come from different tokenizers, naming two of them: each
    source's is the sha256 of the tokenizer that tokenizes its text (the given one, or its own), or of the
    one its stored ids were made with."""
    identities = []
    for source in sources:
        sha256 = source._tokenizer_sha256()
        if sha256:
            identity = f"tokenizer sha256 {sha256[:12]}"
        else:
            identity = _unrecorded_tokenizer(source, source.manifest.tokenizer or {})
        identities.append(f"{identity}, EOS {source.eos_id}")
    for source, identity in zip(sources[1:], identities[1:], strict=True):
        if identity != identities[0]:
            raise LoaderError(
                f"packing a mixture needs one tokenizer: {sources[0].root} has {identities[0]}, "
                f"{source.root} has {identity}"
            )
