"""Remote loading through the node-local shard cache, against a real S3-compatible server on 127.0.0.1:
each shard fetched once per node (counted by the server), an epoch that ends with its downloads into the
cache, exact order and resume with 2 workers, eviction under a tiny limit, two processes fetching the same
shards at once, and a kill -9 mid-download."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import random
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from loader_fixtures import make_dataset, subprocess_env
from loader_procs import cached
from process_tools import forked, join_all, kill_forked

from ltsgen.loaders import LoaderError, StreamingDataset, s3
from ltsgen.loaders.cache import PART_SUFFIX, ShardCache, parse_size
from ltsgen.loaders.contract import read_manifest
from ltsgen.loaders.reader import ShardReader
from ltsgen.loaders.storage import StorageError

SIZES = [14, 9, 17, 12, 6, 15]  # 73 records in 6 shards
pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Path:
    lengths = np.random.default_rng(1).integers(50, 400, size=sum(SIZES))
    return make_dataset(tmp_path_factory.mktemp("cache-data"), SIZES, "parquet", lengths=lengths)


@pytest.fixture(scope="module")
def remote(s3_server, local) -> str:
    bucket = s3_server.bucket()
    s3_server.client().put(str(local), f"{bucket}/data", recursive=True)
    return f"s3://{bucket}/data"


def shard_gets(requests: list[tuple]) -> Counter:
    """Whole-shard downloads per shard (GETs without a Range header)."""
    return Counter(
        request[1].rsplit("/", 1)[-1]
        for request in requests
        if request[0] == "GET" and "shard-" in request[1] and (len(request) == 2 or request[2] is None)
    )


def ranged_shards(requests: list[tuple]) -> set[str]:
    """The shards read by range (a first batch reads the footer and the row groups it decodes)."""
    return {r[1].rsplit("/", 1)[-1] for r in requests if r[0] == "GET" and "shard-" in r[1] and r[2]}


def first_window(local: Path, **options) -> set[str]:
    """The shards of the first window of ``make(local)``'s epoch 0."""
    dataset = make(local, **options)
    order = dataset._orders()[0]
    return {dataset.shards[int(s)].path.rsplit("/", 1)[-1] for s in order.window_shards(0)}


def batches(loader) -> list[tuple]:
    return [tuple(batch["input_ids"].flatten().tolist()) for batch in loader]


def make(root, **options) -> StreamingDataset:
    return StreamingDataset(root, seed=9, batch_size=2, seq_len=31, shuffle_window=2, **options)


def cache_files(directory: Path) -> dict[str, int]:
    return {path.name: path.stat().st_size for path in directory.iterdir()}


def test_two_workers_fetch_each_shard_once_and_keep_order_and_resume(s3_server, local, remote, tmp_path):
    expected = batches(make(local).loader())
    cache = tmp_path / "cache"
    with s3_server.recording(ranges=True) as first_epoch:
        assert batches(make(remote, cache_dir=cache).loader(num_workers=2)) == expected
    names = [shard.path.rsplit("/", 1)[-1] for shard in read_manifest(local).shards("train")]
    assert shard_gets(first_epoch) == Counter(names)  # once each, although both workers read every window
    assert ranged_shards(first_epoch) == first_window(local)  # the first batch: by range, while cached
    shards = read_manifest(local).shards("train")
    assert cache_files(cache) == {f"{s.sha256}.parquet": s.bytes for s in shards}  # no .part, no lock file
    with s3_server.recording() as second_epoch:
        dataset = make(remote, cache_dir=cache)
        dataset.set_epoch(1)
        again = batches(dataset.loader(num_workers=2))
    assert shard_gets(second_epoch) == {}
    local_second = make(local)
    local_second.set_epoch(1)
    assert again == batches(local_second.loader())
    # resume mid-epoch from the cache, in another worker count
    loader = make(remote, cache_dir=cache).loader(num_workers=2)
    head = []
    for batch in loader:
        head.append(tuple(batch["input_ids"].flatten().tolist()))
        if len(head) == 7:
            break
    resumed = make(remote, cache_dir=cache).loader(num_workers=1)
    resumed.load_state_dict(loader.state_dict())
    assert head + batches(resumed) == expected


