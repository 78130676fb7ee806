"""The core install is enough for the loaders and the built-in builders, and a missing extra is one line.

Two checks: statically, every module of the package imports only the standard library, ltsgen and the
core dependencies, and reaches an extra's module through ``ltsgen.errors.require`` naming an extra that
really installs it; at run time, a process where every extra's module fails to import (as in an install
of the core alone) imports ``ltsgen.loaders``, builds, attaches a tokenizer and reads packed batches with
two workers, and gets one line naming the extra for each job that needs one.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGE_DIRS = ("ltsgen", "loaders", "encodings", "training")
# distribution name in pyproject.toml -> the module it installs
IMPORT_NAMES = {
    "torch": "torch", "torchdata": "torchdata", "numpy": "numpy", "pyarrow": "pyarrow",
    "zstandard": "zstandard", "fsspec": "fsspec", "tokenizers": "tokenizers", "tqdm": "tqdm",
    "matplotlib": "matplotlib", "pyyaml": "yaml", "datasets": "datasets", "openai": "openai",
    "s3fs": "s3fs", "botocore": "botocore", "gcsfs": "gcsfs", "huggingface_hub": "huggingface_hub", "ray": "ray",
    "scipy": "scipy",
}  # fmt: skip
RUNTIME_EXTRAS = ("build", "corpora", "llm", "train", "s3", "gcs", "hf", "ray")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("-", "_")


@pytest.fixture(scope="module")
def project() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]


@pytest.fixture(scope="module")
def extra_modules(project) -> dict[str, set[str]]:
    """extra -> the modules it installs, other ltsgen extras it names included."""
    extras = project["optional-dependencies"]

    def modules(extra: str) -> set[str]:
        found: set[str] = set()
        for requirement in extras[extra]:
            if requirement.startswith("ltsgen["):
                for inner in requirement[len("ltsgen[") : -1].split(","):
                    found |= modules(inner)
            elif _requirement_name(requirement) in IMPORT_NAMES:
                found.add(IMPORT_NAMES[_requirement_name(requirement)])
        return found

    return {extra: modules(extra) for extra in RUNTIME_EXTRAS}


def _modules() -> list[Path]:
    return sorted(path for folder in PACKAGE_DIRS for path in (REPO / folder).rglob("*.py"))


def _imports(tree: ast.AST):
    """(line, top-level module) of every absolute import outside ``if TYPE_CHECKING:``."""
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for node in ast.walk(block)
    }
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name.split(".")[0]) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            yield node.lineno, node.module.split(".")[0]


def test_core_is_what_the_code_imports_and_extras_go_through_require(project, extra_modules):
    core = {IMPORT_NAMES[_requirement_name(r)] for r in project["dependencies"]}
    assert core == {"torch", "numpy", "pyarrow", "zstandard", "fsspec", "tokenizers", "tqdm", "yaml"}
    allowed = core | set(sys.stdlib_module_names) | {"ltsgen"}
    outside, requires = [], []
    for path in _modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = path.relative_to(REPO)
        outside += [f"{where}:{line}: import {name}" for line, name in _imports(tree) if name not in allowed]
        for call in ast.walk(tree):
            if isinstance(call, ast.Call) and getattr(call.func, "id", None) == "require":
                if all(isinstance(arg, ast.Constant) for arg in call.args[:2]):  # else: a table, below
                    module, extra = (arg.value for arg in call.args[:2])
                    requires.append((f"{where}:{call.lineno}", module.split(".")[0], extra))
    assert outside == [], "import these through ltsgen.errors.require"
    assert {module for _, module, _ in requires} >= {"matplotlib", "datasets", "openai"}
    from ltsgen.loaders.storage import OPTIONAL_SCHEMES

    requires += [(f"storage {scheme}://", *pair) for scheme, pair in OPTIONAL_SCHEMES.items()]
    wrong = [(where, m, e) for where, m, e in requires if m not in extra_modules.get(e, set())]
    assert wrong == [], "require() names an extra that does not install the module"


BLOCKED = ("matplotlib", "datasets", "openai", "s3fs", "botocore", "gcsfs", "huggingface_hub", "ray",
           "webdataset", "transformers", "scipy", "pandas", "moto", "hypothesis", "torchdata")  # fmt: skip

CORE_ONLY = r"""
import importlib.abc, json, sys

