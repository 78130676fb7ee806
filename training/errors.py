"""The errors a user can cause (bad options, files or data): the CLI prints them as one line."""

from __future__ import annotations

from ltsgen.errors import LtsgenError
from ltsgen.loaders.contract import ContractError


class TrainingError(LtsgenError, ValueError):
    """A run, checkpoint, dataset or setting the trainer cannot use; the message names the file or option."""


def user_errors() -> tuple[type[Exception], ...]:
    """Every exception type that means "fix your input", for the CLI to print as one line."""
    from ltsgen.tokenizer import TokenizerError

    return (TrainingError, ContractError, TokenizerError)
