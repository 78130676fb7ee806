"""The root of the trainer's errors a user can cause (bad options, files or data): the CLI prints one line."""

from __future__ import annotations

from ltsgen.errors import LtsgenError


class TrainingError(LtsgenError, ValueError):
    """A run, checkpoint, dataset or setting the trainer cannot use; the message names the file or option."""