@pytest.mark.parametrize("workers", [0, 2])
def test_an_epoch_ends_after_its_downloads_into_the_cache(
    s3_server, local, remote, tmp_path, monkeypatch, workers
):
    """A shard read by range for the first batch is fetched whole in the background; with the first such
    download held 1 s, the epoch still ends with every shard in the cache (a worker exiting at once would
    drop it; a main process would leave it unfinished)."""
    cache, expected = tmp_path / "cache", batches(make(local).loader())
    shards = read_manifest(local).shards("train")
    complete = ShardReader._complete

    def held_once(reader: ShardReader, index: int, decoded) -> None:
        if not getattr(reader, "held", False):
            reader.held = True
            time.sleep(1)
        complete(reader, index, decoded)

    monkeypatch.setattr(ShardReader, "_complete", held_once)  # forked workers inherit it
    with s3_server.recording(ranges=True) as requests:
        assert batches(make(remote, cache_dir=cache).loader(num_workers=workers)) == expected
        assert cache_files(cache) == {f"{s.sha256}.parquet": s.bytes for s in shards}
    assert shard_gets(requests) == Counter(shard.path.rsplit("/", 1)[-1] for shard in shards)


def test_without_a_cache_each_process_reads_for_itself(s3_server, local, remote):
    with s3_server.recording(ranges=True) as requests:
        assert batches(make(remote).loader(num_workers=0)) == batches(make(local).loader())
    assert set(shard_gets(requests).values()) == {1}
    assert ranged_shards(requests) == first_window(local)


def test_least_recently_used_shards_go_beyond_the_limit(s3_server, local, remote, tmp_path):
    shards = read_manifest(local).shards("train")
    limit = int(1.5 * max(s.bytes for s in shards))
    cache = tmp_path / "cache"
    with s3_server.recording() as requests:
        for epoch in (0, 1):
            dataset = make(remote, cache_dir=cache, cache_limit=limit)
            dataset.set_epoch(epoch)
            reference = make(local)
            reference.set_epoch(epoch)
            assert batches(dataset.loader()) == batches(reference.loader())
            assert sum(cache_files(cache).values()) <= limit
    assert sum(shard_gets(requests).values()) > len(shards)  # evicted shards came back from the server
    newest = max(cache.iterdir(), key=lambda path: path.stat().st_mtime_ns)
    assert (
        newest.read_bytes() and hashlib.sha256(newest.read_bytes()).hexdigest() == newest.name.split(".")[0]
    )


def test_storage_options_reach_the_filesystem(s3_server, remote, tmp_path):
    with pytest.raises(LoaderError, match="manifest.json: cannot be read"):
        StreamingDataset(remote, storage_options={"endpoint_url": "http://127.0.0.1:9", "connect_timeout": 1})
    dataset = StreamingDataset(
        remote, storage_options={"endpoint_url": s3_server.endpoint}, cache_dir=tmp_path
    )
    assert len(list(dataset)) == sum(SIZES)


def test_botocore_reads_unless_an_option_is_s3fs_only(s3_server, local, remote):
    """The loaders read s3:// through one botocore client; an option only s3fs takes sends them to s3fs."""
    options = {"endpoint_url": s3_server.endpoint, "config_kwargs": {"retries": {"max_attempts": 2}}}
    assert s3.client(options) is s3.client(options) is not None  # one client, the options left as given
    assert options["config_kwargs"] == {"retries": {"max_attempts": 2}}
    assert s3.client({"default_block_size": 2**20}) is None and not s3.plain(remote + "/x?versionId=1")
    expected = batches(make(local).loader())
    for options in ({}, {"default_block_size": 2**20}):
        with s3_server.recording(ranges=True) as requests:
            assert batches(make(remote, storage_options=options).loader()) == expected
        assert set(shard_gets(requests).values()) == {1} and ranged_shards(requests) == first_window(local)
    missing = remote.rsplit("/", 1)[0] + "/nothing"
    with pytest.raises(LoaderError, match=r"^s3://\S+/nothing/manifest\.json: not found$"):
        make(missing)


