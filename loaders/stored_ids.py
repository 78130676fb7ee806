"""The token ids an attached tokenizer stored for a dataset whose records hold text only.

``ltsgen tokenizer --data DIR`` writes, beside the shards, a parquet shard of each one's token ids (listed
in the manifest's ``tokenizer`` entry, ``contract.token_shards``). A packed loader reads those instead of
tokenizing the text when it tokenizes with that very tokenizer, so that neither its construction (the
packed stream is planned from the stored counts) nor its first batch depends on the dataset's size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from typing import Any

from .contract import Manifest, ShardInfo, token_shards


def stored_token_shards(
    manifest: Manifest, shards: list[ShardInfo], tokenizer: Any, read: Callable[[str], bytes]
) -> list[ShardInfo] | None:
    """The token shards to read for ``shards`` when packing with ``tokenizer``, else None.

    Args:
        manifest: the dataset's manifest.
        shards: the shards the loader streams.
        tokenizer: the loader's ``tokenizer`` argument: None (the stored one), a ``tokenizers.Tokenizer``
            or the path or URL of a ``tokenizer.json``; the stored ids are used only when it is the
            tokenizer they were made with (the same sha256 of its json).
        read: reads a path or URL (for a tokenizer given by location).

    Returns:
        One token shard per shard, or None when there are none or they belong to another tokenizer.
    """
    found = token_shards(manifest, shards)
    if found is None or tokenizer is None:
        return found
    if isinstance(tokenizer, str | os.PathLike):
        raw = read(str(tokenizer))
    elif hasattr(tokenizer, "to_str"):
        raw = tokenizer.to_str(pretty=True).encode("utf-8")  # as ltsgen stores a tokenizer.json
    else:
        return None
    return found if hashlib.sha256(raw).hexdigest() == manifest.tokenizer.get("sha256") else None
