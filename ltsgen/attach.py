"""Attach a tokenizer to a finished dataset directory whose records hold text only, with its token ids.

Under the directory's build lock, the text of every shard of every split is tokenized into a token shard
(``DIR/tokens/<tokenizer sha256[:16]>/<shard path>.parquet``: one row of ``input_ids`` per record, in
order, its footer indexed like any parquet shard), each announced in ``DIR/.ltsgen/writing.jsonl``,
published atomically and journaled in ``DIR/.ltsgen/tokens.jsonl`` as it finishes, so that a killed run
resumes where it stopped (the finished token shards of the same tokenizer whose bytes still match are kept;
one published by a run killed before its journal line is ltsgen's by its announcement, and is written
again). Then ``DIR/tokenizer.json`` and
the files ``transformers.AutoTokenizer`` reads beside it are published, and ``DIR/manifest.json`` is
rewritten atomically with its ``tokenizer`` entry listing each shard's token shard and count (the manifest
still comes last); the token shards of a tokenizer it replaces are removed after it, and the data card of a
local directory is written again (not one edited by hand, nor a remote one: a note says so). Every file is
recorded as ltsgen's, so that ``--overwrite`` removes it with the rest of the build.

The loaders then read the stored ids instead of tokenizing (``StreamingDataset(DIR, seq_len=N)``, as do
``ltsgen train`` and ``compare``), and plan the packed stream from the stored counts.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from tokenizers import Tokenizer

from ltsgen.build import BuildError, build_running, end_torn_line, verified_journal
from ltsgen.card import card_conflict, write_card
from ltsgen.loaders.contract import (
    CARD_NAME,
    MAX_DOC_CHARS,
    TOKENIZER_NAME,
    Manifest,
    ShardInfo,
    read_manifest,
    token_dtype,
    write_manifest,
)
from ltsgen.loaders.errors import LoaderError
from ltsgen.loaders.formats import decode_shard
from ltsgen.loaders.packing import without_truncation
from ltsgen.loaders.reader import check_texts
from ltsgen.loaders.storage import LockHeld, Storage, StorageError, as_storage
from ltsgen.outputs import (
    LOCK_PATH,
    TOKENS_JOURNAL_PATH,
    WRITING_PATH,
    JobResult,
    announce,
    expect_outputs,
    logged_files,
    output_state,
    record_outputs,
    remove_emptied_folders,
    remove_temporary_files,
    written_files,
)
from ltsgen.shards import ShardWriter
from ltsgen.tokenizer import (
    SIDE_FILES,
    TokenizerError,
    encode_arrays,
    hugging_face_files,
    manifest_entry,
    tokenizer_bytes,
)

TOKENS_DIR = "tokens"
# Records per row group of a token shard: a first batch decodes the few row groups its documents live in,
# and a token shard's rows are small (no text), so that smaller groups cost little in size.
TOKEN_ROW_GROUP_ROWS = 32


def attachable_manifest(directory: str | os.PathLike | Storage) -> Manifest:
    """The manifest of ``directory`` if a tokenizer can be attached to it (its records hold no token ids).

    Raises:
        TokenizerError: the records hold token ids, which only the directory's own tokenizer reads.
        LoaderError: the directory has no readable manifest.
        BuildError: a file attaching writes (``tokenizer.json`` and the files beside it) is not ltsgen's, or
            was edited since ltsgen wrote it.
    """
    manifest = read_manifest(directory)
    if manifest.tokenized:
        raise TokenizerError(
            f"{as_storage(directory)}: its records hold token ids of its own tokenizer; "
            "give --out to write another tokenizer elsewhere"
        )
    store = as_storage(directory)
    for name in (TOKENIZER_NAME, *SIDE_FILES):
        state = output_state(store, name)
        if state in ("other", "changed"):
            whose = "not written by ltsgen" if state == "other" else "edited since ltsgen wrote it"
            raise BuildError(
                f"{store.location(name)}: {whose}; move it away to attach one "
                "(ltsgen never writes over a file of yours)"
            )
    return manifest


class Attached(NamedTuple):
    """What ``attach_tokenizer`` did: the new manifest entry, the one it replaced (None if there was none),
    how many token shards an interrupted earlier run had finished (kept, not tokenized again), and why the
    card was not written again (None when it was, or the directory has none)."""

    entry: dict[str, Any]
    previous: dict[str, Any] | None
    kept: int
    card_note: str | None


def attach_tokenizer(
    directory: str | os.PathLike | Storage,
    tokenizer: Tokenizer,
    *,
    progress: bool = False,
    max_doc_chars: int = MAX_DOC_CHARS,
) -> Attached:
    """Store ``tokenizer`` and its token ids in the directory (see the module docstring).

    Args:
        directory: a finished, untokenized ltsgen dataset directory (local folder or URL).
        tokenizer: the tokenizer to attach.
        progress: show a progress bar over the shards.
        max_doc_chars: refuse a shard holding a text longer than this before tokenizing it (0: no limit).

    Returns:
        ``Attached``: the new manifest entry, the one replaced, the token shards kept, a note on the card.

    Raises:
        TokenizerError, LoaderError: as ``attachable_manifest``, or a shard that does not match its
        sha256 or holds a text over ``max_doc_chars``; BuildError: a build is running there, a file it
        would write is not ltsgen's, or a file cannot be written.
    """
    store = as_storage(directory)
    tokenizer = without_truncation(tokenizer)  # documents are tokenized whole, and stored with it so
    raw = tokenizer_bytes(tokenizer)
    try:
        with store.lock(LOCK_PATH):
            remove_temporary_files(
                store
            )  # left by a killed run (only the temporary names of ltsgen's writes)
            manifest = attachable_manifest(store)
            _check_tokens_folder(store)
            entry = manifest_entry(tokenizer, raw)
            shards, kept = _token_shards(store, manifest, tokenizer, entry["sha256"], progress, max_doc_chars)
            entry["shards"] = {source: _entry(info) for source, info in shards.items()}
            files = {**hugging_face_files(tokenizer), TOKENIZER_NAME: raw}
            expect_outputs(store, files)
            for name, data in files.items():
                store.write_bytes(name, data)
            previous, manifest.tokenizer = manifest.tokenizer, entry
            write_manifest(store, manifest)
            record_outputs(store, list(files))
            _remove_replaced(store, previous, entry)
            _remove_abandoned(store, entry)
            store.remove_log(TOKENS_JOURNAL_PATH)
            store.remove_log(WRITING_PATH)
            card_note = _card_again(store)
    except LockHeld as error:
        raise build_running(store, error.reason) from None
    except StorageError as error:
        raise BuildError(f"{store}: cannot write there ({error.reason})") from None
    except OSError as error:  # a shard, the tokenizer, the manifest or the outputs record
        raise BuildError(f"{store}: cannot write there ({error.strerror or error})") from None
    return Attached(manifest.tokenizer, previous, kept, card_note)


def _card_again(store: Storage) -> str | None:
    """Write the card again, now that it has a tokenizer to name, when it is ltsgen's and unedited and the
    data is local (the card reads every shard; the shards were checked as they were tokenized); else, or
    when it cannot be written, a note saying how to write it."""
    if not store.is_file(CARD_NAME):
        return None
    later = f"`ltsgen card {store}` names the tokenizer in it"
    conflict = card_conflict(store)
    if conflict:
        return f"{conflict}, so it was not written again: {later}"
    if not store.is_local:
        return f"{store.location(CARD_NAME)} was not written again (it reads every shard once more): {later}"
    try:
        write_card(store, verify=False)
    except (LoaderError, StorageError, OSError) as error:
        return f"{store.location(CARD_NAME)} was not written again ({error}): {later}"
    return None


def _token_shards(
    store: Storage, manifest: Manifest, tokenizer: Tokenizer, sha256: str, progress: bool, max_doc_chars: int
) -> tuple[dict[str, ShardInfo], int]:
    """Each shard's token shard (source path -> entry), those of an interrupted run kept, and their count."""
    from tqdm import tqdm

    shards = [shard for split in manifest.splits.values() for shard in split]
    keys = {shard.path: f"{sha256}:{shard.path}:{shard.sha256}" for shard in shards}
    kept = verified_journal(store, set(keys.values()), TOKENS_JOURNAL_PATH)
    done = {shard.path: kept[keys[shard.path]].shards[0] for shard in shards if keys[shard.path] in kept}
    dtype = token_dtype(tokenizer.get_vocab_size())
    end_torn_line(store, TOKENS_JOURNAL_PATH)
    todo = [shard for shard in shards if shard.path not in done]
    written = written_files(store)
    for shard in todo:  # refused before any is written: a file of the user's where a token shard goes
        relpath = token_shard_path(sha256, shard.path)
        if relpath not in written and store.is_file(relpath):
            raise BuildError(
                f"{store.location(relpath)}: not written by ltsgen, and attaching writes there; move it away "
                "(ltsgen never writes over a file of yours)"
            )
    with tqdm(
        total=len(shards), initial=len(done), unit=" shards", desc="token ids", disable=not progress
    ) as bar:
        for shard in todo:
            info = _write_token_shard(store, manifest.format, shard, tokenizer, dtype, sha256, max_doc_chars)
            stamp = None if store.is_local else store.stamp(info.path)
            result = JobResult(keys[shard.path], [info], stamps={info.path: stamp} if stamp else {})
            store.append_line(TOKENS_JOURNAL_PATH, result.to_json())
            done[shard.path] = info
            bar.update()
    return {shard.path: done[shard.path] for shard in shards}, len(shards) - len(todo)


