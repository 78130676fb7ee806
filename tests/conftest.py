"""Shared test set-up: one torch thread (2-core machines), offline hub, the real data fixtures."""

from __future__ import annotations

import ast
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
    folders, under ``-m torch`` the other folders' modules that mark no test torch (importing the suite's
    modules is most of the time it takes to collect)."""
    markexpr = config.getoption("markexpr")
    if markexpr == "not torch" and collection_path.parent == TESTS:
        return collection_path.name in MODEL_FOLDERS or None
    if markexpr == "torch" and collection_path.suffix == ".py" and collection_path.name.startswith("test_"):
        return _torch_tests(collection_path) == frozenset() or None
    return None


def _in_model_folder(path: Path) -> bool:
    return path.parent.parent == TESTS and path.parent.name in MODEL_FOLDERS


@functools.cache
def _torch_tests(path: Path) -> frozenset[str] | None:
    """The tests of a module that run a model, read from its source: None for all of them (a model folder,
    or a module whose ``pytestmark`` holds the torch mark), else the functions decorated with it."""
    if _in_model_folder(path):
        return None
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and "pytestmark" in [getattr(t, "id", None) for t in node.targets]:
            if TORCH_MARK in ast.unparse(node.value):
                return None
        elif isinstance(node, ast.FunctionDef) and TORCH_MARK in map(ast.unparse, node.decorator_list):
            names.add(node.name)
    return frozenset(names)


def _runs_a_model(path: Path, function: str) -> bool:
    names = _torch_tests(path)
    return names is None or function in names


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``torch`` the tests of the model folders; elsewhere a test or its module carries the mark itself,
    written as ``@pytest.mark.torch`` or in ``pytestmark``, where the scheduler of `make test` reads it."""
    for item in items:
        if _in_model_folder(item.path):
            item.add_marker(pytest.mark.torch)
        elif bool(item.get_closest_marker("torch")) != _runs_a_model(item.path, item.originalname):
            raise pytest.UsageError(f"{item.nodeid}: write its torch mark as @{TORCH_MARK} or in pytestmark")


@pytest.hookimpl(optionalhook=True)  # an xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`make test` (``-n 2 --dist loadgroup``): the tests marked torch are one group, which one process runs
    one at a time while the other takes the other tests one by one (then both do): two models never run at
    once. The group is read from the modules' source, because xdist's own groups (``xdist_group``) travel
    in test ids that pytest 9.2 no longer lets a plugin change."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModelTestsInOneProcess(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, _, test = nodeid.partition("::")
            return "torch" if _runs_a_model(config.rootpath / module, test.partition("[")[0]) else nodeid

    return ModelTestsInOneProcess(config, log)


_MODEL_TEST_PROCESSES: set[str] = set()  # the xdist workers that ran a test marked torch


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    worker = getattr(report, "node", None)  # on xdist's controller, the worker that ran the test
    if worker is not None and "torch" in report.keywords:
        _MODEL_TEST_PROCESSES.add(worker.gateway.id)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail a `make test` run whose model tests ran in more than one process (two models at once)."""
    if session.config.getvalue("dist") == "loadgroup" and len(_MODEL_TEST_PROCESSES) > 1:
        processes = ", ".join(sorted(_MODEL_TEST_PROCESSES))
        terminal = session.config.pluginmanager.get_plugin("terminalreporter")
        terminal.write_line(f"the tests marked torch ran in {processes}: expected one process", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


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
    runs it beside another model test: every module's forward pass of an unmarked test is recorded, and
    fails it."""
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
