"""The dataset-directory contract between ltsgen's builders (writers) and ``ltsgen.loaders`` (readers).

A dataset directory::

    DIR/manifest.json                              written last, atomically
    DIR/README.md                                  data card
    DIR/tokenizer.json                             when the data is tokenized, or a tokenizer is attached
    DIR/tokenizer_config.json, special_tokens_map.json   with an attached tokenizer (for AutoTokenizer)
    DIR/tokens/<sha>/<split>/[<bucket>/]shard-00000.parquet   an attached tokenizer's ids of each shard
    DIR/<split>/[<bucket>/]shard-00000.<ext>       ext: tar | parquet | jsonl.zst

Split names are words (letters, digits, ``_``), as Hugging Face ``datasets`` requires: ``train``,
``validation``, ``test``, and for bucketed corpora :data:`EVAL_SPLIT` (``eval/<L>/``, sequences of exactly
L tokens) and :data:`EVAL_CONCAT_SPLIT` (``eval_concat/<L>/``, the held-out documents joined by EOS).

One record shape travels through every format:

    id          str, stable and unique, no "." or "/" (a webdataset key)
    text        str
    source      str: "lts", "c4", "arxiv", "github", ...
    num_words   int (whitespace-separated words of ``text``)
    num_tokens  int, only when tokenized
    input_ids   token ids, only when tokenized (uint16 when the vocabulary fits, else uint32)
    meta        dict, source-specific (JSON-serialisable); stored as a JSON string in every format

How a record is laid out in each format:

- webdataset tar: member ``<id>.txt`` holds the UTF-8 text, ``<id>.json`` the other scalar fields and
  ``meta``, ``<id>.input_ids.npy`` the token ids (a plain ``.npy`` array, never pickled).
- parquet (zstd): columns ``id, text, source, num_words, meta``, plus ``num_tokens, input_ids``
  (``list<uint16|uint32>``) when tokenized. The footer's key-value entry :data:`ROW_GROUP_INDEX_KEY`
  lists each row group's sha256 and, when tokenized, each record's token count, and the manifest holds the
  footer's own sha256 (``footer_sha256``): a reader that checks the footer can check each row group as it
  decodes it, instead of hashing the whole shard before its first record (``indexed.RowGroupIndex``).
- jsonl.zst: one JSON object per line with every field, ``input_ids`` as a list of ints.

``meta`` is a JSON string in all three, so that ``datasets.load_dataset`` gives it one type (``string``)
whatever the format and however its keys vary from record to record (a struct type would be inferred from
the first records and break on the others). Readers also accept the object form of earlier shards.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import LoaderError
from .storage import Storage, StorageError, as_storage

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
CARD_NAME = "README.md"
TOKENIZER_NAME = "tokenizer.json"

# format name -> shard file extension
FORMATS: dict[str, str] = {"webdataset": "tar", "parquet": "parquet", "jsonl.zst": "jsonl.zst"}
ROW_GROUP_INDEX_KEY = "ltsgen:row_groups"  # parquet footer entry: a RowGroupIndex as JSON
COUNT = "integer below 2**53"  # a shard's counts: exact in a float; a split's sums must stay below 2**62
TOKEN_COUNT = "integer below 2**32"  # vocabulary sizes and token ids (stored as uint16 or uint32)

TAR_TEXT_EXT = "txt"
TAR_FIELDS_EXT = "json"
TAR_IDS_EXT = "input_ids.npy"
TRAIN_SPLIT = "train"
VALIDATION_SPLIT = "validation"
TEST_SPLIT = "test"
STANDARD_SPLITS = (TRAIN_SPLIT, VALIDATION_SPLIT, TEST_SPLIT)  # in the order cards and reports list them
EVAL_SPLIT = "eval"
EVAL_CONCAT_SPLIT = "eval_concat"
# split names of earlier versions that Hugging Face datasets refuses -> their current names
LEGACY_SPLITS = {"eval-concat": EVAL_CONCAT_SPLIT}


# ASCII bytes as str.split sees them: whitespace a space, any other byte a letter
_WORD_BYTES = bytes(0x20 if chr(code).isspace() else 0x78 for code in range(128)) + b"x" * 128


def count_words(text: str) -> int:
    """Words as the manifest counts them: ``len(text.split())``. An ASCII text's words are counted where
    its bytes, mapped to spaces (whitespace) and letters (the rest), start a word, with no list made.

    Args:
        text: a record's text.

    Returns:
        The number of whitespace-separated tokens.
    """
    if not text.isascii():
        return len(text.split())
    mapped = text.encode("ascii").translate(_WORD_BYTES)
    return mapped.count(b" x") + mapped.startswith(b"x")


def shard_name(index: int, fmt: str) -> str:
    """The file name of shard ``index`` in format ``fmt``.

    Args:
        index: the shard's number within its split (and bucket).
        fmt: a key of ``FORMATS``.

    Returns:
        ``shard-00042.<ext>``.
    """
    return f"shard-{index:05d}.{FORMATS[fmt]}"


def bucket_name(lo: int, hi: int | None) -> str:
    """The folder name of the token-length bucket ``[lo, hi)``.

    Args:
        lo: the shortest length in the bucket.
        hi: one past the longest, or None for the open end.

    Returns:
        ``"512-1024"`` or ``"4096-inf"``.
    """
    return f"{lo}-{'inf' if hi is None else hi}"


def parse_bucket_name(name: str) -> tuple[int, int | None]:
    """The inverse of ``bucket_name``.

    Args:
        name: a bucket folder name such as ``"512-1024"``.

    Returns:
        ``(lo, hi)``, ``hi`` None for the open end; ValueError when ``name`` is no bucket name.
    """
    lo, _, hi = name.partition("-")
    return int(lo), (None if hi == "inf" else int(hi))


def bucket_order(name: str) -> tuple[float, float, str]:
    """How bucket names sort: a training bucket ``lo-hi`` by its range, an evaluation length ``L`` as L,
    any other name after them, by name.

    Args:
        name: a bucket folder name (``"512-1024"``, ``"2048-inf"``, ``"1024"``).
    """
    if name.isascii() and name.isdigit():
        return int(name), int(name), ""
    try:
        lo, hi = parse_bucket_name(name)
    except ValueError:
        return math.inf, math.inf, name
    return lo, math.inf if hi is None else hi, ""


def shard_relpath(split: str, index: int, fmt: str, bucket: str | None = None) -> str:
    """Where shard ``index`` lives inside a dataset directory.

    Args:
        split: the split (``"train"``, ``EVAL_SPLIT``, ...).
        index: the shard's number.
        fmt: a key of ``FORMATS``.
        bucket: the length bucket's folder, if bucketed.

    Returns:
        ``<split>/[<bucket>/]shard-00000.<ext>``, ``/``-separated.
    """
    parts = [split] + ([bucket] if bucket else []) + [shard_name(index, fmt)]
    return "/".join(parts)


# Longer documents are skipped and counted, by the builders and by a loader that tokenizes: ~130 MB to
# tokenize, ~250,000 tokens, far past the longest bucket that length-extrapolation work uses. 0: no limit.
MAX_DOC_CHARS = 1_000_000


def token_dtype(vocab_size: int) -> str:
    """The storage dtype of ``input_ids``.

    Args:
        vocab_size: the tokenizer's vocabulary size.

    Returns:
        ``"uint16"`` when every id fits, else ``"uint32"``.
    """
    return "uint16" if vocab_size <= 2**16 else "uint32"


@dataclass
class ShardInfo:
    """One finished shard, as listed in the manifest."""

    path: str  # relative to DIR, with "/" separators
    samples: int
    words: int
    bytes: int
    sha256: str | None  # None: unverifiable, refused while verification is on
    tokens: int | None = None
    bucket: str | None = None
    footer_sha256: str | None = None  # parquet: the sha256 of the footer, from its start to the end of file

    def check_bytes(self, data: bytes, where: str) -> None:
        """A one-line ``LoaderError`` naming ``where`` unless ``data`` has this shard's sha256 (a shard without
        one passes: the loaders refuse it where they verify)."""
        if self.sha256 is None:
            return
        digest = hashlib.sha256(data).hexdigest()
        if digest != self.sha256:
            raise LoaderError(
                f"{where}: sha256 {digest[:16]}... does not match the manifest's {self.sha256[:16]}... "
                "(corrupt or changed shard)"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ShardInfo:
        """A shard entry from its manifest JSON object (absent fields are None; ``parse_manifest`` validates).

        Args:
            data: the JSON object.

        Returns:
            The entry.
        """
        return cls(**{key: data.get(key) for key in cls.__dataclass_fields__})


@dataclass
class Manifest:
    """The index of a dataset directory: what a reader needs, nothing it must recompute."""

    source: str
    format: str
    splits: dict[str, list[ShardInfo]]
    builder: dict[str, Any]  # {"name", "version", "arguments"}: enough to rebuild byte for byte
    # {"path": "tokenizer.json", "sha256", "vocab_size", "eos_id"}, and for an attached tokenizer whose ids
    # were stored, "shards": shard path -> its token shard (``token_shards``)
    tokenizer: dict[str, Any] | None = None
    buckets: list[str] | None = None  # bucket folder names in length order, when bucketed
    extra: dict[str, Any] = field(default_factory=dict)  # statistics, ledgers, evaluation ids ...
    format_version: int = FORMAT_VERSION

    @property
    def tokenized(self) -> bool:
        """Whether the records hold token ids (else a stored tokenizer, if any, tokenizes text on reading)."""
        shards = [shard for split in self.splits.values() for shard in split]
        return bool(shards) and all(shard.tokens is not None for shard in shards)

    def shards(self, split: str, bucket: str | None = None) -> list[ShardInfo]:
        """The shards of a split, in manifest order.

        Args:
            split: the split name.
            bucket: only this length bucket's shards (None: all).

        Returns:
            The entries; ``LoaderError`` when the split does not exist.
        """
        if split not in self.splits:
            raise LoaderError(f"{MANIFEST_NAME}: no split {split!r} (has {sorted(self.splits)})")
        shards = self.splits[split]
        return shards if bucket is None else [s for s in shards if s.bucket == bucket]

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON-ready data (shard fields that are None left out).

        Returns:
            A dict for ``json.dumps``.
        """
        data = asdict(self)
        data["splits"] = {
            split: [{k: v for k, v in asdict(s).items() if v is not None} for s in shards]
            for split, shards in self.splits.items()
        }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Manifest:
        """A manifest from its JSON data (earlier split names renamed; ``parse_manifest`` validates first).

        Args:
            data: the parsed ``manifest.json``.

        Returns:
            The manifest.
        """
        fields = dict(data)
        fields["splits"] = {
            LEGACY_SPLITS.get(split, split): [ShardInfo.from_dict(s) for s in shards]
            for split, shards in data["splits"].items()
        }
        return cls(**{key: fields[key] for key in cls.__dataclass_fields__ if key in fields})


