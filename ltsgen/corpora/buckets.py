"""Length buckets and exact-length evaluation sets: which document goes where (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ltsgen.build import stable_fraction
from ltsgen.loaders.contract import bucket_name


def check_lengths(lengths: Sequence[int], option: str = "--bucket-lengths") -> list[int]:
    """``lengths`` as a list, when they are positive token counts in strictly increasing order."""
    if not lengths or any(n <= 0 for n in lengths) or list(lengths) != sorted(set(lengths)):
        listed = ",".join(map(str, lengths))
        raise ValueError(f"{option}: {listed!r} must list positive token counts in increasing order")
    return list(lengths)


def bucket_names(lengths: Sequence[int]) -> list[str]:
    """``[0, l1), [l1, l2), ..., [ln, inf)`` as folder names, in length order."""
    bounds = [0, *lengths]
    return [bucket_name(lo, hi) for lo, hi in zip(bounds, [*lengths, None], strict=True)]


def bucket_indices(num_tokens: np.ndarray, lengths: Sequence[int]) -> np.ndarray:
    """The bucket of each token count: index ``i`` of :func:`bucket_names` with lo <= n < hi."""
    return np.searchsorted(np.asarray(lengths), num_tokens, side="right")


def select_eval_documents(
    ids: Sequence[str], num_tokens: np.ndarray, eval_lengths: Sequence[int], per_length: int, seed: int
) -> dict[int, list[int]]:
    """For each length L, up to ``per_length`` positions of documents with at least L tokens, nested.

    Lengths are served longest first, and a document chosen for a longer length is reused at every shorter
    one, so the sequence at L is a prefix of the same document's sequence at 2L. New documents are drawn in
    a fixed pseudo-random order (a hash of seed and id), never by position in the input. Each list keeps the
    order of choice, so the first records at L are the documents of the next longer length.
    """
    if not eval_lengths or per_length <= 0:
        return {}
    eligible = np.flatnonzero(np.asarray(num_tokens) >= min(eval_lengths)).tolist()
    order = sorted(eligible, key=lambda i: stable_fraction(f"{seed}:{ids[i]}"))
    chosen: list[int] = []
    taken: set[int] = set()
    sets: dict[int, list[int]] = {}
    for length in sorted(eval_lengths, reverse=True):
        for position in order:
            if len(chosen) >= per_length:
                break
            if position not in taken and num_tokens[position] >= length:
                chosen.append(position)
                taken.add(position)
        sets[length] = list(chosen)
    return {length: sets[length] for length in sorted(sets)}


def concat_sequences(
    documents: Sequence[np.ndarray], eos: int, length: int, count: int
) -> list[tuple[int, np.ndarray]]:
    """Up to ``count`` windows of exactly ``length`` tokens from the documents joined with ``eos``.

    Returns ``(offset in the stream, ids)``; window ``i`` starts at ``i * length``, so windows at L are
    prefixes of the windows at 2L.
    """
    if not documents:
        return []
    pieces = []
    for ids in documents:
        pieces += [ids, np.array([eos], dtype=ids.dtype)]
    stream = np.concatenate(pieces)
    available = min(count, len(stream) // length)
    return [(i * length, stream[i * length : (i + 1) * length]) for i in range(available)]
