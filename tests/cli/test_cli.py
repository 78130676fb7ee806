"""What every subcommand shares: one help formatter, examples, one-line endings (no tracebacks)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from ltsgen.cli import COMMAND_MODULES, build_parser, main

COMMANDS = [module.rsplit(".", 1)[1] for module in COMMAND_MODULES]


def help_text(command: str) -> str:
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    return subparsers.choices[command].format_help()


@pytest.mark.parametrize("command", COMMANDS)
def test_help_states_each_default_once_and_ends_with_examples(command):
    text = help_text(command)
    assert "(default: None)" not in text
    for line in re.split(r"\n  -", text):
        assert len(re.findall(r"\(default\b", line)) <= 1, line
    examples = text.split("examples:", 1)[1]
    assert f"ltsgen {command}" in examples


def test_required_options_show_no_default():
    parser = build_parser()
    subparsers = next(action for action in parser._actions if action.dest == "command")
    checked = []
    for command in COMMANDS:
        sub = subparsers.choices[command]
        text = sub.format_help()
        for action in sub._actions:
            if action.required and action.option_strings:
                entry = text.split(action.option_strings[0], 1)[1].split("\n  -", 1)[0]
                assert "(default" not in entry, (command, action.option_strings)
                checked.append(action.option_strings[0])
    assert {"--out", "--data", "--run"} <= set(checked), checked


def test_a_reader_that_leaves_early_gets_no_traceback(tmp_path):
    """``ltsgen stories ... | head -0``: the pipe is closed before the summary is printed; the command
    stops quietly with the shell's status for SIGPIPE."""
    out = str(tmp_path / "lts")
    command = [sys.executable, "-m", "ltsgen", "stories", "--out", out, "--num-stories", "3", "--no-progress"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()  # the reader is gone before a byte is written
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr
    assert (tmp_path / "lts" / "manifest.json").is_file()  # the work itself is done


@pytest.mark.parametrize(
    "argv", [["--help"], ["stories", "--help"], ["buckets", "--help"], ["card", "--help"]]
)
def test_commands_that_do_not_train_do_not_import_torch(argv):
    """Building the training commands' options imports torch (seconds of CPU); the others skip it."""
    code = (
        "import sys\nfrom ltsgen.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        "print('torch' in sys.modules, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120)
    assert done.stderr.strip().splitlines()[-1] == "False", done.stderr


@pytest.mark.parametrize("command", COMMANDS)
def test_a_misspelt_option_is_one_line_naming_help(command, capsys):
    from ltsgen.cli import main

    with pytest.raises(SystemExit) as refused:
        main([command, "--no-such-option"])
    assert refused.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"ltsgen {command}: error: ") and line.endswith(f"(see ltsgen {command} --help)")


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        # before: taken as --num-stories (a later value winning silently), --steps, --eval-sequences, --verify
        (
            ["stories", "--out", "x", "--num-stories", "5", "--num-storie", "3"],
            "; did you mean '--num-stories'?",
        ),
        (["train", "--data", "x", "--out", "r", "--step", "3"], "; did you mean '--steps'?"),
        (
            ["buckets", "--source", "c4", "--tokenizer", "t.json", "--out", "b", "--eval-seq", "3"],
            "; did you mean '--eval-sequences'?",
        ),
        (["info", "x", "--ver"], "; did you mean '--verify'?"),
        (["info", "x", "--bogus"], ""),
        # not an old spelling --help no longer lists (--seed, --layers)
        (["compare", "--data", "x", "--out", "c", "--seedz", "1"], "; did you mean '--seeds'?"),
        (["train", "--data", "x", "--out", "r", "--layer", "2"], "; did you mean '--n-layers'?"),
    ],
)
def test_an_abbreviated_option_is_a_typo_not_the_option(argv, hint, capsys, tmp_path, monkeypatch):
    from ltsgen.cli import main

    monkeypatch.chdir(tmp_path)  # where the code before built, trained and compared

    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert (
        f"unrecognized arguments: {' '.join(argv[-2:] if argv[-1].isdigit() else argv[-1:])}{hint} (" in line
    )


@pytest.mark.parametrize(
    ("parse", "text", "message"),
    [
        # before: "every length must be at least 2 tokens" for a list that holds none
        ("lengths", "", "--eval-lengths: give at least one value, e.g. 64,128,256"),
        ("lengths", " , ", "--eval-lengths: give at least one value, e.g. 64,128,256"),
        ("lengths", "64,x", "--eval-lengths '64,x': expected comma-separated integers like 64,128,256"),
        ("lengths", "1,64", "--eval-lengths '1,64': every length must be at least 2 tokens"),
        ("seeds", "", "--seeds: give at least one value, e.g. 0,1,2"),
        # before: taken once without a word ("--seeds 0,0" said one training)
        ("lengths", "128,64,128,", "--eval-lengths '128,64,128,': 128 is given twice"),
        ("seeds", "1,0,1", "--seeds '1,0,1': 1 is given twice"),
    ],
)
def test_lists_of_integers_name_what_is_wrong(parse, text, message):
    from ltsgen.commands.compare import parse_seeds
    from ltsgen.commands.evaluate import parse_lengths
    from ltsgen.errors import UsageError

    with pytest.raises(UsageError) as refused:
        (parse_lengths if parse == "lengths" else parse_seeds)(text)
    assert str(refused.value) == message
    assert parse_lengths("128,64,") == [64, 128] and parse_seeds("1,0") == [1, 0]


