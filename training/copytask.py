"""The copy task: random tokens repeated once, added to every training step with ``--copy-task N``.

A model answers a cued recall only once it copies from its context, and a small model trained on text alone
did not learn to within 12M tokens (docs/training.md, "Cued recall"). ``N`` extra rows of the training
length join each step: ``min(32, T // 2)`` random token ids, the same ids once more, then random filler. Their
loss, on the repeat's tokens after its first, is added to the text's with equal weight; the text's loss alone
is what the run logs. The rows depend only on the seed, the rank and the step, so a resumed run sees the same.
"""

from __future__ import annotations

import torch

#: The copied ids start here: above a byte-level BPE's single bytes, in the learned merges.
FIRST_ID = 256
#: At most this many tokens are repeated.
HALF = 32


def copy_rows(count: int, length: int, vocab_size: int, seed: int, step: int, rank: int = 0):
    """Inputs and targets ``[count, length]`` of one step's copy rows (targets -100 outside the repeat)."""
    generator = torch.Generator().manual_seed(((seed * 65_537 + rank) * 1_000_003 + step) % 2**63)
    half = min(HALF, length // 2)
    ids = torch.randint(min(FIRST_ID, vocab_size // 2), vocab_size, (count, length + 1), generator=generator)
    ids[:, half : 2 * half] = ids[:, :half]
    targets = torch.full((count, length), -100, dtype=torch.long)
    targets[:, half : 2 * half - 1] = ids[:, half + 1 : 2 * half]
    return ids[:, :length], targets
