"""An on-disk cache of chat answers keyed by request content, so no answered request is ever sent twice."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ltsgen.loaders.files import atomic_path
from ltsgen.loaders.storage import StorageError


def request_key(request: dict[str, Any]) -> str:
    """The sha256 of a request's canonical JSON (model, messages, sampling parameters, seed)."""
    canonical = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class ResponseCache:
    """One JSON file per answered request, ``DIR/<key[:2]>/<key>.json``, written atomically.

    A file holds the request and the answer; an unreadable file (which atomic writes never leave) counts
    as a miss and is overwritten by the next answer.
    """

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = Path(directory)

    def path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            entry = json.loads(self.path(key).read_text(encoding="utf-8"))
            return entry["answer"]
        except (FileNotFoundError, ValueError, RecursionError, KeyError, TypeError):
            return None
        except OSError as error:  # not a folder, no permission: the cache's, not the build output's
            reason = error.strerror or str(error)
            raise StorageError(f"--cache-dir {self.directory}: cannot be read ({reason})", reason) from None

    def put(self, key: str, request: dict[str, Any], answer: dict[str, Any]) -> None:
        """Keep ``answer``; a cache folder that cannot be written is a ``StorageError`` naming it (not the
        build's output)."""
        entry = json.dumps({"request": request, "answer": answer}, sort_keys=True, ensure_ascii=False)
        try:
            with atomic_path(self.path(key)) as tmp:
                tmp.write_text(entry, encoding="utf-8")
        except OSError as error:
            reason = error.strerror or str(error)
            raise StorageError(f"--cache-dir {self.directory}: cannot write ({reason})", reason) from None

    def __len__(self) -> int:
        return sum(1 for _ in self.directory.glob("*/*.json")) if self.directory.is_dir() else 0
