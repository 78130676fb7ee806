"""``ltsgen.loaders.storage`` on a local folder and on the real moto S3 server: the same primitives, the same
meaning (atomic publish, logs, locks, listings, one-line errors)."""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from http_server import served_folder, serving_thread
from process_tools import free_port

from ltsgen.loaders import LoaderError
from ltsgen.loaders import storage as storage_module
from ltsgen.loaders.storage import LockHeld, Storage, StorageError, parse_storage_options

SERVERS = {"s3": "s3_server", "gs": "gcs_server"}  # scheme -> the fixture of its real local server


@pytest.fixture(params=["local", "s3", "gs"])
def store(request, tmp_path) -> Storage:
    if request.param == "local":
        return Storage(tmp_path / "data")
    server = request.getfixturevalue(SERVERS[request.param])
    return Storage(f"{request.param}://{server.bucket()}/data")


def test_publish_appears_only_when_complete(store):
    with store.publish("a/b/shard-00000.bin") as tmp:
        tmp.write_bytes(b"x" * 1000)
        assert not store.exists("a/b/shard-00000.bin")
    assert store.read_bytes("a/b/shard-00000.bin") == b"x" * 1000
    with pytest.raises(RuntimeError), store.publish("a/b/shard-00001.bin") as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("writer failed")
    assert not store.exists("a/b/shard-00001.bin")
    assert store.files() == {"a/b/shard-00000.bin": 1000}  # no temporary file left anywhere
    if store.is_local:
        assert sorted(p.name for p in store.local_path("a/b").iterdir()) == ["shard-00000.bin"]


def test_files_sizes_sha256_remove(store):
    store.write_bytes("x.txt", b"hello")
    store.write_bytes("sub/y.txt", b"world!")
    store.write_bytes("sub/deeper/z.txt", b"")
    assert store.files() == {"sub/deeper/z.txt": 0, "sub/y.txt": 6, "x.txt": 5}
    assert store.files("sub") == {"sub/deeper/z.txt": 0, "sub/y.txt": 6}
    assert store.files("nothing-here") == {}
    assert store.size("sub/y.txt") == 6 and store.is_file("x.txt") and not store.is_file("sub")
    assert store.sha256("x.txt") == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    with store.open("sub/y.txt") as handle:
        assert handle.read() == b"world!"
    store.remove("x.txt")
    store.remove("x.txt")  # already gone: fine
    store.remove_tree("sub")
    assert store.files() == {} and not store.exists("x.txt")
    assert store.child("sub").location("y.txt") == store.location("sub/y.txt")


def test_stamp_changes_when_rewritten(store):
    store.write_bytes("f", b"one")
    first = store.stamp("f")
    store.write_bytes("f", b"two")
    if store.is_local:
        assert first is None and store.stamp("f") is None  # local files are checked by their bytes
    else:
        assert first and store.stamp("f") and store.stamp("f") != first


def test_log_keeps_append_order(store):
    assert store.read_lines("journal") == []
    lines = [json.dumps({"job": f"j{i}"}) for i in range(12)]
    for line in lines:
        store.append_line("journal", line)
    assert store.read_lines("journal") == lines
    with pytest.raises(ValueError):
        store.append_line("journal", "two\nlines")


def test_missing_files_and_bad_options_are_one_line(store, tmp_path):
    with pytest.raises(StorageError, match=r"missing\.txt: not found$"):
        store.read_bytes("missing.txt")
    with pytest.raises(StorageError, match="not found"):
        store.size("missing.txt")
    with pytest.raises(StorageError, match="--storage-options: not valid JSON"):
        parse_storage_options("{profile: lab}")
    with pytest.raises(StorageError, match="must be a JSON object"):
        parse_storage_options("[1]")
    assert parse_storage_options('{"anon": true}') == {"anon": True} and parse_storage_options(None) == {}


class _Unavailable(http.server.BaseHTTPRequestHandler):
    def do_HEAD(self):  # noqa: N802 (http.server's name)
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_HEAD

    def log_message(self, *args):
        pass