def write_manifest(directory: str | os.PathLike | Storage, manifest: Manifest) -> str:
    """Publish ``DIR/manifest.json`` atomically (local folder or object store).

    Args:
        directory: the dataset directory, a path, URL or ``Storage``.
        manifest: what to write (sorted keys, indented).

    Returns:
        The manifest's path or URL.
    """
    store = as_storage(directory)
    text = json.dumps(manifest.to_dict(), indent=2, sort_keys=True) + "\n"
    store.write_bytes(MANIFEST_NAME, text.encode("utf-8"))
    return store.location(MANIFEST_NAME)


def read_manifest(directory: str | os.PathLike | Storage) -> Manifest:
    """Read and validate ``DIR/manifest.json`` (see ``parse_manifest``).

    Args:
        directory: the dataset directory, a path, URL or ``Storage``.

    Returns:
        The manifest; a one-line ``LoaderError`` naming the file when it is missing or malformed.
    """
    store = as_storage(directory)
    where = store.location(MANIFEST_NAME)
    try:
        return parse_manifest(store.read_bytes(MANIFEST_NAME), where)
    except StorageError as error:
        if error.reason == "not found":
            raise LoaderError(f"{where}: not found (is {store} an ltsgen dataset directory?)") from None
        raise LoaderError(str(error)) from None  # a dataset that cannot be read, not a folder to write


