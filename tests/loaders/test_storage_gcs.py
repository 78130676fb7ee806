"""gs:// end to end against a real GCS-compatible server on 127.0.0.1 (fake-gcs-server, started by the
tests; gcsfs as the client, through ``STORAGE_EMULATOR_HOST`` or the ``endpoint_url`` storage option): a
build equals the local build byte for byte, and the loader reads exactly the local samples."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from loader_fixtures import make_dataset
from remote_fixtures import SMALL, local_tree, remote_tree

from ltsgen.cli import main
from ltsgen.loaders import StreamingDataset
from ltsgen.loaders.contract import read_manifest

pytestmark = pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
SIZES = [11, 7, 13, 5]


def shard_digests(directory) -> list[tuple[str, str, int]]:
    return [(s.path, s.sha256, s.bytes) for split in read_manifest(directory).splits.values() for s in split]


def test_stories_on_gs_equal_the_local_build(gcs_server, small_reference, capsys):
    local = small_reference  # SMALL, built locally once for the session
    bucket = gcs_server.bucket()
    url = f"gs://{bucket}/lts"
    assert main(["stories", "--out", url, *SMALL]) == 0  # the server named by STORAGE_EMULATOR_HOST
    assert shard_digests(url) == shard_digests(local) and len(shard_digests(local)) == 10
    fs = gcs_server.client()
    assert remote_tree(fs, f"{bucket}/lts") == local_tree(local)  # shards, manifest, card, plot
    assert not fs.exists(f"{bucket}/lts/.ltsgen/lock")  # the lease is given back at the end
    capsys.readouterr()
    assert main(["stories", "--out", url, *SMALL]) == 0  # kept shards verified from their generations
    assert "nothing to do" in capsys.readouterr().out


def samples(dataset: StreamingDataset) -> list[tuple]:
    return [
        (r["id"], r["text"], r["input_ids"].tolist(), json.dumps(r["meta"], sort_keys=True)) for r in dataset
    ]


def packed(dataset: StreamingDataset, workers: int) -> list[list[int]]:
    return [batch["input_ids"].flatten().tolist() for batch in dataset.loader(num_workers=workers)]


def test_loader_over_gs_yields_exactly_the_local_samples(gcs_server, tmp_path, monkeypatch):
    lengths = np.random.default_rng(4).integers(20, 300, size=sum(SIZES))
    local = make_dataset(tmp_path / "local", SIZES, "parquet", lengths=lengths)
    bucket = gcs_server.bucket()
    gcs_server.client().put(f"{local}/", f"{bucket}/data/", recursive=True)
    url = f"gs://{bucket}/data"
    expected = samples(StreamingDataset(local, seed=2))
    assert len(expected) == sum(SIZES)
    assert samples(StreamingDataset(url, seed=2)) == expected
    # packed batches with 2 workers through the node-local cache, the server named by storage options alone
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens there
    options = {"endpoint_url": gcs_server.endpoint, "token": "anon"}
    common = {"seed": 2, "batch_size": 2, "seq_len": 23, "shuffle_window": 2}
    remote = StreamingDataset(url, storage_options=options, cache_dir=tmp_path / "cache", **common)
    reference = packed(StreamingDataset(local, **common), 0)
    assert packed(remote, 2) == reference and len(reference) > 10
    assert sorted(p.name.split(".")[0] for p in (tmp_path / "cache").iterdir()) == sorted(
        s.sha256 for s in read_manifest(local).shards("train")
    )


def test_a_large_shard_goes_up_resumably_and_reads_back_in_ranges(gcs_server):
    """Above 5 MiB gcsfs uploads through a resumable session (start, then the bytes); reads of a part of a
    file are ranged GETs."""
    from ltsgen.loaders.storage import Storage

    store = Storage(f"gs://{gcs_server.bucket()}/data")
    data = np.random.default_rng(0).integers(0, 256, size=6 * 2**20 + 12345, dtype=np.uint8).tobytes()
    with store.publish("train/shard-00000.parquet") as tmp:
        tmp.write_bytes(data)
    assert store.files() == {"train/shard-00000.parquet": len(data)}
    assert store.sha256("train/shard-00000.parquet") == hashlib.sha256(data).hexdigest()
    with store.open("train/shard-00000.parquet") as handle:
        handle.seek(5_000_000)
        assert handle.read(4096) == data[5_000_000:5_004_096]


def test_an_endpoint_in_fsspec_defaults_reaches_gcs(gcs_server, monkeypatch):
    """``train``, ``evaluate`` and ``compare`` hand ``--storage-options`` over as fsspec's defaults for the
    scheme: they apply although a filesystem of the scheme was made before them, and an ``endpoint_url``
    there is treated as an emulator's too (JSON API, no gRPC layout probe)."""
    import fsspec.config
    import gcsfs.core

    from ltsgen.loaders import storage as storage_module

    store = storage_module.Storage(f"gs://{gcs_server.bucket()}/defaults")
    store.write_bytes("before", b"")  # a filesystem made before the defaults are set
    monkeypatch.setitem(fsspec.config.conf, "gs", {"endpoint_url": gcs_server.endpoint, "token": "anon"})
    monkeypatch.delenv("STORAGE_EMULATOR_HOST")
    by_defaults = storage_module.filesystem(store.location())  # by the defaults alone
    assert type(by_defaults) is gcsfs.core.GCSFileSystem
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")  # nothing listens there
    store.write_bytes("x", b"through the defaults")
    assert type(store.fs) is gcsfs.core.GCSFileSystem and store.fs._endpoint == gcs_server.endpoint
    assert gcs_server.client().cat_file(store.location("x")[len("gs://") :]) == b"through the defaults"
