"""Hostile manifests and shard paths: one validation in the contract that every reader reaches (loaders,
`ltsgen card`, a `stories` rerun, `train --data`), paths kept inside the directory for every source, a
`pipe:` path quoted for the shell, unverifiable shards refused, and skipped shards named."""

from __future__ import annotations

import json
import shlex
import shutil
import warnings
from pathlib import Path

import pytest
from http_server import served_folder
from loader_fixtures import make_dataset

from ltsgen.cli import main
from ltsgen.loaders import LoaderError, StreamingDataset
from ltsgen.loaders.contract import MANIFEST_NAME, parse_manifest, read_manifest

STORIES = ["--num-stories", "6", "--max-words", "300", "--quiet"]


def first_shard(manifest: dict) -> dict:
    return manifest["splits"]["train"][0]


# (what is changed, the field the one-line error must name)
HOSTILE = {
    "format_version '2'": (
        lambda m: m.update(format_version="2"),
        "format_version must be a positive integer",
    ),
    "format_version null": (
        lambda m: m.update(format_version=None),
        "format_version must be a positive integer",
    ),
    "splits a list": (lambda m: m.update(splits=[m["splits"]]), "splits must be an object"),
    "a shard a string": (
        lambda m: m["splits"].update(train=["shard.tar"]),
        r"splits.train\[0\] must be an object",
    ),
    "samples '20'": (
        lambda m: first_shard(m).update(samples="20"),
        r"splits.train\[0\].samples must be a non-neg",
    ),
    "samples null": (
        lambda m: first_shard(m).update(samples=None),
        r"splits.train\[0\].samples must be a non-neg",
    ),
    "samples -5": (
        lambda m: first_shard(m).update(samples=-5),
        r"splits.train\[0\].samples must be a non-neg",
    ),
    "no path": (lambda m: first_shard(m).pop("path"), r"splits.train\[0\].path must be a relative path"),
    "path outside": (
        lambda m: first_shard(m).update(path="../../../../etc/passwd"),
        r"splits.train\[0\].path '../../../../etc/passwd' is not a relative path inside",
    ),
    "absolute path": (lambda m: first_shard(m).update(path="/etc/passwd"), "is not a relative path inside"),
    "a URL as path": (lambda m: first_shard(m).update(path="s3://elsewhere/x.tar"), "is not a relative path"),
    "sha256 not hex": (
        lambda m: first_shard(m).update(sha256="abc"),
        r"splits.train\[0\].sha256 must be 64 hex",
    ),
    "tokens a float": (
        lambda m: first_shard(m).update(tokens=3.5),
        r"splits.train\[0\].tokens must be a non-neg",
    ),
    "samples 10**30": (
        lambda m: first_shard(m).update(samples=10**30),
        r"splits.train\[0\].samples must be a non-negative integer below 2\*\*53, not 1000000",
    ),
    "eos_id outside the vocabulary": (
        lambda m: m.update(tokenizer={"path": "tokenizer.json", "vocab_size": 300, "eos_id": 300}),
        "tokenizer.eos_id 300 is outside the vocabulary of 300 tokens",
    ),
    "a split adding up past 2**62": (
        lambda m: m["splits"]["train"].extend(dict(first_shard(m), words=2**53 - 1) for _ in range(600)),
        r"splits.train must be below 2\*\*62 in all, not 'words adding up to",
    ),
    "a token shard's count past 2**53": (
        lambda m: m.update(
            tokenizer={
                "path": "tokenizer.json",
                "shards": {
                    first_shard(m)["path"]: {
                        "path": "tokens/0123456789abcdef/train/shard-00000.parquet",
                        "tokens": 2**53,
                        "bytes": 100,
                        "sha256": "0" * 64,
                        "footer_sha256": "0" * 64,
                    }
                },
            }
        ),
        r"tokenizer.shards\['train/[^']+'\].tokens must be a non-negative integer below 2\*\*53, not 9007",
    ),
    "tokenizer outside": (
        lambda m: m.update(tokenizer={"path": "../tok.json"}),
        "tokenizer.path '../tok.json'",
    ),
}


@pytest.fixture(scope="module")
def stories_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "lts"
    assert main(["stories", "--out", str(out), *STORIES]) == 0
    return out


def hostile_copy(source: Path, target: Path, change) -> Path:
    shutil.copytree(source, target)
    manifest = json.loads((target / MANIFEST_NAME).read_text())
    change(manifest)
    (target / MANIFEST_NAME).write_text(json.dumps(manifest))
    return target


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"ltsgen {command}: error: "), err
    return err[0]


