"""Attach a tokenizer to a finished dataset directory whose records hold text only.

``DIR/tokenizer.json`` is published first, then ``DIR/manifest.json`` is rewritten atomically with its
``tokenizer`` entry (the manifest still comes last), under the directory's build lock, and the file is
recorded as ltsgen's, so that ``--overwrite`` removes it with the rest of the build. The loaders then
tokenize the text with it (``StreamingDataset(DIR, seq_len=N)``), as do ``ltsgen train`` and ``compare``.
"""

from __future__ import annotations

import os
from typing import Any

from tokenizers import Tokenizer

from ltsgen.build import BuildError
from ltsgen.loaders.contract import TOKENIZER_NAME, Manifest, read_manifest, write_manifest
from ltsgen.loaders.storage import LockHeld, Storage, as_storage
from ltsgen.outputs import LOCK_PATH, output_state, record_outputs
from ltsgen.tokenizer import TokenizerError, manifest_entry, tokenizer_bytes


def attachable_manifest(directory: str | os.PathLike | Storage) -> Manifest:
    """The manifest of ``directory`` if a tokenizer can be attached to it (its records hold no token ids).

    Raises:
        TokenizerError: the records hold token ids, which only the directory's own tokenizer reads.
        ContractError: the directory has no readable manifest.
    """
    manifest = read_manifest(directory)
    if manifest.tokenized:
        raise TokenizerError(
            f"{as_storage(directory)}: its records hold token ids of its own tokenizer; "
            "give --out to write another tokenizer elsewhere"
        )
    return manifest


def attach_tokenizer(
    directory: str | os.PathLike | Storage, tokenizer: Tokenizer
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """Store ``tokenizer`` as ``DIR/tokenizer.json`` and record it in the manifest (see the module docstring).

    Args:
        directory: a finished, untokenized ltsgen dataset directory (local folder or URL).
        tokenizer: the tokenizer to attach.

    Returns:
        The new manifest entry and the one it replaced (None if there was none).

    Raises:
        TokenizerError, ContractError: as ``attachable_manifest``; BuildError: a build is running there,
        or a file cannot be written.
    """
    store = as_storage(directory)
    raw = tokenizer_bytes(tokenizer)
    try:
        with store.lock(LOCK_PATH):
            manifest = attachable_manifest(store)
            if output_state(store, TOKENIZER_NAME) == "other":
                raise BuildError(
                    f"{store.location(TOKENIZER_NAME)}: not written by ltsgen; move it away to attach one "
                    "(ltsgen never writes over a file of yours)"
                )
            store.write_bytes(TOKENIZER_NAME, raw)
            previous, manifest.tokenizer = manifest.tokenizer, manifest_entry(tokenizer, raw)
            write_manifest(store, manifest)
            record_outputs(store, [TOKENIZER_NAME])
    except LockHeld as error:
        raise BuildError(f"{store}: another build is running there ({error.reason})") from None
    except OSError as error:  # the tokenizer, the manifest or the outputs record
        raise BuildError(f"{store}: cannot write there ({error.strerror or error})") from None
    return manifest.tokenizer, previous