def test_keys_with_a_double_slash_or_a_hash_are_read_as_the_builders_wrote_them(s3_server, local):
    """s3fs writes ``s3://b//x`` under the key ``/x`` and keeps ``#`` in a key. Before, the loaders' client
    read ``s3://b//x`` as ``s3://b/x`` (another dataset there was served without a word) and cut ``h#x`` at
    the ``#``."""
    bucket = s3_server.bucket()
    expected = batches(make(local).loader())
    for url in (f"s3://{bucket}//twice", f"s3://{bucket}/h#sh"):
        s3_server.client().put(str(local), url, recursive=True)
        assert batches(make(url).loader()) == expected
    other = make_dataset(local.parent / "other", [3, 4], first_index=500)
    s3_server.client().put(str(other), f"s3://{bucket}/twice", recursive=True)  # what the // was read as
    assert batches(make(f"s3://{bucket}//twice").loader()) == expected


def test_cache_sizes_and_a_corrupt_download(local, tmp_path):
    assert [parse_size(v) for v in (None, 0, 1500, "2kB", "1.5 MiB", "3GB")] == [
        None,
        0,
        1500,
        2000,
        1572864,
        3 * 10**9,
    ]
    with pytest.raises(LoaderError, match="cache_limit 'lots'"):
        parse_size("lots")
    info = read_manifest(local).shards("train")[0]
    cache = ShardCache(tmp_path / "cache")
    with pytest.raises(LoaderError, match="x.parquet: sha256 .* does not match"):
        cache.read(info, "x.parquet", lambda: b"not the shard")
    assert cache_files(tmp_path / "cache") == {}  # nothing kept, not even the partial download
    data, verified = cache.read(info, "x.parquet", (local / info.path).read_bytes)
    assert verified and data == (local / info.path).read_bytes()


def test_a_cache_folder_shared_with_other_files_loses_none_of_them(local, tmp_path):
    """Before, eviction took the least recently used files of the folder, whoever wrote them: a user's
    file older than the shards was deleted first (and a partial download's name, any ``*.part``)."""
    import os

    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    blob = "ab" * 32  # named by a bare sha256: a Hugging Face blob
    theirs = [
        cache_dir / "notes.txt",
        cache_dir / "draft.part",
        cache_dir / "sub" / "kept.bin",
        cache_dir / blob,
    ]
    for path in theirs:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"theirs\n" * 1000)
        os.utime(path, (time.time() - 3600,) * 2)  # older than any shard: evicted first, before
    infos = read_manifest(local).shards("train")
    cache = ShardCache(cache_dir, limit=max(info.bytes for info in infos))
    for info in infos:
        cache.read(info, info.path, (local / info.path).read_bytes)
    assert all(path.read_bytes() == b"theirs\n" * 1000 for path in theirs)
    last = infos[-1].sha256 + ".parquet"  # the limit holds the last shard alone
    assert sorted(cache_files(cache_dir)) == sorted([path.name for path in theirs[:2]] + ["sub", last, *[
        path.name for path in theirs[3:]]])  # fmt: skip
    # the cache's own names keep whatever suffixes a shard's path has (C4's ".00000-of-01024.json.gz")
    from ltsgen.loaders.contract import ShardInfo

    for number in range(3):
        data = bytes([number]) * 1000
        info = ShardInfo(
            f"en/c4-train.0000{number}-of-01024.json.gz", 1, 1, 1000, hashlib.sha256(data).hexdigest()
        )
        ShardCache(cache_dir, limit=1500).read(info, f"gs://b/{info.path}", lambda data=data: data)
    assert [name for name in cache_files(cache_dir) if name.endswith(".json.gz")] == [
        hashlib.sha256(bytes([2]) * 1000).hexdigest() + ".00002-of-01024.json.gz"
    ]
    # a shard path without an extension is cached with one, so that it counts and goes as the others
    for number in range(3):
        data = bytes([10 + number]) * 1000
        info = ShardInfo(f"train/part-{number}", 1, 1, 1000, hashlib.sha256(data).hexdigest())
        ShardCache(cache_dir, limit=1500).read(info, f"gs://b/{info.path}", lambda data=data: data)
    assert [name for name in cache_files(cache_dir) if name.endswith(".shard")] == [
        hashlib.sha256(bytes([12]) * 1000).hexdigest() + ".shard"
    ]
    assert (cache_dir / blob).exists()


