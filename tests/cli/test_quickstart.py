"""The README's quickstart runs as written, at a small size, so that it cannot go stale.

The test reads the fenced ``sh`` blocks of the README section "Quickstart" in order and runs them in one
empty folder, every shell line (a ``\\``-continued command is one line) with the argv the ``ltsgen`` console
script would get, through ``ltsgen.cli.main`` in this process (the console script itself runs in the build,
card and kill tests); then the Python block of "Loaders in your own training code" on the dataset the
quickstart built, executed in this process from that folder. Before
running, it makes the sizes small by plain text substitution, with the table ``SMALLER`` below: each entry
must match the README at least once, so a quickstart edited without this table fails here instead of
silently running at full size.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ltsgen.cli import main

pytestmark = pytest.mark.torch

REPO = Path(__file__).resolve().parents[2]
SECTION = "## Quickstart"
LOADERS = "## Loaders in your own training code"
SMALLER = {
    "--num-stories 400": "--num-stories 40",
    "--max-words 3000": "--max-words 800",
    "--vocab-size 2048": "--vocab-size 300",
    "--workers 2": "--workers 1",
    "--steps 300": "--steps 2",
    "--train-lengths 64": "--train-lengths 16",
    "--eval-lengths 64,256,1024": "--eval-lengths 16,32",
    "--eval-sequences 12": "--eval-sequences 2",
}


def section_blocks(readme: str, heading: str = SECTION) -> list[tuple[str, str]]:
    """(language, code) of each fenced block of the README section ``heading``, in order."""
    start = readme.index(f"\n{heading}\n")
    end = readme.find("\n## ", start + 1)
    section = readme[start : end if end != -1 else None]
    return re.findall(r"^```(\w+)\n(.*?)^```$", section, flags=re.M | re.S)


def shell_commands(code: str) -> list[list[str]]:
    return [
        shlex.split(line, comments=True) for line in code.replace("\\\n", " ").splitlines() if line.strip()
    ]


def test_readme_quickstart_runs(tmp_path, monkeypatch, capsys):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    unused = [old for old in SMALLER if old not in readme[readme.index(SECTION) :]]
    assert unused == [], "the quickstart changed: update SMALLER"
    blocks = section_blocks(readme)
    assert [language for language, _ in blocks] == ["sh", "sh", "sh"]
    monkeypatch.chdir(tmp_path)
    for _, code in blocks:
        for old, new in SMALLER.items():
            code = code.replace(old, new)
        runs = shell_commands(code)
        assert all(command[0] == "ltsgen" for command in runs), runs
        for command in runs:
            status = main(command[1:])
            assert status == 0, f"{shlex.join(command[:3])}: {capsys.readouterr().err}"
    assert (tmp_path / "lts" / "manifest.json").is_file() and (tmp_path / "lts" / "tokenizer.json").is_file()
    assert list((tmp_path / "lts" / "tokens").rglob("*.parquet")), "step 2 stores the token ids"
    report = (tmp_path / "lts-compare" / "report.md").read_text(encoding="utf-8")
    assert all(encoding in report for encoding in ("rope", "alibi", "fire"))

    # the loader section's block, on the quickstart's dataset: whole epochs of packed blocks, as it says
    [(language, code)] = section_blocks(readme, LOADERS)
    assert language == "python" and "seq_len=1024" in code
    code = code.replace("seq_len=1024", "seq_len=64") + '\nprint(epoch, tuple(batch["input_ids"].shape))\n'
    capsys.readouterr()
    exec(compile(code, "README.md", "exec"), {"__name__": "__main__"})
    assert capsys.readouterr().out == "1 (8, 65)\n"
