"""The copy task: rows that repeat a random segment, added to every training step with ``--copy-task N``.

A model answers a cued recall only once it copies from its context, and a small model trained on text alone
did not learn to within 12M tokens (docs/training.md, "Cued recall"). ``N`` extra rows of the training
length join each step. Each row is one segment of random token ids, of a length drawn from 8 to
``min(32, T // 2)`` for that row, repeated until the row is full. Their loss, on every token after the
repeat's first (which follows the segment's unpredictable last token), is added to the text's with equal
weight; the text's loss alone is what the run logs. As the segment's length changes from row to row, no
fixed offset predicts the repeat: a model must find the earlier occurrence of the current token and copy what
followed it (an induction head). The rows depend only on the seed, the rank and the step, so a resumed run
sees the same.
"""

from __future__ import annotations

import torch

#: The copied ids start here: above a byte-level BPE's single bytes, in the learned merges.
FIRST_ID = 256
#: Segments are at least this long ...
SHORTEST = 8
#: ... and at most this long (and at most half the row).
LONGEST = 32


def copy_rows(count: int, length: int, vocab_size: int, seed: int, step: int, rank: int = 0):
    """Inputs and targets ``[count, length]`` of one step's copy rows (targets -100 up to the repeat's first token)."""
    generator = torch.Generator().manual_seed(((seed * 65_537 + rank) * 1_000_003 + step) % 2**63)
    longest = max(1, min(LONGEST, length // 2))
    periods = torch.randint(min(SHORTEST, longest), longest + 1, (count, 1), generator=generator)
    ids = torch.randint(min(FIRST_ID, vocab_size // 2), vocab_size, (count, longest), generator=generator)
    ids = ids.gather(1, torch.arange(length + 1) % periods)
    targets = ids[:, 1:].clone()
    targets[torch.arange(length) < periods] = -100  # the first segment, and the repeat's first token
    return ids[:, :length], targets