@pytest.mark.parametrize("case", list(HOSTILE))
def test_hostile_manifest_is_one_line_naming_the_field_in_every_reader(stories_build, tmp_path, capsys, case):
    change, message = HOSTILE[case]
    directory = hostile_copy(stories_build, tmp_path / "d", change)
    where = f"{directory / MANIFEST_NAME}: "
    with pytest.raises(LoaderError, match=message):
        read_manifest(directory)
    with pytest.raises(LoaderError, match=message):
        StreamingDataset(directory)
    assert main(["card", str(directory)]) == 2
    assert where in one_line_error(capsys, "card")
    assert main(["train", "--data", str(directory), "--out", str(tmp_path / "run"), "--steps", "1"]) == 2
    assert where in one_line_error(capsys, "train")
    # a rerun of the build either refuses in one line or rebuilds a valid manifest from its journal
    status = main(["stories", "--out", str(directory), *STORIES])
    if status == 2:
        assert where in one_line_error(capsys, "stories")
    else:
        assert status == 0 and read_manifest(directory).splits == read_manifest(stories_build).splits


def test_manifest_errors_that_are_not_json_or_too_deep(tmp_path):
    with pytest.raises(LoaderError, match="m.json: not valid JSON"):
        parse_manifest(b"[" * 100_000, "m.json")
    with pytest.raises(LoaderError, match="m.json: not an ltsgen manifest"):
        parse_manifest(b"[]", "m.json")


@pytest.fixture
def served(tmp_path):
    """``tmp_path`` over HTTP on 127.0.0.1."""
    with served_folder(tmp_path) as url:
        yield url


def test_a_shard_outside_the_directory_is_refused_for_every_source(tmp_path, served):
    """The shard outside has the right bytes and checksum: only the path check stops it."""
    directory = make_dataset(tmp_path / "data", [3, 2])
    sources = [
        str(directory),
        f"file://{directory}",
        f"{served}/data",
        f"pipe:cat {shlex.quote(str(directory))}/{{path}}",
    ]
    assert [len(list(StreamingDataset(root, allow_pipe=True))) for root in sources] == [5] * 4
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    shutil.copy(directory / first_shard(manifest)["path"], tmp_path / "outside.parquet")
    first_shard(manifest)["path"] = "../outside.parquet"
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    for root in sources:
        with pytest.raises(LoaderError, match="'../outside.parquet' is not a relative path inside"):
            StreamingDataset(root, allow_pipe=True)


def test_a_pipe_path_is_quoted_for_the_shell(tmp_path, monkeypatch):
    directory = make_dataset(tmp_path / "data", [3, 2])
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    first_shard(manifest)["path"] = "x; touch pwned; echo"
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    monkeypatch.chdir(tmp_path)
    dataset = StreamingDataset(
        f"pipe:cat {shlex.quote(str(directory))}/{{path}}", shuffle=False, allow_pipe=True
    )
    with pytest.raises(LoaderError, match=r"x; touch pwned; echo.*exited with status 1"):
        list(dataset)
    assert not (tmp_path / "pwned").exists()


def test_a_shard_without_sha256_is_refused_while_verifying(tmp_path):
    directory = make_dataset(tmp_path, [3, 2])
    manifest = json.loads((directory / MANIFEST_NAME).read_text())
    del manifest["splits"]["train"][1]["sha256"]
    (directory / MANIFEST_NAME).write_text(json.dumps(manifest))
    with pytest.raises(LoaderError, match=r"shard train/shard-00001.parquet has no sha256 .* verify=False"):
        StreamingDataset(directory)
    assert len(list(StreamingDataset(directory, verify=False))) == 5


@pytest.mark.parametrize("tokenized", [True, False])
def test_every_shard_skipped_names_them_not_the_batch_size(tmp_path, tokenized):
    from tokenizers import Tokenizer, models

    directory = make_dataset(tmp_path, [3, 2, 4], tokenized=tokenized)
    for shard in read_manifest(directory).shards("train"):
        (directory / shard.path).write_bytes(b"not a shard")
    tokenizer = Tokenizer(models.WordLevel({"<|endoftext|>": 0, "[UNK]": 1}, unk_token="[UNK]"))
    options = {"seq_len": 3, "on_error": "skip", "tokenizer": tokenizer, "verify": False}
    message = r"skipped as corrupt: .*shard-0000\d.parquet: corrupt parquet shard.*; .*shard-0000\d.parquet"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if tokenized:  # counts come from the manifest: the first window, then every other, finds them corrupt
            with pytest.raises(LoaderError, match=f"every shard of the split is corrupt: {message}"):
                list(StreamingDataset(directory, **options))
        else:  # counting tokens finds them corrupt
            with pytest.raises(LoaderError, match=f"too few items left for one global batch: {message}"):
                StreamingDataset(directory, **options)