def test_a_store_that_fails_to_answer_is_an_error_not_a_missing_file(tmp_path):
    """fsspec's own ``exists`` takes an HTTP 503 (or a 403, or a network error on hf://) for "absent":
    before, `ltsgen info` said a dataset's tokenizer was not found in its folder while the server was down."""
    (tmp_path / "here.json").write_text("{}")
    with served_folder(tmp_path) as url:
        store = Storage(url)
        assert store.exists("here.json") and not store.exists("gone.json")
        assert store.is_file("here.json") and not store.is_file("gone.json")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    thread = serving_thread(server)
    thread.start()
    try:
        down = Storage(f"http://127.0.0.1:{server.server_address[1]}/lts")
        for asked in (down.exists, down.is_file):  # fsspec's isfile answers False for any failure, everywhere
            with pytest.raises(StorageError, match=r"tokenizer\.json: cannot be read \("):
                asked("tokenizer.json")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_a_folder_marker_is_no_file(s3_server):
    """An empty object whose key ends in "/" (a console's "Create folder"): before, listed as a file named
    "", so a build into the empty folder was refused as "not empty and holds no ltsgen build"."""
    import boto3

    bucket = s3_server.bucket()
    boto3.client("s3", endpoint_url=s3_server.endpoint).put_object(Bucket=bucket, Key="made/", Body=b"")
    folder = Storage(f"s3://{bucket}/made")
    assert folder.listing() == {}
    folder.write_bytes("x", b"ok")
    assert list(folder.listing()) == ["x"]


def test_storage_options_reach_the_filesystem(s3_server):
    bucket = s3_server.bucket()
    wrong = Storage(f"s3://{bucket}", {"endpoint_url": f"http://127.0.0.1:{free_port()}", "config_kwargs": {
        "retries": {"max_attempts": 1}, "connect_timeout": 1}})  # fmt: skip
    with pytest.raises(StorageError) as error:
        wrong.read_bytes("x")
    assert str(error.value).startswith(f"s3://{bucket}/x: cannot be read") and "\n" not in str(error.value)
    right = Storage(f"s3://{bucket}", {"endpoint_url": s3_server.endpoint})
    right.write_bytes("x", b"ok")
    assert right.read_bytes("x") == b"ok"


WITHOUT = """
import importlib.abc, sys
class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == sys.argv[1]:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotInstalled())
from ltsgen.cli import main
sys.exit(main(["card", sys.argv[2]]))
"""


@pytest.mark.parametrize(
    "module, url, extra", [("s3fs", "s3://b/d", "s3"), ("gcsfs", "gs://b/d", "gcs"), ("huggingface_hub", "hf://datasets/o/d", "hf")]
)  # fmt: skip
def test_missing_extra_names_it(module, url, extra):
    """In a process where the extra's module cannot be imported (an install without the extra)."""
    process = subprocess.run([sys.executable, "-c", WITHOUT, module, url], capture_output=True, text=True)
    scheme = url.split(":")[0]
    assert process.returncode == 2 and process.stderr == (
        f"ltsgen card: error: {scheme}:// paths need {module}, which is not installed: "
        f"pip install 'ltsgen[{extra}]'\n"
    )


def test_another_fsspec_scheme_takes_its_host_from_the_url_and_an_unknown_one_is_named():
    """Before: "ftp:// storage options {}: FTPFileSystem.__init__() missing ... 'host'" after an "Exception
    ignored" traceback (the URL's host was dropped); an unknown scheme, fsspec's own error."""
    url = f"ftp://127.0.0.1:{free_port()}/data"  # nothing listens there
    for given, said in ((url, f"{url}: cannot connect (Connection refused)"),
                        ("nosuch://host/data", "nosuch://host/data: nosuch:// is not a storage fsspec knows"),
                        ("ftp://host:abc/data", "ftp://host:abc/data: not a valid URL (Port could not be cast")):  # fmt: skip
        process = subprocess.run(
            [sys.executable, "-m", "ltsgen", "info", given], capture_output=True, text=True
        )
        assert process.returncode == 2 and process.stderr.startswith(f"ltsgen info: error: {said}")
        assert process.stderr.count("\n") == 1