BLOCKED = set(json.loads(sys.argv[1]))

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NotInstalled())
import contextlib, io, pathlib

from ltsgen.cli import main
from ltsgen.loaders import StreamingDataset

work = pathlib.Path(sys.argv[2])
report = {}

def run(*argv, said=None):
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        status = main(list(argv))
    if said is not None:
        said.extend(out.getvalue().splitlines())
    return status, err.getvalue()

lts = str(work / "lts")
report["stories"] = run("stories", "--out", lts, "--num-stories", "16", "--max-words", "400", "--no-card",
                        "--no-progress")
report["attach"] = run("tokenizer", "--data", lts, "--vocab-size", "300", "--no-progress")
dataset = StreamingDataset(lts, seq_len=32, batch_size=4)
report["batches"] = [list(batch["input_ids"].shape) for batch in dataset.loader(num_workers=2)][:2]
report["card_said"] = []
report["card"] = run("stories", "--out", str(work / "carded"), "--num-stories", "4", "--no-progress",
                     said=report["card_said"])
report["hf"] = run("buckets", "--source", "hf", "--input", str(work), "--out", str(work / "b"),
                   "--tokenizer", lts, "--no-card", "--no-progress")
report["openai"] = run("stories", "--backend", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9",
                       "--out", str(work / "llm"), "--num-stories", "1", "--no-card", "--no-progress")
report["compare"] = run("compare", "--data", lts, "--encodings", "rope", "--steps", "1", "--out",
                        str(work / "cmp"), "--no-progress")
report["imported"] = sorted(name for name in sys.modules if name.split(".")[0] in BLOCKED)
print(json.dumps(report))
"""


def test_core_alone_runs_the_loaders_and_names_each_missing_extra(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.run(
        [sys.executable, "-c", CORE_ONLY, json.dumps(BLOCKED), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path,
    )  # fmt: skip
    assert process.returncode == 0, process.stderr
    report = json.loads(process.stdout.strip().splitlines()[-1])
    assert report["stories"] == [0, ""] and report["attach"] == [0, ""]
    assert report["batches"] == [[4, 33], [4, 33]]
    missing = "need {}, which is not installed: pip install 'ltsgen[{}]'\n"
    expected = {
        "hf": (
            "buckets",
            "Hugging Face dataset inputs (--source hf) " + missing.format("datasets", "corpora"),
        ),
        "openai": ("stories", "stories from --backend openai " + missing.format("openai", "llm")),
        "compare": ("compare", "comparison plots " + missing.format("matplotlib", "train")),
    }
    for job, (command, message) in expected.items():
        assert report[job] == [2, f"ltsgen {command}: error: {message}"], job
    assert not (tmp_path / "cmp").exists()
    # the README's first command: the card is written without histograms, and the build says so in one line
    assert report["card"] == [0, ""] and len(report["card_said"]) == 2
    assert report["card_said"][1] == (
        "  note: the card has no length histograms: matplotlib is not installed (pip install 'ltsgen[build]')"
    )
    card = (tmp_path / "carded" / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\nlicense: apache-2.0\n") and ".png" not in card
    assert sorted(path.name for path in (tmp_path / "carded").glob("*.png")) == []
    assert report["imported"] == []


SCIPY_MISSING = r"""
import contextlib, importlib.abc, io, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "scipy":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)

sys.meta_path.insert(0, NotInstalled())
from ltsgen.cli import main

err = io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    status = main(["compare", "--data", sys.argv[1], "--encodings", "rope", "--steps", "1", "--out", sys.argv[2],
                   "--no-progress"])
print(status, err.getvalue().strip())
"""


def test_compare_without_scipy_says_so_before_training(tmp_path):
    """Before: every run trained and was evaluated, then the report stopped for scipy (the build, corpora and
    llm extras bring matplotlib without it)."""
    from training_fixtures import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "lts")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    process = subprocess.run([sys.executable, "-c", SCIPY_MISSING, str(data), str(tmp_path / "cmp")],
                             capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)  # fmt: skip
    assert process.stdout.strip() == (
        "2 ltsgen compare: error: the intervals and tests of a comparison need scipy.stats, which is not "
        "installed: pip install 'ltsgen[train]'"
    ), process.stderr
    assert not (tmp_path / "cmp").exists()
