"""Faults of the build driver, tried as a user meets them: ``--overwrite`` beside a user's files, a second
build into a running one, a finished build in a folder nothing may write, a full disk, a kill just after the
manifest, a kill between a token shard's publish and its journal line. Real ``ltsgen`` processes, real signals, real kernel file-size limits."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from pathlib import Path

import pytest
from faults import corpus_and_tokenizer, end, kill_when, ltsgen, one_line_error, start, tree, write_corpus

from ltsgen.build import finished_manifest
from ltsgen.cli import main
from ltsgen.loaders.contract import FORMATS, read_manifest
from ltsgen.loaders.files import sha256_file
from ltsgen.outputs import JOURNAL_NAME, STATE_DIR, JobResult

STORIES = ["stories", "--num-stories", "20", "--max-words", "300", "--quiet"]
USER_FILES = {
    "README.md": b"# my notes\n",
    "mystuff/manifest.json": b'{"mine": true}\n',
    "mystuff/tokenizer.json": b"{}\n",
    "mystuff/shard-00000.parquet": b"not a shard of any build\n",
}


def put(directory: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (directory / name).parent.mkdir(parents=True, exist_ok=True)
        (directory / name).write_bytes(data)


def holds(directory: Path, files: dict[str, bytes]) -> bool:
    return all((directory / name).read_bytes() == data for name, data in files.items())


def built_files(directory: Path) -> set[str]:
    """The shards, manifest and card files of the build in ``directory``."""
    manifest = read_manifest(directory)
    shards = {s.path for shards in manifest.splits.values() for s in shards}
    card = {name for name in ("README.md", "length_histogram.png") if (directory / name).exists()}
    return shards | {"manifest.json"} | card


def refused_here(capsys, *args: str) -> str:
    """The one stderr line of ``ltsgen stories ARGS`` run in this process, refused with exit status 2."""
    capsys.readouterr()
    assert main(list(args)) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ltsgen stories: error: "), lines
    return lines[0]


def test_overwrite_keeps_every_file_no_build_wrote(tmp_path, capsys):
    """In this process (the console script's refusals are the full-disk and kill tests' below)."""
    out = tmp_path / "X"
    put(out, USER_FILES)
    refused = refused_here(capsys, *STORIES, "--out", str(out))
    assert (
        "holds no ltsgen build" in refused
        and "--overwrite to build beside its files (they are kept)" in refused
    )
    assert sorted(tree(out, state=True)) == sorted(USER_FILES)  # a refused build writes nothing

    assert main([*STORIES, "--out", str(out), "--overwrite"]) == 0
    assert holds(out, USER_FILES)
    assert (
        f"{out / 'README.md'} was not written by ltsgen; the card was not written" in capsys.readouterr().out
    )
    assert set(tree(out)) == set(USER_FILES) | built_files(out)

    # a user's file inside an existing build, then the build replaced by one with other arguments
    put(out, {"analysis/README.md": b"results\n"})
    first_shards = {s.path for shards in read_manifest(out).splits.values() for s in shards}
    refused = refused_here(capsys, *STORIES, "--out", str(out), "--seed", "1")
    assert "seed 0 -> 1" in refused and "removes only the files that build wrote" in refused
    assert main([*STORIES, "--out", str(out), "--seed", "1", "--overwrite"]) == 0
    assert holds(out, {**USER_FILES, "analysis/README.md": b"results\n"})
    assert read_manifest(out).builder["arguments"]["seed"] == 1
    assert set(tree(out)) == set(USER_FILES) | {"analysis/README.md"} | built_files(out)
    assert first_shards <= built_files(out)  # same names, new bytes: nothing of seed 0 is left
    assert finished_manifest(out, read_manifest(out).builder) is not None


def test_overwrite_refuses_a_file_of_yours_where_the_new_build_writes(tmp_path, capsys):
    out = tmp_path / "X"
    mine = {"train/shard-00000.parquet": b"my own parquet\n"}
    put(out, mine)
    assert main([*STORIES, "--out", str(out), "--overwrite", "--no-card"]) == 2
    refused = capsys.readouterr().err
    assert refused == (
        f"ltsgen stories: error: {out / 'train/shard-00000.parquet'}: not written by ltsgen, and this build "
        "writes there; move it away (--overwrite keeps files of yours, it never replaces them)\n"
    )
    assert sorted(tree(out, state=True)) == sorted(mine)  # nothing written, nothing replaced

    # beside an earlier build: refused before that build is removed; its own shards it may replace
    (out / "train/shard-00000.parquet").unlink()
    assert main([*STORIES, "--out", str(out), "--no-card"]) == 0
    before = {name: (out / name).read_bytes() for name in tree(out, state=True)}
    put(out, {"train/shard-00002.parquet": b"mine too\n"})
    more_shards = [*STORIES, "--out", str(out), "--samples-per-shard", "5", "--overwrite", "--no-card"]
    assert main(more_shards) == 2
    assert f"{out / 'train/shard-00002.parquet'}: not written by ltsgen" in capsys.readouterr().err
    assert holds(out, {**before, "train/shard-00002.parquet": b"mine too\n"})  # the earlier build intact

    (out / "train/shard-00002.parquet").unlink()
    (out / "train/shard-00000.parquet").write_bytes(b"edited, but the earlier manifest lists it\n")
    assert main(more_shards) == 0
    assert finished_manifest(out, read_manifest(out).builder) is not None
    assert len(read_manifest(out).splits["train"]) == 4

    # a bucket build's shards are planned only after tokenizing: refused up front where one may go
    corpus, tokenizer = corpus_and_tokenizer(tmp_path)
    bucketed = ["buckets", "--source", "c4", "--input", str(corpus), "--tokenizer", str(tokenizer)]
    bucketed += ["--out", str(out), "--bucket-lengths", "64", "--eval-sequences", "0", "--overwrite"]
    for name in ("train/64-inf/shard-00000.parquet", "tokenizer.json"):
        put(out, {name: b"mine\n"})
        capsys.readouterr()
        assert main([*bucketed, "--no-progress", "--no-card"]) == 2
        assert capsys.readouterr().err.startswith(
            f"ltsgen buckets: error: {out / name}: not written by ltsgen"
        )
        assert finished_manifest(out, read_manifest(out).builder) is not None  # the story build intact
        (out / name).unlink()
    assert main([*bucketed, "--no-progress", "--no-card"]) == 0


def test_overwrite_replaces_the_card_ltsgen_wrote_and_keeps_an_edited_one(tmp_path, capsys):
    out = tmp_path / "lts"
    assert main([*STORIES, "--out", str(out)]) == 0
    card = (out / "README.md").read_text()
    assert main([*STORIES, "--out", str(out), "--seed", "1", "--overwrite"]) == 0
    new_card = (out / "README.md").read_text()
    assert new_card != card and '"seed": 1' in new_card

    (out / "README.md").write_text(new_card + "\nMy own paragraph.\n")
    capsys.readouterr()
    assert main([*STORIES, "--out", str(out), "--seed", "2", "--overwrite"]) == 0
    assert (out / "README.md").read_text().endswith("My own paragraph.\n")
    assert "was edited since ltsgen wrote it; the card was not written" in capsys.readouterr().out

    # `ltsgen card` replaces it on request, and says what it replaced
    assert main(["card", str(out)]) == 0
    assert "was edited since ltsgen wrote it: replaced by the new card" in capsys.readouterr().out
    assert '"seed": 2' in (out / "README.md").read_text()
    assert main(["card", str(out)]) == 0
    assert "replaced" not in capsys.readouterr().out  # now as ltsgen wrote it: nothing to say


def journal_lines(directory: Path) -> int:
    path = directory / STATE_DIR / JOURNAL_NAME
    return path.read_text().count("\n") if path.exists() else 0


def test_overwrite_into_a_running_build_refuses_before_removing_anything(tmp_path):
    out = tmp_path / "lts"
    args = ["stories", "--num-stories", "60", "--max-words", "600", "--samples-per-shard", "5", "--quiet"]
    first = start(*args, "--out", out)
    try:
        deadline = time.monotonic() + 120
        while journal_lines(out) < 2:
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.005)
        os.kill(first.pid, signal.SIGSTOP)  # the build holds its lock, mid-way, for as long as needed
        before = tree(out)
        second = ltsgen(*args, "--out", out, "--seed", "1", "--overwrite")
        assert f"{out}: another build is running there (" in one_line_error(second, "stories")
        assert tree(out) == before
        os.kill(first.pid, signal.SIGCONT)
        assert first.wait(timeout=300) == 0, first.stderr.read()
    finally:
        end(first)
    manifest = read_manifest(out)
    assert manifest.builder["arguments"]["seed"] == 0
    assert finished_manifest(out, manifest.builder) is not None  # every shard is the seed-0 build's


def test_finished_build_is_nothing_to_do_without_writing(tmp_path):
    out = tmp_path / "lts"
    assert main([*STORIES, "--out", str(out)]) == 0
    (out / STATE_DIR / "lock").unlink()  # opening the lock for writing would create it again
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    for path in [*out.rglob("*"), out]:
        path.chmod(path.stat().st_mode & 0o555)
    try:
        rerun = ltsgen(*STORIES, "--out", out)
    finally:
        for path in [out, *out.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
    assert rerun.returncode == 0, rerun.stderr
    assert "build already complete" in rerun.stdout and "nothing to do" in rerun.stdout
    assert not (out / STATE_DIR / "lock").exists()
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == stamps


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_full_disk_during_stories_is_one_line_and_leaves_nothing_that_looks_complete(tmp_path, fmt):
    out, reference = tmp_path / "lts", tmp_path / "reference"
    args = ["stories", "--num-stories", "24", "--max-words", "6000", "--format", fmt, "--quiet"]
    args += ["--samples-per-shard", "12"]  # train shards of 50+ KB, the small splits' of a few KB
    error = one_line_error(ltsgen(*args, "--out", out, limit_file_blocks=24), "stories")
    assert "cannot write (File too large)" in error
    assert not (out / "manifest.json").exists()
    journal = out / STATE_DIR / JOURNAL_NAME
    journaled = {}
    for line in journal.read_text().splitlines() if journal.exists() else []:
        journaled.update({s.path: s.sha256 for s in JobResult.from_json(line).shards})
    shards = [p for p in out.rglob("shard-*") if p.is_file()]
    assert all(sha256_file(p) == journaled[p.relative_to(out).as_posix()] for p in shards)
    assert not [p for p in out.rglob("*.tmp")]

    assert main([*args, "--out", str(out)]) == main([*args, "--out", str(reference)]) == 0
    assert tree(out) == tree(reference)


def test_full_disk_while_saving_a_tokenizer_is_one_line(tmp_path):
    corpus = write_corpus(tmp_path / "corpus.jsonl", documents=40)
    out = tmp_path / "tok.json"
    args = [
        "tokenizer",
        "--source",
        "c4",
        "--input",
        corpus,
        "--vocab-size",
        "600",
        "--out",
        out,
        "--no-progress",
    ]
    error = one_line_error(ltsgen(*args, limit_file_blocks=4), "tokenizer")
    assert f"{out}: cannot write (File too large" in error
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.jsonl"]


def test_kill_just_after_the_manifest_then_rerun_removes_the_intermediate_files(tmp_path, capsys):
    corpus, tokenizer = corpus_and_tokenizer(tmp_path, documents=150)
    out = tmp_path / "buckets"
    args = ["buckets", "--source", "c4", "--input", corpus, "--tokenizer", tokenizer, "--out", out]
    args += ["--bucket-lengths", "256,1024", "--eval-sequences", "3", "--no-progress"]
    kill_when(start(*args), lambda: (out / "manifest.json").exists())  # the card (matplotlib) comes next
    chunks = out / STATE_DIR / "chunks"
    assert any(chunks.glob("chunk-*.arrow"))
    capsys.readouterr()
    assert main(list(map(str, args))) == 0  # the rerun, in this process
    assert "nothing to do" in capsys.readouterr().out
    assert not chunks.exists()
    assert (out / "README.md").exists()
    assert json.loads((out / STATE_DIR / "outputs.json").read_text()).keys() >= {
        "README.md",
        "tokenizer.json",
    }


# Imported by the killed process at its start (``PYTHONPATH``): it kills itself with SIGKILL the moment it
# opens its tokens journal to append once ``published`` token shards are on disk, that is right after the
# publish of the last of them and before its journal line.
KILL_AFTER_A_PUBLISH = """
import os, signal, sys
from pathlib import Path

