"""A local file of how many token ids each record of each shard has, for one tokenizer.

Packing untokenized text plans the epoch from each shard's token count, which takes tokenizing the whole
split when nothing records it. ``StreamingDataset(..., token_counts=PATH)`` reads the counts it finds in
``PATH`` (a list per shard, keyed by the shard's sha256, for the tokenizer's sha256) and writes back those
it had to count, so that the next construction on the same data (a resumed run, another rank's restart)
tokenizes nothing to plan, and its first batch only the documents it reaches (``packing.TextTokens``).
It is a cache: a missing, unreadable or other tokenizer's file is counted again and replaced.
"""

from __future__ import annotations

import json
import os
import warnings

from .files import atomic_path

FORMAT = "ltsgen.token_counts/1"


def read_token_counts(path: str | os.PathLike, tokenizer_sha256: str) -> dict[str, list[int]]:
    """The counts ``path`` holds for the tokenizer with ``tokenizer_sha256``.

    Args:
        path: the counts file (absent: none yet).
        tokenizer_sha256: the sha256 of the tokenizer's json.

    Returns:
        shard sha256 -> the number of token ids of each of its records; empty when the file is absent or
        another tokenizer's, and, with a one-line warning, when it is unreadable.
    """
    try:
        with open(path, encoding="utf-8") as handle:
            content = json.load(handle)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, RecursionError) as error:  # ValueError: bad UTF-8 or JSON, a huge integer
        warnings.warn(f"{path}: token counts unreadable, counting again ({error})", stacklevel=3)
        return {}
    counts = content.get("counts") if isinstance(content, dict) else None
    well_formed = isinstance(counts, dict) and content.get("format") == FORMAT
    if not well_formed or not all(
        isinstance(shard, list) and all(map(_is_count, shard)) for shard in counts.values()
    ):
        warnings.warn(f"{path}: not a {FORMAT} file of token counts, counting again", stacklevel=3)
        return {}
    return counts if content.get("tokenizer_sha256") == tokenizer_sha256 else {}


def write_token_counts(path: str | os.PathLike, tokenizer_sha256: str, counts: dict[str, list[int]]) -> None:
    """Write ``counts`` (shard sha256 -> each record's number of token ids) for one tokenizer, atomically,
    a line per shard.

    Args:
        path: the counts file (replaced whole).
        tokenizer_sha256: the sha256 of the tokenizer's json.
        counts: the counts to keep.
    """
    head = json.dumps({"format": FORMAT, "tokenizer_sha256": tokenizer_sha256})[:-1]
    shards = ",\n".join(f" {json.dumps(key)}: {json.dumps(counts[key])}" for key in sorted(counts))
    with atomic_path(path) as tmp:
        tmp.write_text(f'{head}, "counts": {{\n{shards}\n}}}}\n', encoding="utf-8")


def _is_count(value) -> bool:
    """A record's token count as the loader holds it (int32)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**31
