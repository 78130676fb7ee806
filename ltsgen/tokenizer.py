"""Tokenizers: train a byte-level BPE, load any Hugging Face ``tokenizer.json`` (path or Hub name),
find its end-of-text id, and encode batches straight into numpy arrays."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from ltsgen.errors import LtsgenError

EOS_TOKEN = "<|endoftext|>"
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


def save_tokenizer(tokenizer: Tokenizer, path: str | Path, storage_options: dict | None = None) -> str:
    """Write ``tokenizer`` to ``path`` (a local path or any ``ltsgen.loaders.storage`` URL) atomically (a
    failed write leaves nothing); one-line ``TokenizerError`` when it cannot be written (full disk,
    read-only folder, unreachable store)."""
    from ltsgen.loaders.storage import StorageError, locate

    folder, name = locate(path, storage_options)
    try:
        with folder.publish(name) as tmp:
            tokenizer.save(str(tmp))
    except StorageError as error:
        raise TokenizerError(f"{path}: cannot write ({error.reason})") from None
    except Exception as error:  # tokenizers raises a bare Exception for its OS errors
        raise TokenizerError(f"{path}: cannot write ({_first_line(error)})") from None
    return folder.location(name)


def load_tokenizer(path_or_name: str | Path) -> Tokenizer:
    """A ``tokenizer.json`` file, a folder holding one, or a Hugging Face Hub name (needs network)."""
    path = Path(path_or_name)
    if path.is_dir():
        path = path / "tokenizer.json"
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path))
        except Exception as error:  # tokenizers raises a bare Exception on malformed JSON
            raise TokenizerError(
                f"{path}: not a Hugging Face tokenizer.json ({_first_line(error)})"
            ) from None
    name = str(path_or_name)
    if name.endswith(".json") or name.startswith((".", "/")) or name.count("/") > 1:
        raise TokenizerError(f"{name}: no such tokenizer file")
    try:
        return Tokenizer.from_pretrained(name)
    except Exception as error:
        raise TokenizerError(
            f"{name}: not a local tokenizer file and not loadable from the Hugging Face Hub ({_first_line(error)})"
        ) from None


def eos_id(tokenizer: Tokenizer) -> int:
    """The id of the end-of-text token (``<|endoftext|>``, ``</s>``, ...)."""
    for token in EOS_CANDIDATES:
        token_id = tokenizer.token_to_id(token)
        if token_id is not None:
            return token_id
    raise TokenizerError(f"the tokenizer has none of the end-of-text tokens {', '.join(EOS_CANDIDATES)}")


def vocab_size(tokenizer: Tokenizer) -> int:
    return tokenizer.get_vocab_size(with_added_tokens=True)


def encode_arrays(tokenizer: Tokenizer, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Token ids of ``texts`` (no special tokens added) as ``(values uint32, offsets int64)``.

    Document ``i`` holds ``values[offsets[i]:offsets[i + 1]]``. Uses ``encode_batch_fast`` (the same ids
    as ``encode_batch``, without computing character offsets).
    """
    encodings = tokenizer.encode_batch_fast(list(texts), add_special_tokens=False)
    ids = [encoding.ids for encoding in encodings]
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)), out=offsets[1:])
    values = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.uint32, count=int(offsets[-1]))
    return values, offsets


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
