"""`ltsgen stories` end to end: determinism across workers, kill -9 and resume, reruns, refusals, one-line errors."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from process_tools import children, still_alive

from ltsgen import __version__
from ltsgen.cli import main
from ltsgen.loaders.contract import read_manifest
from ltsgen.loaders.formats import read_shard
from ltsgen.outputs import STATE_PATH
from ltsgen.stories.build import StoryConfig
from ltsgen.stories.engine import ENGINE_VERSION
from ltsgen.stories.engine.build import build_stories
from ltsgen.stories.plan import target_words

SMALL = ["--num-stories", "40", "--min-words", "100", "--max-words", "900", "--seed", "3"]
SMALL += ["--splits", "train=0.8,validation=0.1,test=0.1", "--samples-per-shard", "4", "--no-progress"]
# big enough that a kill lands mid-build: ~175k words in 18 shards
KILLED = ["--num-stories", "64", "--min-words", "1000", "--max-words", "6000", "--seed", "1"]
KILLED += ["--samples-per-shard", "4", "--quiet"]  # the hidden old spelling of --no-progress


def tree(directory: Path) -> dict[str, str]:
    """sha256 of every file of a build (the journal's line order depends on timing, so it is left out)."""
    return {
        str(path.relative_to(directory)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and path.name != "journal.jsonl"
    }


LTSGEN = str(Path(sys.executable).parent / "ltsgen")  # the installed console script


def ltsgen(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([LTSGEN, *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def small_build(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("small") / "lts"
    assert main(["stories", "--out", str(out), *SMALL]) == 0
    return out


def test_build_layout_and_manifest(small_build):
    manifest = read_manifest(small_build)
    assert manifest.source == "lts" and manifest.format == "parquet"
    assert sorted(manifest.splits) == ["test", "train", "validation"]
    assert manifest.builder["arguments"]["num_stories"] == 40
    shards = [s for split in manifest.splits.values() for s in split]
    assert sum(s.samples for s in shards) == 40
    assert all(s.samples <= 4 for s in shards)
    seen = []
    for shard in shards:
        records = list(read_shard(small_build / shard.path, "parquet"))
        assert len(records) == shard.samples and sum(r["num_words"] for r in records) == shard.words
        assert hashlib.sha256((small_build / shard.path).read_bytes()).hexdigest() == shard.sha256
        for record in records:
            index = int(record["id"].rsplit("-", 1)[1])
            target = target_words(index, 3, 100, 900)
            assert abs(record["num_words"] - target) <= 0.05 * target
            seen.append(index)
    assert sorted(seen) == list(range(40))
    assert (small_build / "README.md").is_file() and (small_build / "length_histogram.png").is_file()
    stats = manifest.extra["statistics"]
    assert stats["Length control"]["rows"][0][:2] == [40, sum(s.words for s in shards)]
    assert stats["Length control"]["rows"][0][3] == 40  # every story within 5% of its target
    variety = stats["Variety: this build and real TinyStories at equal size"]
    assert [row[0] for row in variety["rows"]] == [
        "LongTinyStories (this build)",
        "TinyStories (real, validation split)",
    ]


def test_workers_do_not_change_a_byte(small_build, tmp_path):
    out = tmp_path / "lts"
    assert main(["stories", "--out", str(out), *SMALL, "--workers", "2"]) == 0
    assert tree(out) == tree(small_build)


def test_the_library_builds_what_the_command_builds(small_build, tmp_path):
    config = StoryConfig(
        out=tmp_path / "lts",
        num_stories=40,
        min_words=100,
        max_words=900,
        seed=3,
        splits="train=0.8,validation=0.1,test=0.1",
        samples_per_shard=4,
    )
    result = build_stories(config, progress=False)
    assert (result.status, result.samples) == ("built", 40)
    assert tree(tmp_path / "lts") == tree(small_build)


def test_rerun_of_finished_build_does_nothing(small_build, capsys):
    before = {p: p.stat().st_mtime_ns for p in small_build.rglob("*") if p.is_file()}
    assert main(["stories", "--out", str(small_build), *SMALL, "--workers", "2"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in small_build.rglob("*") if p.is_file()} == before


def test_a_rerun_of_a_build_killed_while_drawing_its_card_removes_the_plot_left_half_written(
    small_build, tmp_path
):
    out = tmp_path / "lts"
    shutil.copytree(small_build, out)
    before = tree(out)
    (out / ".length_histogram.png.k3x9q1.tmp").write_bytes(b"\x89PNG half")  # what the kill left
    (out / "notes.length_histogram.png.tmp").write_text("mine\n")  # not a name ltsgen's writers use
    assert main(["stories", "--out", str(out), *SMALL]) == 0
    assert tree(out) == {
        **before,
        "notes.length_histogram.png.tmp": tree(out)["notes.length_histogram.png.tmp"],
    }


def test_other_arguments_are_refused_unless_overwrite(small_build, tmp_path):
    out = tmp_path / "lts"
    assert main(["stories", "--out", str(out), *SMALL]) == 0
    changed = [a if a != "900" else "901" for a in SMALL]
    result = ltsgen("stories", "--out", str(out), *changed)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "other arguments (max_words 900 -> 901)" in result.stderr and "--overwrite" in result.stderr
    assert tree(out) == tree(small_build)
    assert main(["stories", "--out", str(out), *changed, "--overwrite"]) == 0
    assert read_manifest(out).builder["arguments"]["max_words"] == 901


def test_kill_9_mid_build_then_rerun_is_byte_identical(tmp_path, capsys):
    reference = tmp_path / "reference"
    assert main(["stories", "--out", str(reference), *KILLED, "--workers", "2"]) == 0
    out = tmp_path / "killed"
    journal = out / ".ltsgen" / "journal.jsonl"
    process = subprocess.Popen(
        [LTSGEN, "stories", "--out", str(out), *KILLED, "--workers", "2"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and journal.read_text().count("\n") >= 3):
            assert process.poll() is None, "the build ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.005)
        os.kill(process.pid, signal.SIGSTOP)  # held while its workers are listed: no shard more
        workers = children(process.pid)
        assert workers, "the build should run worker processes"
        os.kill(process.pid, signal.SIGKILL)  # the build process only: its workers must follow it
        process.wait(timeout=30)
        assert still_alive(workers, seconds=10) == [], "worker processes outlived the killed build"
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever is left of the build's process group
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    assert not (out / "manifest.json").exists()
    done = journal.read_text().count("\n")
    assert 3 <= done < sum(len(shards) for shards in read_manifest(reference).splits.values())

    capsys.readouterr()
    assert main(["stories", "--out", str(out), *KILLED, "--workers", "2"]) == 0  # the rerun, in this process
    printed = capsys.readouterr().out
    assert "resumed" in printed and "kept from an earlier run" in printed
    assert tree(out) == tree(reference)
    assert not list(out.rglob("*.tmp"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--num-stories", "0"], "--num-stories must be at least 1"),
        (["--num-stories", str(10**12)], "--num-stories 1,000,000,000,000 is more than one build plans"),
        (
            ["--num-stories", "5", "--min-words", "900", "--max-words", "800"],
            "--min-words 900 is above --max-words",
        ),
        (["--num-stories", "5", "--max-words", "32001"], "above the limit of 32,000 words"),
        (["--num-stories", "5", "--splits", "train=0.9,test=0.2"], "--splits: fractions sum to 1.1"),
        (["--num-stories", "5", "--splits", "train"], "'train' is not name=fraction"),
        (
            ["--num-stories", "5", "--splits", "train=0.9,valid=0.1"],
            "--splits: unknown split 'valid'; did you mean 'validation'? training and evaluation read "
            "train, validation, test",
        ),
        (
            ["--num-stories", "5", "--min-words", "20", "--max-words", "30"],
            "--min-words 20 is below the 100 words the built-in engine writes at the least",
        ),
        (["--num-stories", "5", "--recall-distances", "mixed:3:x"], "HIGH a number or 'length'"),
        (
            ["--num-stories", "5", "--max-words", "900", "--recall-distances", "uniform:1000:2000"],
            "--recall-distances uniform:1000:2000: no recall fits in a story of --max-words 900",
        ),
        (  # the density is checked before any story is written to check the distances
            [
                "--num-stories",
                "5",
                "--max-words",
                "2000",
                "--recall-distances",
                "uniform:1500:1900",
                "--recalls-per-1k-words",
                "nan",
            ],
            "--recalls-per-1k-words must be in [0, 50], not nan",
        ),
        (  # LOW below the longest story, above what its setup and ending leave for recalls
            [
                "--num-stories",
                "5",
                "--min-words",
                "2000",
                "--max-words",
                "2000",
                "--recall-distances",
                "uniform:1900:length",
            ],
            "no recall fits in a story of --max-words 2,000: its setup and ending leave less than LOW (1,900",
        ),
    ],
)
def test_one_line_errors(tmp_path, args, message, capfd):
    """In this process (the console script's exit status and stderr are covered by the unwritable-directory
    and engine-version tests below): status 2, one line on the real stderr (fd 2), nothing written."""
    try:
        status = main(["stories", "--out", str(tmp_path / "lts"), *args])
    except SystemExit as stopped:  # a refusal while parsing
        status = stopped.code
    assert status == 2
    err = capfd.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1
    assert message in err
    assert not (tmp_path / "lts").exists()


def test_help_names_each_default_once_and_hides_old_spellings():
    text = ltsgen("stories", "--help").stdout
    assert "--no-progress" in text and "--quiet" not in text
    assert "(default: None)" not in text and "(default " not in text
    options = re.split(r"\n  (?=-)", text.split("options:", 1)[1])
    assert all(option.count("(default") <= 1 for option in options)
    assert "shard format (default: parquet)" in " ".join(text.split())


def test_summary_gives_the_generation_rate_and_the_wall_time_apart(tmp_path, capsys):
    assert main(["stories", "--out", str(tmp_path / "lts"), *SMALL]) == 0
    summary = capsys.readouterr().out
    rate, seconds = re.search(
        r"shards written at ([\d,]+) words/s, ([\d.]+)s wall time in all", summary
    ).groups()
    words = sum(s.words for split in read_manifest(tmp_path / "lts").splits.values() for s in split)
    assert int(rate.replace(",", "")) > words / float(seconds)  # the rate leaves out the statistics and card


def test_unwritable_directory_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    result = ltsgen("stories", "--out", str(blocker / "lts"), "--num-stories", "3", "--max-words", "200")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert f"{blocker / 'lts'}: cannot write there" in result.stderr


@pytest.mark.parametrize("part", ["engine_version", "version"])
def test_a_build_of_another_engine_version_is_not_resumed(small_build, tmp_path, part):
    """A half-finished build made by an earlier story engine, or an earlier ltsgen (whose jobs kept other
    statistics): its shards or journal hold that one's work, so a rerun by this one is refused (and
    --overwrite starts over) rather than mixing the two."""
    out = tmp_path / "lts"
    shutil.copytree(small_build, out)
    builder = read_manifest(out).builder
    assert (builder["engine_version"], builder["version"]) == (ENGINE_VERSION, __version__)
    (out / "manifest.json").unlink()  # unfinished
    state = out / STATE_PATH
    state.parent.mkdir(exist_ok=True)
    state.write_text(json.dumps({**builder, part: "0"}))
    result = ltsgen("stories", "--out", str(out), *SMALL)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"other arguments ({part} 0 -> {builder[part]})" in result.stderr
    assert main(["stories", "--out", str(out), *SMALL, "--overwrite"]) == 0
    assert tree(out) == tree(small_build)


def test_recalls_a_story_has_no_keys_for_are_said_by_the_build_and_the_card(tmp_path, capsys):
    """Far distances against a story's span start a planted fact for nearly every recall, and a story has
    125 keys: before, the recalls beyond them were dropped without a word (15-19% of them at such settings),
    the card still stating the rate asked for."""
    from ltsgen.stories.engine.story import write_story
    from ltsgen.stories.recalls import Distances

    out = tmp_path / "far"
    args = [
        "stories",
        "--out",
        str(out),
        "--num-stories",
        "3",
        "--min-words",
        "24000",
        "--max-words",
        "32000",
    ]
    assert main([*args, "--recall-distances", "uniform:2000:20000", "--no-progress"]) == 0
    said = capsys.readouterr().out
    written = [
        write_story(i, 0, target_words(i, 0, 24_000, 32_000), Distances.parse("uniform:2000:20000"), 8.0)
        for i in range(3)
    ]
    dropped = sum(story.recalls_dropped for story in written)
    short = sum(story.recalls_dropped > 0 for story in written)
    recalls = sum(len(f["uses"]) for story in written for f in story.record["meta"]["facts"] if f["planted"])
    words = sum(story.record["num_words"] for story in written)
    assert dropped > 0 and recalls / words * 1000 < 7  # 8 per 1,000 words asked
    table = read_manifest(out).extra["statistics"]["Recalls not written"]
    assert table["rows"][0][:2] == [short, dropped]
    assert (
        f"  note: {dropped:,} recalls in {short:,} stories were not written, fewer than --recalls-per-1k-words"
        in said
    )
    assert "one planted fact per key, 125 at most" in (out / "README.md").read_text(encoding="utf-8")
    # the default settings drop none, and their card has no such table
    assert main(["stories", "--out", str(tmp_path / "near"), "--num-stories", "3", "--min-words", "24000",
                 "--max-words", "32000", "--no-progress"]) == 0  # fmt: skip
    assert "Recalls not written" not in read_manifest(tmp_path / "near").extra["statistics"]
    assert "note:" not in capsys.readouterr().out