def _cached_process(url: str, cache: Path, out: Path) -> multiprocessing.Process:
    """A reader of ``url`` through ``cache`` (``loader_procs.cached``), ``forked`` from this process."""
    out.mkdir()
    return forked(cached, url, str(cache), str(out))


def _wait_ready(outs: list[Path], processes: list[multiprocessing.Process]) -> None:
    deadline = time.monotonic() + 120
    while not all((out / "ready").exists() for out in outs):
        assert all(p.is_alive() for p in processes), "a reader ended before it was ready (see its stderr)"
        assert time.monotonic() < deadline
        time.sleep(0.02)


@pytest.fixture(scope="module")
def large_remote(s3_server, tmp_path_factory) -> tuple[str, Path]:
    """Fewer, larger shards (~1.5 MB each), so that downloads take long enough to overlap and be killed."""
    lengths = np.full(4 * 150, 2500)
    local = make_dataset(tmp_path_factory.mktemp("large"), [150] * 4, "parquet", lengths=lengths)
    bucket = s3_server.bucket()
    s3_server.client().put(str(local), f"{bucket}/data", recursive=True)
    return f"s3://{bucket}/data", local


def test_two_processes_fetching_the_same_shards_at_once(s3_server, large_remote, tmp_path):
    url, local = large_remote
    cache = tmp_path / "cache"
    outs = [tmp_path / "a", tmp_path / "b"]
    with s3_server.recording() as requests:
        processes = [_cached_process(url, cache, out) for out in outs]
        try:
            _wait_ready(outs, processes)
            for out in outs:
                (out / "go").touch()
        finally:
            join_all(processes, timeout=180)
    expected = [record["id"] for record in StreamingDataset(local, shuffle=False, columns=["id"])]
    assert [json.loads((out / "ids.json").read_text()) for out in outs] == [expected, expected]
    assert set(shard_gets(requests).values()) == {1} and len(shard_gets(requests)) == 4
    assert sorted(cache_files(cache)) == sorted(
        f"{s.sha256}.parquet" for s in read_manifest(local).shards("train")
    )


def test_kill_9_mid_download_leaves_nothing_to_clean(s3_server, large_remote, tmp_path):
    url, local = large_remote
    cache = tmp_path / "cache"
    rng = random.Random(0)
    for attempt in range(2):
        out = tmp_path / f"killed{attempt}"
        process = _cached_process(url, cache, out)
        try:
            _wait_ready([out], [process])
            (out / "go").touch()
            time.sleep(rng.uniform(0.02, 0.4))
        finally:
            kill_forked(process)
        for path in cache.glob("*.parquet"):  # whatever carries a final name is whole and verified
            assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name.split(".")[0]
    expected = [record["id"] for record in StreamingDataset(local, shuffle=False, columns=["id"])]
    assert [
        record["id"] for record in StreamingDataset(url, shuffle=False, columns=["id"], cache_dir=cache)
    ] == expected
    assert not [path for path in cache.iterdir() if path.name.endswith(PART_SUFFIX)]
    assert sorted(cache_files(cache)) == sorted(
        f"{s.sha256}.parquet" for s in read_manifest(local).shards("train")
    )