TOKENS = Path({tokens!r})


def kill_after_a_publish(event, args):
    if event == "open" and str(args[0]).endswith("tokens.jsonl") and "a" in str(args[1]):
        if len(list(TOKENS.rglob("*.parquet"))) == {published}:
            os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(kill_after_a_publish)
"""


def test_kill_between_a_token_shards_publish_and_its_journal_line_then_rerun_resumes(tmp_path, capsys):
    """The killed process is a real ``ltsgen tokenizer``; the uninterrupted reference and the rerun run here."""
    data, whole = tmp_path / "killed", tmp_path / "whole"
    assert main([*STORIES, "--out", str(data), "--samples-per-shard", "5"]) == 0
    shutil.copytree(data, whole)
    attach = ["tokenizer", "--vocab-size", "300", "--no-progress", "--data"]
    assert main([*attach, str(whole)]) == 0
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        KILL_AFTER_A_PUBLISH.format(tokens=str(data / "tokens"), published=2)
    )
    process = start(*attach, data, env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    published = {p.relative_to(data).as_posix() for p in (data / "tokens").rglob("*.parquet")}
    journal = (data / STATE_DIR / "tokens.jsonl").read_text().splitlines()
    finished = {s.path for line in journal if '"job"' in line for s in JobResult.from_json(line).shards}
    assert len(published) == 2 and len(finished) == 1 and finished < published  # the second not journaled
    other = tmp_path / "other"  # the same killed state, attached again with another tokenizer
    shutil.copytree(data, other)
    assert main(["tokenizer", "--vocab-size", "280", "--no-progress", "--data", str(other)]) == 0
    stored = {entry["path"] for entry in read_manifest(other).tokenizer["shards"].values()}
    on_disk = {p.relative_to(other).as_posix() for p in (other / "tokens").rglob("*") if p.is_file()}
    assert on_disk == stored and not stored & published  # the killed run's shards removed, not left as yours
    capsys.readouterr()
    assert main([*attach, str(data)]) == 0
    said = capsys.readouterr().out
    assert said.rstrip().endswith(" tokens, 1 of them kept from an interrupted run)"), said
    assert not (data / STATE_DIR / "tokens.jsonl").exists()
    assert tree(data) == tree(whole)  # token shards, tokenizer and manifest byte for byte


# Run as sitecustomize: kills the process (SIGKILL) as it is about to rename a token shard's temporary file
# into place once ``published`` token shards are on disk (the temporary file is whole, and stays behind).
KILL_AT_A_PUBLISH = """
import os, signal, sys
from pathlib import Path