def parse_manifest(raw: bytes, where: str) -> Manifest:
    """Parse and validate a manifest, once, for every reader (loaders, cards, build reruns, training).

    Args:
        raw: the bytes of ``manifest.json``.
        where: its path or URL, for the messages.

    Returns:
        The manifest, every field of the expected type and range and every path inside the directory.

    Raises:
        LoaderError: one line naming the file and the field, e.g.
            ``DIR/manifest.json: splits.train[3].samples must be a non-negative integer, not '20'``.
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as error:  # ValueError: bad UTF-8, bad JSON, a huge integer
        raise LoaderError(f"{where}: not valid JSON ({error})") from None
    if not isinstance(data, dict) or "splits" not in data:
        raise LoaderError(f"{where}: not an ltsgen manifest (no 'splits')")
    check = _Checker(where)
    version = data.get("format_version", FORMAT_VERSION)
    check.field("format_version", version, _is_count(version) and version >= 1, f"a positive {COUNT}")
    if version > FORMAT_VERSION:
        raise LoaderError(
            f"{where}: format version {version} is newer than this ltsgen reads ({FORMAT_VERSION})"
        )
    check.field("source", data.get("source"), isinstance(data.get("source"), str), "a string")
    if data.get("format") not in FORMATS:
        raise LoaderError(
            f"{where}: unknown shard format {data.get('format')!r} (one of {', '.join(FORMATS)})"
        )
    for name in ("builder", "extra"):
        value = data.get(name, {})
        check.field(name, value, isinstance(value, dict), "an object")
    buckets = data.get("buckets")
    check.field("buckets", buckets, buckets is None or _is_list_of(buckets, str), "a list of strings or null")
    tokenizer = data.get("tokenizer")
    if tokenizer is not None:
        check.field("tokenizer", tokenizer, isinstance(tokenizer, dict), "an object or null")
        check.relpath("tokenizer.path", tokenizer.get("path"))
        check.optional(tokenizer, "tokenizer", "sha256", str, "a string")
        for name in ("vocab_size", "eos_id"):
            check.optional(tokenizer, "tokenizer", name, _is_token_count, f"a non-negative {TOKEN_COUNT}")
        vocab, eos = tokenizer.get("vocab_size"), tokenizer.get("eos_id")
        if vocab is not None and eos is not None and eos >= vocab:
            raise LoaderError(f"{where}: tokenizer.eos_id {eos} is outside the vocabulary of {vocab} tokens")
        _check_token_shards(check, tokenizer.get("shards"))
    splits = data["splits"]
    check.field("splits", splits, isinstance(splits, dict), "an object of split name -> list of shards")
    for split, shards in splits.items():
        check.field(f"splits.{split}", shards, isinstance(shards, list), "a list of shards")
        for number, shard in enumerate(shards):
            name = f"splits.{split}[{number}]"
            check.field(
                name, shard, isinstance(shard, dict), "an object (path, samples, words, bytes, sha256)"
            )
            check.relpath(f"{name}.path", shard.get("path"))
            for count in ("samples", "words", "bytes"):
                value = shard.get(count)
                check.field(f"{name}.{count}", value, _is_count(value), f"a non-negative {COUNT}")
            check.optional(shard, name, "tokens", _is_count, f"a non-negative {COUNT}")
            check.optional(shard, name, "sha256", _is_sha256, "64 hexadecimal digits")
            check.optional(shard, name, "footer_sha256", _is_sha256, "64 hexadecimal digits")
            check.optional(shard, name, "bucket", str, "a string")
        for count in ("samples", "words", "bytes", "tokens"):
            total = sum(shard.get(count) or 0 for shard in shards)
            check.field(
                f"splits.{split}", f"{count} adding up to {total}", total < 2**62, "below 2**62 in all"
            )
    data = dict(data, builder=data.get("builder", {}))
    return Manifest.from_dict(data)


def token_shards(manifest: Manifest, shards: list[ShardInfo]) -> list[ShardInfo] | None:
    """The stored token ids of ``shards`` (parquet shards of ``input_ids``, one row per record, footer
    indexed), when the manifest's attached tokenizer has them for every one, else None.

    ``ltsgen tokenizer --data DIR`` writes them: they are tied to the tokenizer's sha256 (the entry that
    lists them), and record each shard's token count, so a packed stream is planned without tokenizing.

    Args:
        manifest: the dataset's manifest.
        shards: some of its shards.

    Returns:
        One entry per shard (its ``samples`` and ``bucket``, the token shard's path, size and digests).
    """
    stored = (manifest.tokenizer or {}).get("shards") or {}
    if not shards or any(s.path not in stored for s in shards):
        return None
    return [
        ShardInfo(
            path=stored[s.path]["path"],
            samples=s.samples,
            words=0,
            bytes=stored[s.path]["bytes"],
            sha256=stored[s.path]["sha256"],
            tokens=stored[s.path]["tokens"],
            bucket=s.bucket,
            footer_sha256=stored[s.path]["footer_sha256"],
        )
        for s in shards
    ]


def _check_token_shards(check: _Checker, shards: Any) -> None:
    if shards is None:
        return
    check.field(
        "tokenizer.shards", shards, isinstance(shards, dict), "an object of shard path -> token shard"
    )
    for source, entry in shards.items():
        name = f"tokenizer.shards[{source!r}]"
        check.field(
            name, entry, isinstance(entry, dict), "an object (path, tokens, bytes, sha256, footer_sha256)"
        )
        check.relpath(f"{name}.path", entry.get("path"))
        for count in ("tokens", "bytes"):
            value = entry.get(count)
            check.field(f"{name}.{count}", value, _is_count(value), f"a non-negative {COUNT}")
        for digest in ("sha256", "footer_sha256"):
            value = entry.get(digest)
            check.field(f"{name}.{digest}", value, _is_sha256(value), "64 hexadecimal digits")
    total = sum(entry["tokens"] for entry in shards.values())
    check.field("tokenizer.shards", f"tokens adding up to {total}", total < 2**62, "below 2**62 in all")


def check_relpath(path: Any, where: str, name: str = "path") -> None:
    """Refuse a path from a manifest unless it is relative and inside the directory, in every source.

    Args:
        path: the ``/``-separated path as read.
        where: the manifest, for the message.
        name: the field, for the message.
    """
    if not isinstance(path, str):
        raise LoaderError(f"{where}: {name} must be a relative path (a string), not {_shown(path)}")
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts) or _UNSAFE_PATH.search(path):
        raise LoaderError(f"{where}: {name} {path!r} is not a relative path inside the dataset directory")


# absolute or drive paths, URLs, Windows separators, control characters, URL query and escape marks
_UNSAFE_PATH = re.compile(r"[\\:?#%\x00-\x1f\x7f]")


class _Checker:
    """One-line errors naming the manifest and the field."""

    def __init__(self, where: str) -> None:
        self.where = where

    def field(self, name: str, value: Any, ok: bool, expected: str) -> None:
        if not ok:
            raise LoaderError(f"{self.where}: {name} must be {expected}, not {_shown(value)}")

    def optional(self, record: dict, prefix: str, key: str, kind: Any, expected: str) -> None:
        value = record.get(key)
        ok = value is None or (isinstance(value, kind) if isinstance(kind, type) else kind(value))
        self.field(f"{prefix}.{key}", value, ok, f"{expected} or null")

    def relpath(self, name: str, path: Any) -> None:
        check_relpath(path, self.where, name)


def _is_count(value: Any, limit: int = 2**53) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < limit


def _is_token_count(value: Any) -> bool:
    return _is_count(value, 2**32)


def _is_sha256(value: Any) -> bool:
    return isinstance(value, str) and re.fullmatch(r"[0-9a-f]{64}", value) is not None


def _is_list_of(value: Any, kind: type) -> bool:
    return isinstance(value, list) and all(isinstance(item, kind) for item in value)


def _shown(value: Any) -> str:
    if value is None:
        return "null (or missing)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