def test_a_cached_shard_changed_in_place_at_the_same_size_is_downloaded_again(
    s3_server, local, remote, tmp_path
):
    expected = batches(make(local).loader())
    cache = tmp_path / "cache"
    assert batches(make(remote, cache_dir=cache).loader()) == expected
    shard = read_manifest(local).shards("train")[2]
    copy = cache / f"{shard.sha256}.parquet"
    changed = bytearray(copy.read_bytes())
    changed[len(changed) // 2] ^= 0xFF  # a byte of a row group's pages: the size stays the same
    copy.write_bytes(bytes(changed))
    with s3_server.recording() as requests:
        assert batches(make(remote, cache_dir=cache).loader(num_workers=2)) == expected
    assert shard_gets(requests) == {shard.path.rsplit("/", 1)[-1]: 1}  # that shard alone, once
    assert hashlib.sha256(copy.read_bytes()).hexdigest() == shard.sha256
    # verify=False trusts the cache folder as it trusts the dataset: the copy is served as it is
    copy.write_bytes(bytes(changed))
    data, verified = ShardCache(cache).read(shard, "x.parquet", lambda: b"", verify=False)
    assert data == bytes(changed) and not verified


def _read_only_child(url: str, root: Path, caches: list[Path]) -> list[str]:
    """Read every record of ``url`` through each of ``caches`` in a child process that sees ``root`` (which
    holds them) mounted read-only (a user namespace): the record count or the one-line error of each."""
    code = (
        "import sys\n"
        "from ltsgen.errors import LtsgenError\n"
        "from ltsgen.loaders import StreamingDataset\n"
        "for cache in sys.argv[2:]:\n"
        "    try:\n"
        "        print(len(list(StreamingDataset(sys.argv[1], shuffle=False, columns=['id'], cache_dir=cache))))\n"
        "    except LtsgenError as error:\n"
        "        print(f'error: {error}')\n"
    )
    mount = 'mount --bind -o ro "$0" "$0" && exec "$@"'
    args = [
        "unshare",
        "-rm",
        "sh",
        "-c",
        mount,
        str(root),
        sys.executable,
        "-c",
        code,
        url,
        *map(str, caches),
    ]
    run = subprocess.run(args, env=subprocess_env(), capture_output=True, text=True, timeout=120)
    if run.returncode and "mount" in run.stderr:
        pytest.skip(f"no read-only mount here ({run.stderr.strip()[-200:]})")
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout.strip().splitlines()


def test_a_local_dataset_is_read_in_place_whatever_cache_dir_says(local, tmp_path):
    """Before: copied shard by shard into the cache (and failing there on a full disk)."""
    assert len(list(make(str(local), cache_dir=tmp_path / "cache"))) > 0
    assert len(list(make(f"file://{local}", cache_dir=tmp_path / "cache"))) > 0
    assert not (tmp_path / "cache").exists()


def test_a_full_or_read_only_cache_dir_is_one_line_naming_it(s3_server, local, remote, tmp_path):
    shards = read_manifest(local).shards("train")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (5000, hard))  # a full disk: no shard fits
    try:
        assert min(s.bytes for s in shards) > 5000
        with pytest.raises(StorageError) as caught:
            list(make(remote, cache_dir=tmp_path / "full"))
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    error = str(caught.value)  # the .part written, not the final name (before), which was never created
    assert (
        error.startswith(f"cache_dir: {tmp_path / 'full'}/")
        and ".part cannot be written (File too large)" in error
    )
    # partial downloads of the other threads are taken over or removed by the next process, as after a kill
    assert len(list(make(remote, cache_dir=tmp_path / "full"))) > 0
    assert not list((tmp_path / "full").glob("*.part"))
    (tmp_path / "a-file").write_text("not a folder")
    with pytest.raises(StorageError) as caught:
        list(make(remote, cache_dir=tmp_path / "a-file" / "cache"))
    assert str(caught.value) == (
        f"cache_dir: {tmp_path / 'a-file' / 'cache'} cannot be created (Not a directory): free space, "
        "or give a writable cache_dir"
    )
    # read-only: a cache filled before is read (a hit writes nothing); a shard missing from it is one line
    root = tmp_path / "mounted"
    for name in ("whole", "partial"):
        assert len(list(make(remote, cache_dir=root / name))) > 0
    missing = root / "partial" / f"{shards[0].sha256}.parquet"
    missing.unlink()
    stamps = {path: path.stat().st_mtime_ns for path in root.rglob("*")}
    counted, refused = _read_only_child(remote, root, [root / "whole", root / "partial"])
    assert counted == str(sum(SIZES))
    assert refused.startswith(f"error: cache_dir: {missing}.part cannot be written (Read-only file system)")
    assert {path: path.stat().st_mtime_ns for path in root.rglob("*")} == stamps
