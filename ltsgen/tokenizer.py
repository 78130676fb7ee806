"""Tokenizers: train a byte-level BPE, save it as a ``tokenizer.json`` or a Hugging Face tokenizer folder,
load any ``tokenizer.json`` (path or Hub name), find its end-of-text id, and encode batches straight into
numpy arrays. (Attaching one to a dataset directory is ``ltsgen.attach``.)"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ltsgen.errors import LtsgenError, first_line
from ltsgen.loaders.contract import MANIFEST_NAME, TOKENIZER_NAME
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.packing import parse_tokenizer, without_truncation
from ltsgen.loaders.storage import Storage, StorageError, is_url, locate

EOS_TOKEN = "<|endoftext|>"
MAX_VOCAB_SIZE = 2**24
HF_CONFIG_NAME = "tokenizer_config.json"
HF_SPECIAL_TOKENS_NAME = "special_tokens_map.json"
EOS_CANDIDATES = (EOS_TOKEN, "</s>", "<|end_of_text|>", "<eos>", "<|eot_id|>", "[SEP]")


class TokenizerError(LtsgenError, ValueError):
    """A tokenizer that cannot be found, loaded or used; the message is one line."""


def train_tokenizer(
    texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str] = (EOS_TOKEN,)
) -> Tokenizer:
    """A byte-level BPE (GPT-2 style, no unknown tokens) trained on ``texts``; deterministic for one input."""
    if vocab_size < 256 + len(special_tokens):
        raise TokenizerError(
            f"vocab size {vocab_size} is below the 256 bytes plus {len(special_tokens)} special tokens"
        )
    if vocab_size > MAX_VOCAB_SIZE:  # the ids are stored as uint32, and BPE merges are held in memory
        raise TokenizerError(f"vocab size {vocab_size:,} is above {MAX_VOCAB_SIZE:,}")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(special_tokens),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return tokenizer


def load_tokenizer(path_or_name: str | Path) -> Tokenizer:
    """A ``tokenizer.json`` file, a folder holding one, or a Hugging Face Hub name (needs network), with
    any truncation or padding it was saved with turned off (documents are tokenized whole)."""
    path = Path(path_or_name)
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        try:
            return parse_tokenizer(path.read_bytes(), str(path))
        except LoaderError as error:
            raise TokenizerError(str(error)) from None
        except OSError as error:
            raise TokenizerError(f"{path}: cannot be read ({error.strerror or first_line(error)})") from None
    name = str(path_or_name)
    if name.endswith(".json") or name.startswith((".", "/")) or name.count("/") > 1:
        raise TokenizerError(f"{name}: no such tokenizer file")
    try:
        tokenizer = Tokenizer.from_pretrained(name)
    except Exception as error:
        raise TokenizerError(
            f"{name}: not a local tokenizer file and not loadable from the Hugging Face Hub ({first_line(error)})"
        ) from None
    return without_truncation(tokenizer)


def eos_id(tokenizer: Tokenizer) -> int:
    """The id of the end-of-text token (``<|endoftext|>``, ``</s>``, ...)."""
    for token in EOS_CANDIDATES:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise TokenizerError(f"the tokenizer has none of the end-of-text tokens {', '.join(EOS_CANDIDATES)}")


def eos_token(tokenizer: Tokenizer) -> str:
    """The end-of-text token itself (``<|endoftext|>``, ``</s>``, ...)."""
    return tokenizer.id_to_token(eos_id(tokenizer))


def encode_arrays(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` (no special tokens added) as ``(values uint32, offsets int64)``.

    Document ``i`` holds ``values[offsets[i]:offsets[i + 1]]``. Uses ``encode_batch_fast`` (the same ids
    as ``encode_batch``, without computing character offsets).
    """
    try:
        encodings = tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
    except BaseException as error:  # the Rust library's panics are no Exception: a hostile regex gives up
        if type(error).__name__ != "PanicException":
            raise
        raise TokenizerError(f"the tokenizer failed on a text ({first_line(error)})") from None
    ids = [encoding.ids for encoding in encodings]
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=int(offsets[-1]))
    return values, offsets