def _write_token_shard(
    store: Storage,
    fmt: str,
    shard: ShardInfo,
    tokenizer: Tokenizer,
    dtype: str,
    sha256: str,
    max_doc_chars: int,
) -> ShardInfo:
    """Tokenize one checked shard's text into its token shard; its manifest entry."""
    where = store.location(shard.path)
    data = store.read_bytes(shard.path)
    shard.check_bytes(data, where)
    columns = decode_shard(data, fmt, where, ["id", "text", "source"])
    del data
    check_texts(columns, max_doc_chars, where, "--max-doc-chars", remedy="")
    values, offsets = encode_arrays(tokenizer, columns.fields["text"])
    relpath = token_shard_path(sha256, shard.path)
    announce(store, relpath)
    with ShardWriter(store, relpath, "parquet", dtype, row_group_rows=TOKEN_ROW_GROUP_ROWS) as writer:
        for row, (key, source) in enumerate(zip(columns.fields["id"], columns.fields["source"], strict=True)):
            ids = values[offsets[row] : offsets[row + 1]]
            writer.write({"id": key, "text": "", "source": source, "input_ids": ids})
    return writer.info


def token_shard_path(sha256: str, shard: str) -> str:
    """Where the token ids of ``shard`` (a shard path) by the tokenizer with ``sha256`` are stored."""
    stem = shard.rsplit(".", 2 if shard.endswith(".jsonl.zst") else 1)[0]
    return f"{TOKENS_DIR}/{sha256[:16]}/{stem}.parquet"


