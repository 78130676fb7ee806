"""Shared test set-up: one torch thread (2-core machines), offline hub, the real data fixtures."""

from __future__ import annotations

import fcntl
import functools
import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

TESTS = Path(__file__).resolve().parent
REPO_ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
MODEL_FOLDERS = ("encodings", "training")  # every test there runs a model
TORCH_MARK = "pytest.mark.torch"  # how a test elsewhere says it runs a model


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Leave unimported the modules whose tests are all deselected: under ``-m "not torch"`` the model
    folders, under ``-m torch`` the other folders' modules that never write ``pytest.mark.torch``
    (importing the suite's modules is most of the time it takes to collect; pytest_collection_modifyitems
    checks that no module marks a test another way)."""
    markexpr = config.getoption("markexpr")
    if markexpr == "not torch" and collection_path.parent == TESTS:
        return collection_path.name in MODEL_FOLDERS or None
    if markexpr == "torch" and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return not _marks_torch_itself(collection_path) or None
    return None


def _in_model_folder(path: Path) -> bool:
    return path.parent.parent == TESTS and path.parent.name in MODEL_FOLDERS


@functools.cache  # a module's torch tests are checked against its text once, not once each
def _marks_torch_itself(path: Path) -> bool:
    return _in_model_folder(path) or TORCH_MARK in path.read_text(encoding="utf-8")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``torch`` the tests of the model folders; elsewhere a test or module carries the mark itself,
    spelled ``pytest.mark.torch``. `make test` runs the unmarked tests in two processes, then the marked ones
    alone, one at a time: two torch processes on two cores run several times slower than one."""
    for item in items:
        if _in_model_folder(item.path):
            item.add_marker(pytest.mark.torch)
        elif item.get_closest_marker("torch") and not _marks_torch_itself(item.path):
            raise pytest.UsageError(f"{item.path}: marks a test torch without spelling {TORCH_MARK}")


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread():
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _a_model_runs_only_in_a_torch_test(request):
    """A test that runs a model in this process must carry the ``torch`` mark, so that `make test` never
    runs it beside another test: every module's forward pass of an unmarked test is recorded, and fails it."""
    torch = sys.modules.get("torch")
    if torch is None or request.node.get_closest_marker("torch"):
        yield
        return
    ran: list[str] = []
    hook = torch.nn.modules.module.register_module_forward_pre_hook(
        lambda module, args: ran.append(type(module).__name__)
    )
    try:
        yield
    finally:
        hook.remove()
    assert not ran, f"{request.node.nodeid} runs a model ({ran[0]}) and is not marked torch"


@pytest.fixture(scope="session")
def real_data() -> Path:
    """Small real-text fixtures (C4, arXiv, code, TinyStories), each folder with its PROVENANCE.md."""
    return FIXTURES


@pytest.fixture(scope="session")
def c4_buckets_reference(real_data, tmp_path_factory) -> tuple[Path, Path]:
    """(tokenizer, build): a 512-token BPE trained on the C4 sample and its ``ltsgen buckets`` build, both
    made locally: the reference that the builds on S3 and on Ray must equal. Read it, never write into it."""
    from corpus_fixtures import C4_GZ
    from remote_fixtures import BUCKETS

    local = _reference_folder(tmp_path_factory, "c4-reference")
    tokenizer, reference = local / "tok.json", local / "buckets"
    train = ["tokenizer", "--source", "c4", "--vocab-size", "512", "--input", str(real_data / C4_GZ)]
    argv = ["buckets", *BUCKETS, "--input", str(real_data / C4_GZ), "--tokenizer", str(tokenizer)]
    _build_once(local, [*train, "--out", str(tokenizer)], [*argv, "--out", str(reference)])
    return tokenizer, reference


@pytest.fixture(scope="session")
def small_reference(tmp_path_factory) -> Path:
    """The small stories build (``SMALL``) that the builds on S3 and on GCS must equal, built locally once.
    Read it, never write into it."""
    from remote_fixtures import SMALL

    local = _reference_folder(tmp_path_factory, "small-reference")
    _build_once(local, ["stories", "--out", str(local / "lts"), *SMALL])
    return local / "lts"


@pytest.fixture(scope="session")
def c4_on_s3(s3_server, real_data) -> str:
    """A bucket holding the C4 sample (``corpora/c4/part-0.json.gz``) and a tokenizer trained on it there
    (``tok.json``, input and output both on S3), for the S3 tests and the Ray build that reads its inputs
    from the store."""
    from corpus_fixtures import C4_GZ

    from ltsgen.cli import main

    bucket = s3_server.bucket()
    s3_server.client().put_file(str(real_data / C4_GZ), f"{bucket}/corpora/c4/part-0.json.gz")
    train = ["tokenizer", "--source", "c4", "--vocab-size", "512"]
    assert main([*train, "--input", f"s3://{bucket}/corpora/c4/", "--out", f"s3://{bucket}/tok.json"]) == 0
    return bucket


@pytest.fixture(scope="session")
def killed_reference(tmp_path_factory) -> Path:
    """The stories build that the kill -9 tests on S3 and on Ray interrupt (``KILLED``), built locally
    without a kill: what their resumed builds must equal. Read it, never write into it."""
    from remote_fixtures import KILLED

    local = _reference_folder(tmp_path_factory, "killed-reference")
    _build_once(local, ["stories", "--out", str(local / "lts"), *KILLED])
    return local / "lts"


def _reference_folder(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The folder of a reference that ``_build_once`` makes once per test run: under ``pytest -n``, one
    folder in the run's temporary folder, shared by the workers (each would otherwise build the same
    reference again, seconds of CPU each), else one of this session's."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return tmp_path_factory.mktemp(name)
    return tmp_path_factory.getbasetemp().parent / name  # the run's folder, above each worker's own


def _build_once(local: Path, *commands: list[str]) -> None:
    """Run the ``ltsgen`` commands that fill ``local``, unless they already did: the first worker to ask
    runs them while the others wait, and a folder whose commands did not all succeed is built again."""
    from ltsgen.cli import main

    done = local.with_name(f"{local.name}.done")
    with open(local.with_name(f"{local.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return
        shutil.rmtree(local, ignore_errors=True)  # what a build that failed left
        local.mkdir()
        for argv in commands:
            assert main(argv) == 0, argv
        done.touch()


@pytest.fixture(scope="session")
def s3_server():
    """moto's S3-compatible server on 127.0.0.1 (a random free port), for the whole session. Its
    ``AWS_*`` variables are set in this process (and so in every child), so no S3 client can reach a real
    endpoint while it runs."""
    from s3_server import S3Server

    yield from _serving(S3Server.start())


@pytest.fixture(scope="session")
def gcs_server():
    """fake-gcs-server on 127.0.0.1 (a random free port), for the whole session, with
    ``STORAGE_EMULATOR_HOST`` set in this process and every child (no GCS client can reach Google)."""
    from gcs_server import GCSServer

    yield from _serving(GCSServer.start())


def _serving(server):
    """Yield ``server`` with its ``env`` set in this process; stop it and restore the variables after."""
    saved = {name: os.environ.get(name) for name in server.env}
    os.environ.update(server.env)
    try:
        yield server
    finally:
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
