"""Imports go one way between the parts (docs/architecture.md): parsed from the source, so that an import
against the direction fails here, wherever it hides (function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = {"ltsgen": "ltsgen", "loaders": "ltsgen.loaders", "encodings": "ltsgen.encodings",
           "training": "ltsgen.training"}  # fmt: skip
# part -> the parts it may import besides itself
ALLOWED = {
    "leaf": set(),
    "loaders": {"leaf"},
    "encodings": {"leaf"},
    "tokenizer": {"leaf", "loaders"},
    "builders": {"leaf", "loaders", "tokenizer"},
    "training": {"leaf", "loaders", "encodings"},  # a tokenizer trainer is passed in by the CLI
    "cli": {"leaf", "loaders", "encodings", "tokenizer", "builders", "training"},
}
PARTS = (  # module prefix -> part, the first match wins
    ("ltsgen.errors", "leaf"), ("ltsgen.loaders", "loaders"), ("ltsgen.encodings", "encodings"),
    ("ltsgen.training", "training"), ("ltsgen.tokenizer", "tokenizer"), ("ltsgen.cli", "cli"),
    ("ltsgen.commands", "cli"), ("ltsgen.__main__", "cli"),
    ("ltsgen.corpora.arguments", "cli"),  # the corpus readers' command-line options
    ("ltsgen.", "builders"),
)  # fmt: skip


def part_of(module: str) -> str:
    if module == "ltsgen":  # the package root holds the version only
        return "leaf"
    for prefix, part in PARTS:
        if module == prefix or module.startswith(prefix if prefix.endswith(".") else prefix + "."):
            return part
    raise AssertionError(f"{module}: belongs to no part")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    names = [FOLDERS[parts[0]], *parts[1:]]
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def imported(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every import of an ltsgen module in ``source``, relative ones resolved; ``from X
    import name`` counts as an import of ``X.name`` when that is a module."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parents = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parents + ([node.module] if node.module else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((node.lineno, submodule if submodule in MODULES else base))
    return [(line, name) for line, name in found if name == "ltsgen" or name.startswith("ltsgen.")]


def violations(modules: dict[str, tuple[str, bool]]) -> list[str]:
    """Every import between parts that ALLOWED does not permit, as ``module:line: imports target``."""
    wrong = []
    for module, (source, is_package) in modules.items():
        mine = part_of(module)
        for line, target in imported(source, module, is_package):
            theirs = part_of(target)
            if theirs != mine and theirs not in ALLOWED[mine]:
                wrong.append(f"{module}:{line}: {mine} imports {theirs} ({target})")
    return wrong


PATHS = sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))
MODULES = {module_name(p) for p in PATHS}


def test_every_import_follows_the_direction():
    modules = {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in PATHS}
    assert {part_of(m) for m in modules} == set(ALLOWED)  # every part exists and every module has one
    assert violations(modules) == []


@pytest.mark.parametrize(
    "module, source, broken",
    [
        (
            "ltsgen.loaders.dataset",
            "def f():\n    from ltsgen.training import train\n",
            "loaders imports training",
        ),
        ("ltsgen.loaders.dataset", "from ..tokenizer import load_tokenizer\n", "loaders imports tokenizer"),
        ("ltsgen.encodings.rope", "import ltsgen.loaders.contract\n", "encodings imports loaders"),
        ("ltsgen.errors", "from ltsgen import tokenizer\n", "leaf imports tokenizer"),
        ("ltsgen.errors", "from .build import run_build\n", "leaf imports builders"),
        (
            "ltsgen.corpora.pipeline",
            "from ltsgen.training.model import ModelConfig\n",
            "builders imports training",
        ),
        ("ltsgen.stories.llm.client", "from ...commands import add_command\n", "builders imports cli"),
        ("ltsgen.training.data", "from ltsgen.corpora import readers\n", "training imports builders"),
        (
            "ltsgen.training.errors",
            "from ltsgen.tokenizer import TokenizerError\n",
            "training imports tokenizer",
        ),
    ],
)
def test_an_import_against_the_direction_is_caught(module, source, broken):
    (found,) = violations({module: (source, False)})
    assert broken in found and found.startswith(f"{module}:")


def test_allowed_imports_pass():
    allowed = {
        "ltsgen.training.data": ("from ltsgen.encodings import NAMES\nimport ltsgen.loaders\n", False),
        "ltsgen.build": (
            "from .loaders.files import atomic_path\nfrom ltsgen.errors import LtsgenError\n",
            False,
        ),
        "ltsgen.commands.train": (
            "from ltsgen.training import train\nfrom ltsgen import __version__\n",
            False,
        ),
        "ltsgen.loaders": ("from .contract import ContractError\n", True),
    }
    assert violations(allowed) == []