def _entry(info: ShardInfo) -> dict[str, Any]:
    return {
        "path": info.path,
        "tokens": info.tokens,
        "bytes": info.bytes,
        "sha256": info.sha256,
        "footer_sha256": info.footer_sha256,
    }


def _remove_abandoned(store: Storage, entry: dict[str, Any]) -> None:
    """Remove the token shards that an interrupted run of another tokenizer journaled or announced: no
    manifest names them, and once the logs are cleared nothing would know them as ltsgen's."""
    kept = {stored["path"] for stored in entry["shards"].values()}
    logged = logged_files(store, TOKENS_JOURNAL_PATH, WRITING_PATH)
    abandoned = sorted(path for path in logged if _token_shard(path) and path not in kept)
    for relpath in abandoned:
        if store.is_file(relpath):
            store.remove(relpath)
    remove_emptied_folders(store, abandoned)


def _remove_replaced(store: Storage, previous: dict[str, Any] | None, entry: dict[str, Any]) -> None:
    """Remove the token shards of the tokenizer that ``entry`` replaced (those its manifest entry listed,
    and the folders this leaves empty; nothing else)."""
    if not previous or not previous.get("shards") or previous.get("sha256") == entry["sha256"]:
        return
    replaced = [stored["path"] for stored in previous["shards"].values() if _token_shard(stored.get("path"))]
    for relpath in replaced:
        store.remove(relpath)
    remove_emptied_folders(store, replaced)


def _check_tokens_folder(store: Storage) -> None:
    """Refuse, before any work, a ``tokens/`` folder that a symlink takes out of the dataset: the token
    shards of a replaced tokenizer are removed there, and nothing outside a dataset is ever removed."""
    if store.exists(TOKENS_DIR) and store.leads_out(f"{TOKENS_DIR}/shard"):  # where its shards go
        raise BuildError(
            f"{store.location(TOKENS_DIR)}: leads out of the dataset (a symlink): token shards are written and "
            "replaced there, so make it a folder of the dataset"
        )


def _token_shard(relpath: Any) -> bool:
    """Whether a path a manifest or journal names (data, not trusted) is one of the token shards attaching
    writes: under ``tokens/``, without a way out of it. Nothing else is ever removed for a tokenizer."""
    return (
        isinstance(relpath, str) and relpath.startswith(f"{TOKENS_DIR}/") and ".." not in relpath.split("/")
    )