def tokenizer_target(out: str | Path, storage_options: dict | None = None) -> tuple[Storage, str]:
    """Where ``save_tokenizer`` writes the ``tokenizer.json`` for ``out``: the folder and the file's name in
    it (``NAME.json``: its folder and ``NAME.json``; any other path or URL: that folder and
    ``tokenizer.json``)."""
    if str(out).endswith(".json"):
        return locate(out, storage_options)
    return Storage(out, storage_options), TOKENIZER_NAME


SIDE_FILES = (HF_CONFIG_NAME, HF_SPECIAL_TOKENS_NAME)  # of a Hugging Face tokenizer folder


def check_free_target(out: str | Path, storage_options: dict | None = None) -> None:
    """Refuse, before any work, an ``out`` where ``save_tokenizer`` would write over a file: a ``NAME.json``
    that exists, or a folder holding a dataset or any file it writes (ltsgen cannot tell a tokenizer of
    yours from one it wrote, so it replaces neither)."""
    is_folder = not str(out).endswith(".json")
    if is_folder and not is_url(out) and Path(out).is_file():
        raise TokenizerError(
            f"{out}: a file; --out names a folder for the tokenizer's files, or a tokenizer file NAME.json"
        )
    folder, name = tokenizer_target(out, storage_options)
    folder.check_writable()
    if is_folder and folder.exists(MANIFEST_NAME):
        raise TokenizerError(
            f"{folder}: holds a dataset ({MANIFEST_NAME}); to attach a tokenizer to it, give --data {folder} "
            "without --out"
        )
    for relpath in [*SIDE_FILES, name] if is_folder else [name]:
        if folder.exists(relpath):
            raise TokenizerError(
                f"{folder.location(relpath)}: exists; ltsgen does not write over it: move it away or choose "
                "another --out"
            )


def save_tokenizer(tokenizer: Tokenizer, out: str | Path, storage_options: dict | None = None) -> str:
    """Write ``tokenizer`` to ``out``, a local path or any ``ltsgen.loaders.storage`` URL: ``NAME.json`` gets
    the ``tokenizer.json`` alone; any other path is a folder that ``transformers.AutoTokenizer
    .from_pretrained`` loads whole (``tokenizer.json``, ``tokenizer_config.json``,
    ``special_tokens_map.json``; the end-of-text token is the eos, bos and unk token, as in GPT-2).

    Every file is published atomically, the ``tokenizer.json`` last; one that cannot be written (a full
    disk, a read-only folder, an unreachable store) raises a one-line ``TokenizerError`` naming it.

    Returns:
        The location of the ``tokenizer.json``.
    """
    folder, name = tokenizer_target(out, storage_options)
    files = {} if str(out).endswith(".json") else hugging_face_files(tokenizer)
    files[name] = tokenizer_bytes(tokenizer)  # last: a folder is complete once it has its tokenizer.json
    for relpath, data in files.items():
        try:
            folder.write_bytes(relpath, data)
        except StorageError as error:
            raise TokenizerError(f"{folder.location(relpath)}: cannot write ({error.reason})") from None
        except OSError as error:
            raise TokenizerError(
                f"{folder.location(relpath)}: cannot write ({error.strerror or error})"
            ) from None
    return folder.location(name)


def hugging_face_files(tokenizer: Tokenizer) -> dict[str, bytes]:
    """What ``transformers.AutoTokenizer`` reads beside a ``tokenizer.json``: ``tokenizer_config.json`` and
    ``special_tokens_map.json``, the end-of-text token as the eos, bos and unk token (as in GPT-2)."""
    token = eos_token(tokenizer)
    special = {"bos_token": token, "eos_token": token, "unk_token": token}
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False, **special}
    return {
        name: (json.dumps(content, indent=2, sort_keys=True) + "\n").encode("utf-8")
        for name, content in zip(SIDE_FILES, (config, special), strict=True)
    }


def tokenizer_bytes(tokenizer: Tokenizer) -> bytes:
    """The ``tokenizer.json`` bytes ltsgen writes: the same for one tokenizer wherever it is saved."""
    return tokenizer.to_str(pretty=True).encode("utf-8")


def manifest_entry(tokenizer: Tokenizer, raw: bytes) -> dict[str, Any]:
    """The manifest's ``tokenizer`` field for ``tokenizer`` stored as ``raw`` (the bytes of its json)."""
    return {
        "path": TOKENIZER_NAME,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "vocab_size": tokenizer.get_vocab_size(),
        "eos_id": eos_id(tokenizer),
    }