def test_read_only_schemes_refuse_writes():
    for url in ("hf://datasets/someone/data", "https://example.org/data"):
        hub = Storage(url)
        for write, arguments in (
            (hub.write_bytes, ("x", b"")),
            (hub.remove, ("x",)),
            (hub.append_line, ("j", "")),
        ):
            with pytest.raises(StorageError, match="is read-only here"):
                write(*arguments)


def test_pickles_without_a_connection(s3_server):
    import pickle

    store = Storage(f"s3://{s3_server.bucket()}/p", {"endpoint_url": s3_server.endpoint})
    store.write_bytes("x", b"1")
    copy = pickle.loads(pickle.dumps(store))
    assert copy == store and copy.read_bytes("x") == b"1"


def test_lock_is_exclusive_and_its_holder_is_known_without_taking_it(store):
    assert store.lock_holder(".ltsgen/lock") is None  # never claimed
    with store.lock(".ltsgen/lock"):
        with pytest.raises(LockHeld) as refused, store.lock(".ltsgen/lock"):
            pass
        holder = store.lock_holder(".ltsgen/lock")
        assert holder is not None and holder.startswith(f"{store.location('.ltsgen/lock')}: held by process ")
        assert holder.split(" (")[0] == refused.value.reason.split(" (")[0]  # what taking it would say
    assert store.lock_holder(".ltsgen/lock") is None  # released, and asking took nothing
    with store.lock(".ltsgen/lock"):  # released: free again
        pass
    if not store.is_local:
        assert not store.exists(".ltsgen/lock")


def test_lease_takeover_rules(s3_server, monkeypatch):
    store = Storage(f"s3://{s3_server.bucket()}")
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True)
    dead_pid = int(finished.stdout)
    here = socket.gethostname()
    cases = [  # (lease left behind, may a new build take it)
        ({"host": here, "pid": dead_pid, "renewed": time.time()}, True),  # its process is gone
        ({"host": "other-node", "pid": 1, "renewed": time.time()}, False),  # alive elsewhere, renewed
        ({"host": "other-node", "pid": 1, "renewed": time.time() - 10 * 60}, True),  # not renewed: expired
        ({"host": here, "pid": os.getpid(), "renewed": time.time()}, False),
        # a container sharing this host name, not its PID namespace: its pid means nothing here
        ({"host": here, "pid": dead_pid, "pidns": storage_module._pid_namespace() + 1, "renewed": time.time()},
         False),
        ({"host": here, "pid": dead_pid, "pidns": storage_module._pid_namespace(), "renewed": time.time()}, True),
    ]  # fmt: skip
    for lease, free in cases:
        store.write_bytes("lock", json.dumps(lease).encode())
        if free:
            with store.lock("lock"):
                assert json.loads(store.read_bytes("lock"))["pid"] == os.getpid()
            assert not store.exists("lock")
        else:
            with pytest.raises(LockHeld, match=rf"held by process {lease['pid']} on {lease['host']}"):
                with store.lock("lock"):
                    pass
    store.remove("lock")
    monkeypatch.setattr(storage_module, "LEASE_RENEW_SECONDS", 0.2)
    with store.lock("lock"):
        first = json.loads(store.read_bytes("lock"))["renewed"]
        deadline = time.monotonic() + 10
        while json.loads(store.read_bytes("lock"))["renewed"] == first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert json.loads(store.read_bytes("lock"))["renewed"] > first  # renewed while held
    # paused past its expiry, its lease taken over: renewal does not write over the other's, and the block
    # ends in one line saying so (before: both went on, each renewing over the other)
    theirs = json.dumps({"host": "other-node", "pid": 1, "token": "theirs", "renewed": time.time()})
    with pytest.raises(LoaderError, match=r"/lock: the lease was taken over while this process held it \(.*"
                                         r"held by process 1 on other-node") as lost:  # fmt: skip
        with store.lock("lock"):
            store.write_bytes("lock", theirs.encode())
            time.sleep(1.0)
    assert not isinstance(lost.value, StorageError)  # no caller reads it as a refusal or a write that failed
    assert store.read_text("lock") == theirs