TOKENS = Path({tokens!r})


def kill_at_a_publish(event, args):
    if event == "os.rename" and str(args[1]).startswith(str(TOKENS)):
        if len(list(TOKENS.rglob("*.parquet"))) == {published}:
            os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(kill_at_a_publish)
"""


def test_kill_while_a_token_shard_is_written_then_rerun_sweeps_its_temporary_file(tmp_path):
    """Attaching killed with a token shard's temporary file written and not yet renamed: the rerun removes
    that file (only ltsgen's temporary names) and ends byte-identical to an uninterrupted attach. The killed
    process is a real ``ltsgen tokenizer``; the uninterrupted reference and the rerun run here."""
    data, whole = tmp_path / "killed", tmp_path / "whole"
    assert main([*STORIES, "--out", str(data), "--samples-per-shard", "5"]) == 0
    shutil.copytree(data, whole)
    attach = ["tokenizer", "--vocab-size", "300", "--no-progress", "--data"]
    assert main([*attach, str(whole)]) == 0
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_AT_A_PUBLISH.format(tokens=str(data / "tokens"), published=1))
    process = start(*attach, data, env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    assert [p.name.endswith(".tmp") for p in (data / "tokens").rglob("*.parquet*")].count(True) == 1
    assert main([*attach, str(data)]) == 0  # the rerun
    assert not [p for p in data.rglob("*.tmp")]
    assert tree(data) == tree(whole)


# Run as sitecustomize in a build's process: kills it (SIGKILL) as it opens its journal to append once
# ``published`` shards are on disk, that is right after the publish of the last of them and before its line.
KILL_BEFORE_A_JOURNAL_LINE = """
import os, signal, sys
from pathlib import Path

OUT = Path({out!r})


def kill_before_a_journal_line(event, args):
    if event == "open" and str(args[0]).endswith("journal.jsonl") and "a" in str(args[1]):
        if len(list(OUT.rglob("shard-*.parquet"))) == {published}:
            os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(kill_before_a_journal_line)
"""


def test_a_shard_published_before_a_kill_stays_the_builds_own(tmp_path):
    """A build killed between a shard's publish and its job's journal line: the shard was announced before
    it was published, so it is still known as ltsgen's. A rebuild with other arguments and --overwrite
    removes it and builds, byte for byte as a build into an empty folder (it was refused before: the shard
    looked like a file of the user's where the new build writes). The killed process is a real
    ``ltsgen stories``; the rebuild and the build into an empty folder run here."""
    out, fresh = tmp_path / "killed", tmp_path / "fresh"
    args = [*STORIES, "--samples-per-shard", "5", "--workers", "1"]
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_BEFORE_A_JOURNAL_LINE.format(out=str(out), published=2))
    process = start(*args, "--out", out, env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    journal = (out / STATE_DIR / JOURNAL_NAME).read_text().splitlines()
    assert len(list(out.rglob("shard-*.parquet"))) == 2 and len(journal) == 1  # the second not journaled
    assert main([*args, "--out", str(out), "--seed", "1", "--overwrite"]) == 0
    assert main([*args, "--out", str(fresh), "--seed", "1"]) == 0
    assert tree(out) == tree(fresh)


# Run as sitecustomize: kills the process (SIGKILL) as it is about to rename a temporary file onto ``name``
# in ``out`` (once ``out/ready`` exists, when given): the files published before are on disk, unrecorded.
KILL_BEFORE_A_RENAME = """
import os, signal, sys
from pathlib import Path

OUT, NAME, READY = Path({out!r}), {name!r}, {ready!r}


def kill_before_a_rename(event, args):
    if event == "os.rename" and Path(args[1]) == OUT / NAME and (READY is None or (OUT / READY).exists()):
        os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(kill_before_a_rename)
"""


@pytest.mark.parametrize(
    ("command", "name", "ready"),
    [
        ("tokenizer", "tokenizer.json", None),  # its two side files published, not yet recorded
        ("tokenizer", ".ltsgen/outputs.json", "tokenizer.json"),  # every file and the manifest published
        ("stories", "README.md", None),  # a histogram published, the card not yet
        ("stories", ".ltsgen/outputs.json", "README.md"),  # the card published, not yet recorded
    ],
)
def test_a_kill_among_the_card_or_tokenizer_writes_then_rerun_finishes_as_if_uninterrupted(
    tmp_path, capsys, command, name, ready
):
    """Before, the files published before the kill were recorded as ltsgen's only after the last of them:
    the rerun took them for the user's and refused ("not written by ltsgen"), and so did `ltsgen card`;
    the card of a build killed so was never written. Now their sha256 is recorded before they are."""
    data, whole = tmp_path / "killed", tmp_path / "whole"
    attach = ["tokenizer", "--vocab-size", "300", "--no-progress", "--data"]
    build = [*STORIES, "--samples-per-shard", "5", "--out"]
    for out in (data, whole):
        if command == "tokenizer" or out == whole:
            assert main([*build, str(out)]) == 0
    if command == "tokenizer":
        assert main([*attach, str(whole)]) == 0
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_BEFORE_A_RENAME.format(out=str(data), name=name, ready=ready))
    process = start(*(attach if command == "tokenizer" else build), data, env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    capsys.readouterr()
    assert main([*(attach if command == "tokenizer" else build), str(data)]) == 0  # the rerun
    assert "not written by ltsgen" not in capsys.readouterr().out
    assert tree(data) == tree(whole)
    assert main(["card", str(data)]) == 0  # the card's files are ltsgen's, as written
    assert tree(data) == tree(whole)


def test_a_bucket_build_killed_just_after_writing_its_tokenizer_is_replaced_by_overwrite(tmp_path):
    """Killed after ``tokenizer.json`` was published and before it was recorded: before, a build with other
    arguments and --overwrite refused it as the user's file where the build writes."""
    corpus, tokenizer = corpus_and_tokenizer(tmp_path, documents=40)
    data, whole = tmp_path / "killed", tmp_path / "whole"
    args = ["buckets", "--source", "c4", "--input", str(corpus), "--tokenizer", str(tokenizer)]
    args += ["--bucket-lengths", "256,1024", "--no-progress", "--out"]
    assert main([*args, str(whole), "--eval-sequences", "3"]) == 0
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        KILL_BEFORE_A_RENAME.format(out=str(data), name=".ltsgen/outputs.json", ready="tokenizer.json")
    )
    process = start(*args, data, "--eval-sequences", "2", env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    assert (data / "tokenizer.json").exists() and not (data / "manifest.json").exists()
    assert main([*args, str(data), "--eval-sequences", "3", "--overwrite"]) == 0
    assert tree(data) == tree(whole)


def test_a_file_ltsgen_was_about_to_write_first_stays_the_users_when_the_user_puts_other_bytes_there(
    tmp_path,
):
    """A run killed (or interrupted) between recording a file it is about to write for the first time and
    writing it: a file the user then puts there is theirs, not an edited one of ltsgen's (which the card
    and attach write over)."""
    from ltsgen.outputs import expect_outputs, output_state, record_outputs

    (tmp_path / STATE_DIR).mkdir()
    (tmp_path / "README.md").write_text("ltsgen's card\n")
    record_outputs(tmp_path, ["README.md"])
    expect_outputs(tmp_path, {"tokenizer_config.json": b"{}", "README.md": b"the next card\n"})  # then killed
    (tmp_path / "tokenizer_config.json").write_text('{"mine": true}')
    assert output_state(tmp_path, "tokenizer_config.json") == "other"  # before: "changed", and written over
    assert output_state(tmp_path, "README.md") == "ltsgen"  # the old card, still ltsgen's
    (tmp_path / "README.md").write_text("the next card\n")
    assert output_state(tmp_path, "README.md") == "ltsgen"  # or the new one, had the kill come after it
    (tmp_path / "README.md").write_text("edited by hand\n")
    assert output_state(tmp_path, "README.md") == "changed"
    (tmp_path / "tokenizer_config.json").write_bytes(b"{}")
    assert output_state(tmp_path, "tokenizer_config.json") == "ltsgen"


# Run as sitecustomize: kills the process (SIGKILL) as it is about to remove its ``nth`` file under ``out``.
KILL_AT_A_REMOVAL = """
import os, signal, sys
from pathlib import Path

OUT, NTH = str(Path({out!r})), {nth}
seen = []


def kill_at_a_removal(event, args):
    if event == "os.remove" and str(args[0]).startswith(OUT + os.sep):
        seen.append(args[0])
        if len(seen) == NTH:
            os.kill(os.getpid(), signal.SIGKILL)


sys.addaudithook(kill_at_a_removal)
"""


@pytest.mark.parametrize("nth", [1, 5, 12, 17])
def test_a_kill_while_overwrite_removes_the_earlier_build_then_rerun_finishes(tmp_path, nth):
    """Before, the records went first (journals, the outputs record), then the files in any order: a kill
    part way left ltsgen's own files unknown (shards once the manifest was gone, the tokenizer's side files),
    and the rerun refused them as the user's ("not written by ltsgen ... move it away") or kept them."""
    data, whole = tmp_path / "killed", tmp_path / "whole"
    assert main([*STORIES, "--samples-per-shard", "5", "--out", str(data)]) == 0
    assert main(["tokenizer", "--vocab-size", "300", "--no-progress", "--data", str(data)]) == 0
    other = ["stories", "--num-stories", "12", "--max-words", "400", "--seed", "3", "--quiet", "--overwrite"]
    (data / "notes.txt").write_text("mine\n")  # a file of the user's, kept by --overwrite
    assert main([*other, "--out", str(whole)]) == 0
    (whole / "notes.txt").write_text("mine\n")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_AT_A_REMOVAL.format(out=str(data), nth=nth))
    process = start(*other, "--out", data, env={"PYTHONPATH": str(hook)})
    try:
        assert process.wait(timeout=300) == -signal.SIGKILL
    finally:
        end(process)
    assert main([*other, "--out", str(data)]) == 0  # the rerun
    assert tree(data) == tree(whole)
