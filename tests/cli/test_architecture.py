"""Imports go one way between the parts, form no cycle between modules, and only the command line parses
arguments (docs/architecture.md): parsed from the source, so that a wrong import fails here wherever it hides
(function-level imports included)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FOLDERS = {"ltsgen": "ltsgen", "loaders": "ltsgen.loaders", "encodings": "ltsgen.encodings",
           "training": "ltsgen.training"}  # fmt: skip
# part -> the parts it may import besides itself
ALLOWED = {
    "leaf": set(),
    "loaders": {"leaf"},
    "encodings": {"leaf"},
    "engines": {"leaf"},  # where jobs run, for the builders and compare alike
    "tokenizer": {"leaf", "loaders"},
    "builders": {"leaf", "loaders", "tokenizer", "engines"},
    "training": {"leaf", "loaders", "encodings", "engines"},  # a tokenizer trainer is passed in by the CLI
    "cli": {"leaf", "loaders", "encodings", "engines", "tokenizer", "builders", "training"},
}
PARTS = (  # module prefix -> part, the first match wins
    ("ltsgen.errors", "leaf"), ("ltsgen.loaders", "loaders"), ("ltsgen.encodings", "encodings"),
    ("ltsgen.training", "training"), ("ltsgen.engines", "engines"), ("ltsgen.tokenizer", "tokenizer"),
    ("ltsgen.cli", "cli"),
    ("ltsgen.commands", "cli"), ("ltsgen.__main__", "cli"), ("ltsgen.", "builders"),
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


def all_imports(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every import in ``source``, at any depth (function bodies included), relative ones
    resolved; ``from X import name`` counts as an import of ``X.name`` when that is one of our modules."""
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
    return found


def imported(source: str, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, module) of every import of an ltsgen module in ``source``."""
    found = all_imports(source, module, is_package)
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


def cycles(modules: dict[str, tuple[str, bool]]) -> list[list[str]]:
    """Every set of our modules that import each other round a circle (module-level or function-level
    imports alike), each sorted: the strongly connected components of the import graph with more than
    one module. A package importing its own submodules is no cycle (Python imports a package first)."""
    graph = {
        module: {target for _, target in imported(source, module, is_package) if target in modules} - {module}
        for module, (source, is_package) in modules.items()
    }

    def reachable(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for target in graph[todo.pop()] - seen:
                seen.add(target)
                todo.append(target)
        return seen

    reach = {module: reachable(module) for module in graph}
    found = {tuple(sorted({m, *(n for n in reach[m] if m in reach[n])})) for m in graph if m in reach[m]}
    return sorted(list(circle) for circle in found)


def argument_parsers(modules: dict[str, tuple[str, bool]]) -> list[str]:
    """The modules outside the command line that import ``argparse``, as ``module:line``."""
    return [
        f"{module}:{line}"
        for module, (source, is_package) in modules.items()
        if part_of(module) != "cli"
        for line, name in all_imports(source, module, is_package)
        if name == "argparse" or name.startswith("argparse.")
    ]


PATHS = sorted(p for folder in FOLDERS for p in (REPO / folder).rglob("*.py"))
MODULES = {module_name(p) for p in PATHS}
SOURCES = {module_name(p): (p.read_text(encoding="utf-8"), p.name == "__init__.py") for p in PATHS}


def test_every_import_follows_the_direction():
    assert {part_of(m) for m in SOURCES} == set(ALLOWED)  # every part exists and every module has one
    assert violations(SOURCES) == []


def test_no_import_cycle():
    assert cycles(SOURCES) == []


def test_only_the_command_line_parses_arguments():
    assert argument_parsers(SOURCES) == []


@pytest.mark.parametrize(
    "sources, circle",
    [
        (  # at the top of both modules
            {"ltsgen.build": "from ltsgen.card import write_card\n", "ltsgen.card": "from .build import X\n"},
            ["ltsgen.build", "ltsgen.card"],
        ),
        (  # one side inside a function, through a third module
            {
                "ltsgen.loaders.storage": "def f():\n    from .contract import atomic_path\n",
                "ltsgen.loaders.contract": "from ltsgen.loaders import files\n",
                "ltsgen.loaders.files": "import ltsgen.loaders.storage\n",
            },
            ["ltsgen.loaders.contract", "ltsgen.loaders.files", "ltsgen.loaders.storage"],
        ),
    ],
)
def test_a_cycle_is_caught(sources, circle):
    assert cycles({module: (source, False) for module, source in sources.items()}) == [circle]


def test_a_chain_and_a_package_importing_its_submodules_are_no_cycle():
    sources = {
        "ltsgen.loaders": ("from .dataset import StreamingDataset\n", True),
        "ltsgen.loaders.dataset": ("from .contract import Manifest\nimport ltsgen.loaders.files\n", False),
        "ltsgen.loaders.contract": ("from ltsgen.loaders.files import sha256_file\n", False),
        "ltsgen.loaders.files": ("import hashlib\n", False),
    }
    assert cycles(sources) == []


def test_argparse_outside_the_command_line_is_caught():
    sources = {
        "ltsgen.corpora.readers": ("def f():\n    from argparse import Namespace\n", False),
        "ltsgen.commands.buckets": ("import argparse\n", False),
        "ltsgen.training.train": ('"""argparse settings"""\n', False),
    }
    assert argument_parsers(sources) == ["ltsgen.corpora.readers:2"]


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
        ("ltsgen.engines", "from ltsgen.build import BuildSpec\n", "engines imports builders"),
        ("ltsgen.engines", "from ltsgen.loaders import files\n", "engines imports loaders"),
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
        "ltsgen.loaders": ("from .errors import LoaderError\n", True),
        "ltsgen.training.compare": ("from ltsgen.engines import Engine, SerialEngine\n", False),
        "ltsgen.corpora.pipeline": ("from ltsgen.engines import make_engine\n", False),
    }
    assert violations(allowed) == []
