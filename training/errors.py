"""The one error of the trainer a user can cause (bad options, files or data; the CLI prints one line), and
the divergence that ``compare`` tells apart."""

from __future__ import annotations

from ltsgen.errors import LtsgenError


class TrainingError(LtsgenError, ValueError):
    """A run, checkpoint, dataset or setting the trainer cannot use; the message names the file or option."""


class DivergedError(TrainingError):
    """The loss or the gradient norm stopped being finite; RUN/train_summary.json records the step.

    The one subclass: ``compare`` reports a diverged run and goes on with the grid, where any other
    ``TrainingError`` stops it."""