@pytest.mark.parametrize("scheme", ["s3", "gs"])
def test_a_lease_created_since_it_was_read_is_not_replaced(scheme, request, monkeypatch):
    """Between reading that no lease exists and creating one, another process creates it: the store's
    create-only write (S3 If-None-Match, GCS ifGenerationMatch=0) refuses, and the other lease stays."""
    server = request.getfixturevalue(SERVERS[scheme])
    store = Storage(f"{scheme}://{server.bucket()}")
    theirs = json.dumps({"host": "other-node", "pid": 1, "token": "theirs", "renewed": time.time()})

    def read_just_before_the_other_process_writes(lease):
        monkeypatch.undo()
        store.write_bytes("lock", theirs.encode())
        return None

    monkeypatch.setattr(storage_module._Lease, "_read", read_just_before_the_other_process_writes)
    with pytest.raises(LockHeld, match=r"/lock: claimed by another process a moment ago$"):
        with store.lock("lock"):
            pass
    assert store.read_text("lock") == theirs


HOLDER = """
import sys, time
from ltsgen.loaders.storage import Storage
store = Storage(sys.argv[1])
with store.lock("lock"):
    with store.publish("big.bin") as tmp:
        tmp.write_bytes(b"x" * 100000)
        print("holding", flush=True)
        time.sleep(60)
"""


def test_kill_9_frees_the_lock_and_publishes_nothing(store, tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(HOLDER), store.url], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        with pytest.raises(LockHeld):
            with store.lock("lock"):
                pass
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with store.lock("lock"):  # the holder died: the claim is free at once
        pass
    assert not store.exists("big.bin")
    if store.is_local:
        return  # the temporary file beside it is a build's to sweep (ltsgen.build removes .*.tmp)
    staging = Path(tmp_path) / storage_module.STAGING_DIR
    assert len(list(staging.iterdir())) == 1  # left by the killed process; the next one removes it
    upload = f"from ltsgen.loaders.storage import Storage; Storage({store.url!r}).write_bytes('y', b'1')"
    subprocess.run([sys.executable, "-c", upload], env=env, check=True)
    assert list(staging.iterdir()) == []


def test_nothing_outside_a_local_folder_is_removed(tmp_path):
    """Paths to remove come from manifests and journals, which are data: a way out of the folder (``..``, an
    absolute path, a folder a symlink takes elsewhere) is one line, and nothing is removed."""
    outside = tmp_path / "theirs"
    outside.mkdir()
    (outside / "victim.txt").write_text("keep me")
    root = tmp_path / "data"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "mine.txt").write_text("mine")
    (root / "link").symlink_to(outside)
    store = Storage(root)
    for relpath in ("sub/../../theirs/victim.txt", "/theirs/victim.txt", "link/victim.txt"):
        with pytest.raises(StorageError, match="not removed: the path leads out of"):
            store.remove(relpath)
    store.remove_tree("link")  # a symlink itself is never followed
    assert (outside / "victim.txt").read_text() == "keep me"
    store.remove("sub/mine.txt")
    assert not (root / "sub" / "mine.txt").exists()


def test_a_file_that_is_no_regular_file_is_one_line_and_never_read(tmp_path):
    """A shard or manifest that is a FIFO blocked for ever; one that is a symlink to /dev/zero was read until
    the memory ran out (hashing it, for ever). /dev/null stands for the device here: the code before read it
    as an empty file, at once."""
    import threading

    from ltsgen.loaders.sources import read_bytes

    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "device").symlink_to("/dev/null")

    def unblock() -> None:  # the code before waits for a writer: one comes, writes nothing and goes
        while not done.wait(0.05):
            try:
                os.close(os.open(tmp_path / "fifo", os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader waiting
                pass

    done = threading.Event()
    threading.Thread(target=unblock, daemon=True).start()
    store = Storage(tmp_path)
    try:
        for name in ("fifo", "device"):
            for read in (store.read_bytes, store.sha256, store.open):
                with pytest.raises(StorageError, match=f"{name}: cannot be read \\(not a regular file\\)$"):
                    read(name)
            with pytest.raises(LoaderError, match="not a regular file"):
                read_bytes(tmp_path / name)
    finally:
        done.set()
