"""The README and docs/ hold together: every relative link names a file of the checkout (and a heading of
it, for ``file.md#anchor``), every document in docs/ is linked from the README's table of documents, and
no document names an option, a module or a test that is not there."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(markdown: str) -> set[str]:
    """The anchors of a Markdown file's headings, as GitHub makes them."""
    headings = re.findall(r"^#+ (.+)$", re.sub(r"^```.*?^```", "", markdown, flags=re.M | re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: path.name)
def test_relative_links_resolve(document):
    text = document.read_text(encoding="utf-8")
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):  # http(s), mailto
            continue
        path, _, anchor = target.partition("#")
        file = (document.parent / path).resolve() if path else document
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in anchors(file.read_text(encoding="utf-8")):
            broken.append(target)
    assert broken == [], f"{document.name}: links to nothing"


def test_every_document_is_linked_from_the_readme():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("\n## Documentation\n") :]
    table = table[: table.find("\n## ", 1)]
    listed = {target.split("#")[0] for target in LINK.findall(table)}
    assert {f"docs/{path.name}" for path in DOCUMENTS[1:]} <= listed


def _visible_options() -> dict[str, set[str]]:
    """subcommand -> its options as ``--help`` lists them (old spellings, hidden, are not for documents)."""
    import argparse

    from ltsgen.cli import build_parser

    [commands] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {
        name: {option for a in sub._actions if a.help != argparse.SUPPRESS for option in a.option_strings}
        for name, sub in commands.choices.items()
    }


def test_documents_use_the_options_each_command_has():
    options = _visible_options()
    unknown = []
    for document in DOCUMENTS:
        text = document.read_text(encoding="utf-8").replace("\\\n", " ")
        for command, rest in re.findall(r"\bltsgen ([a-z]+)((?: [^\n`|]*)?)", text):
            if command in options:
                unknown += [
                    f"{document.name}: ltsgen {command} {option}"
                    for option in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", rest)
                    if option not in options[command]
                ]
    assert unknown == []


def _resolves(name: str) -> bool:
    """Whether the dotted ``ltsgen...`` name is a module, or an attribute of one."""
    import importlib

    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:split]))
        except ImportError:
            continue
        for part in parts[split:]:
            if not hasattr(found, part):
                return False
            found = getattr(found, part)
        return True
    return False


def test_documents_name_only_what_the_package_has():
    names = {
        f"{document.name}: {name}"
        for document in DOCUMENTS
        for name in re.findall(r"\bltsgen(?:\.[A-Za-z_]\w*)+", document.read_text(encoding="utf-8"))
    }
    assert sorted(entry for entry in names if not _resolves(entry.split(": ")[1])) == []


def test_the_tests_the_documents_cite_exist():
    cited = {
        (document.name, path, name)
        for document in DOCUMENTS
        for path, name in re.findall(r"\b(test_\w+\.py)::(test_\w+)", document.read_text(encoding="utf-8"))
    }
    files = {path.name: path for path in (REPO / "tests").glob("*/test_*.py")}  # names are unique
    missing = [
        f"{document}: {path}::{name}"
        for document, path, name in sorted(cited)
        if path not in files
        or not re.search(rf"^def {name}\(", files[path].read_text(encoding="utf-8"), re.M)
    ]
    assert cited and missing == []


def test_every_benchmark_is_in_the_benchmarks_document():
    listed = (REPO / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    scripts = sorted(path.name for path in (REPO / "benchmarks").iterdir() if path.suffix in (".py", ".sh"))
    assert scripts and [name for name in scripts if f"benchmarks/{name}" not in listed] == []


OPTIONS_HEADING = "## Every option"


def options_reference() -> str:
    """docs/commands.md's last section: every command's options as its ``--help`` gives them."""
    import argparse

    from ltsgen.cli import build_parser

    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    lines = [OPTIONS_HEADING, "", "Each command's options as its `--help` gives them (a test keeps this list and the",
             "command line the same).", ""]  # fmt: skip
    for name, sub in commands.choices.items():
        formatter = sub._get_formatter()
        lines += [f"### `ltsgen {name}` options", "", "| option | what it does |", "|---|---|"]
        for action in sub._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            spelling = formatter._format_action_invocation(action)
            what = " ".join(formatter._expand_help(action).split()).replace("|", "\\|")
            lines.append(f"| `{spelling}` | {what} |")
        lines.append("")
    return "\n".join(lines)


def test_the_commands_document_lists_every_option_as_help_gives_it():
    """Rewrite the section with ``LTSGEN_WRITE_DOCS=1`` after changing an option."""
    import os

    path = REPO / "docs" / "commands.md"
    text = path.read_text(encoding="utf-8")
    before, _, _ = text.partition(OPTIONS_HEADING)
    wanted = before + options_reference()
    if os.environ.get("LTSGEN_WRITE_DOCS") == "1":
        path.write_text(wanted, encoding="utf-8")
        text = wanted
    assert text == wanted, "docs/commands.md lists other options than --help: rerun with LTSGEN_WRITE_DOCS=1"