@pytest.mark.parametrize(
    ("argv", "option"),
    [
        (["stories", "--out", "", "--num-stories", "3"], "--out"),  # before: built into the working folder
        (["train", "--data", "lts", "--out", "run", "--init-from", ""], "--init-from"),  # before: ignored
        (["tokenizer", "--source", "c4", "--input", "", "--out", "t.json"], "--input"),
        (["evaluate", "--run", "", "--data", "lts"], "--run"),
        (["card", "lts", "--out", ""], "--out"),  # before: "exists and is not a data card" of "."
    ],
)
def test_an_empty_path_is_refused_not_taken_for_the_working_folder(
    argv, option, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as refused:
        main(argv)
    assert refused.value.code == 2 and not any(tmp_path.iterdir())
    assert (
        capsys.readouterr().err
        == f"ltsgen {argv[0]}: error: argument {option}: an empty path (see ltsgen {argv[0]} --help)\n"
    )


def test_a_path_from_the_home_folder_is_taken_from_it_where_the_shell_leaves_the_tilde(
    tmp_path, monkeypatch, capsys
):
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir(), work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)  # before: `--out=~/lts` built into ./~/lts
    assert main(["stories", "--out=~/lts", "--num-stories", "3", "--max-words", "200", "--no-progress"]) == 0
    assert (home / "lts" / "manifest.json").exists() and not any(work.iterdir())
    assert main(["card", str(home / "lts"), "--out=~/card.md"]) == 0
    assert (home / "card.md").exists() and not any(work.iterdir())
    capsys.readouterr()


@pytest.mark.parametrize(
    ("out", "why"),
    [
        ("newdir/", "newdir/ names a folder; give the copy's file name (newdir/card.md, say)"),
        ("newdir/.", "newdir/. names a folder; give the copy's file name (newdir/card.md, say)"),
        ("s3://bucket/c.md", "s3://bucket/c.md: the copy is written to a local file, not to a URL"),
    ],
)
def test_a_card_copy_named_as_a_folder_or_a_url_is_refused_not_written_as_a_file(
    out, why, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)  # before: a file named newdir, or ./s3:/bucket/c.md and its plots
    with pytest.raises(SystemExit) as refused:
        main(["card", "lts", "--out", out])
    assert refused.value.code == 2 and not any(tmp_path.iterdir())
    assert capsys.readouterr().err == f"ltsgen card: error: argument --out: {why} (see ltsgen card --help)\n"


@pytest.mark.parametrize("device", ["meta", "mps", "xpu"])
def test_a_device_torch_names_but_the_loop_does_not_run_on_is_one_line(device):
    from ltsgen.training.distributed import resolve_device
    from ltsgen.training.errors import TrainingError

    with pytest.raises(
        TrainingError, match=rf"^--device '{device}': ltsgen trains and evaluates on cpu or cuda"
    ):
        resolve_device(device)  # before: accepted, then a traceback from the model (exit 1)
    assert resolve_device("cpu").type == "cpu"


def test_a_card_copy_into_a_symlink_loop_and_info_on_a_tokenizer_entry_without_counts_are_lines(
    tmp_path, capsys
):
    data = tmp_path / "lts"
    assert main(["stories", "--out", str(data), "--num-stories", "3", "--max-words", "300", "--quiet"]) == 0
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    capsys.readouterr()
    # before: a RuntimeError traceback
    assert main(["card", str(data), "--out", str(tmp_path / "loop1")]) == 2
    assert capsys.readouterr().err.startswith(
        f"ltsgen card: error: {tmp_path / 'loop1'}: cannot be written ("
    )
    manifest = json.loads((data / "manifest.json").read_text())
    manifest["tokenizer"] = {"path": "tokenizer.json"}  # the manifest's check lets the counts be missing
    (data / "manifest.json").write_text(json.dumps(manifest))
    assert main(["info", str(data)]) == 0  # before: KeyError: 'vocab_size'
    assert "tokenizer: tokenizer.json (vocabulary unknown, " in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra",
    [["--input", "c4.jsonl"], ["--text-field", "body"], ["--skip-bad"], ["--strict"], ["--hf-split", "test"]],
)
def test_a_corpus_option_with_tokenizer_data_is_refused_not_ignored(extra, tmp_path, capsys):
    """Before, these were ignored without a word (while --subset, --separator and --hf-config were refused)."""
    argv = ["tokenizer", "--data", str(tmp_path / "lts"), "--out", str(tmp_path / "t.json"), *extra]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"ltsgen tokenizer: error: {extra[0]} applies to --source, not --data (a built dataset's records are "
        "read as they are)\n"
    )
