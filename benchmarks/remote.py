"""Remote datasets against a local S3-compatible server (moto's standalone server on 127.0.0.1), in one run.

Loaders section: the documents of ``benchmarks/loaders.py`` (written once as ltsgen parquet shards and as
MosaicML MDS shards) are uploaded to one bucket, then shuffled, packed into [8, seq_len + 1] int64 blocks
and read through a torch DataLoader from ``s3://`` by

- ltsgen cache     ``StreamingDataset(url, seq_len=..., cache_dir=...)``: the node-local shard cache
- ltsgen no cache  ``StreamingDataset(url, seq_len=...)``: every process reads its shards, every epoch
- MosaicML         ``streaming.StreamingDataset(remote=url, local=...)``, its remote mode with its own cache

Each (system, workers) runs in a fresh process with a fresh cache, and reports the first batch (cold:
construction and the first downloads included, imports excluded), the tokens/s of the first epoch (cold)
and the median of the later ones (warm), and the GET requests the server received for shards.

    python benchmarks/remote.py [--docs 20000] [--shards 8] [--epochs 3] [--workers 0,2]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SYSTEMS = ("ltsgen-cache", "ltsgen-nocache", "mosaicml")


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


local_bench = _module("loader_benchmark", HERE / "loaders.py")


# ---------------------------------------------------------------------------- one system in one process


def run_loader(system: str, url: str, workers: int, epochs: int, seq_len: int, scratch: Path) -> dict:
    """First batch and per-epoch tokens/s of one system reading ``url`` (``scratch``: its fresh cache)."""
    import torch

    torch.set_num_threads(1)
    block = seq_len + 1
    if system.startswith("ltsgen"):
        import pyarrow.parquet  # noqa: F401

        from ltsgen.loaders import StreamingDataset
    else:
        mosaic = local_bench.import_mosaic()
        mosaic.util.clean_stale_shared_memory()
    gc.collect()
    begin = time.perf_counter()
    if system.startswith("ltsgen"):
        cache = {"cache_dir": scratch} if system == "ltsgen-cache" else {}
        dataset = StreamingDataset(url, seq_len=seq_len, batch_size=local_bench.BATCH, seed=0, **cache)
        loader = dataset.loader(num_workers=workers)

        def epoch_batches(epoch):
            dataset.set_epoch(epoch)
            return (batch["input_ids"] for batch in loader)

    else:
        remote = mosaic.StreamingDataset(
            remote=url, local=str(scratch), shuffle=True, batch_size=local_bench.BATCH
        )

        def epoch_batches(epoch):
            wrapped = local_bench.packed(lambda: (sample["input_ids"] for sample in remote), block)
            return torch.utils.data.DataLoader(
                wrapped, batch_size=local_bench.BATCH, num_workers=workers, drop_last=True
            )

    return local_bench.time_epochs(epoch_batches, epochs, block, begin)


# ---------------------------------------------------------------------------- driver


def upload(server, directory: Path) -> dict[str, str]:
    """The parquet and MDS shards in one bucket; system -> URL."""
    bucket = server.bucket()
    client = server.client()
    client.put(str(directory / "parquet"), f"{bucket}/ltsgen", recursive=True)
    urls = {"ltsgen-cache": f"s3://{bucket}/ltsgen", "ltsgen-nocache": f"s3://{bucket}/ltsgen"}
    if (directory / "mds").is_dir():
        client.put(str(directory / "mds"), f"{bucket}/mds", recursive=True)
        urls["mosaicml"] = f"s3://{bucket}/mds"
    return urls


def loaders_section(server, args: argparse.Namespace, root: Path) -> None:
    kind = "lts"
    write = ["--write", str(root), kind, str(args.docs), str(args.shards)]
    subprocess.run([sys.executable, str(HERE / "loaders.py"), *write], check=True)
    directory = local_bench.data_dir(root, kind, args.docs, args.shards)
    urls = upload(server, directory)
    env = dict(os.environ, **server.env, S3_ENDPOINT_URL=server.endpoint, OMP_NUM_THREADS="1")
    rows = []
    for system in SYSTEMS:
        for workers in [int(w) for w in args.workers.split(",")]:
            row = {"system": system, "workers": workers}
            if system not in urls:
                row["why"] = "not installed (make bench-peers)"
                rows.append(row)
                continue
            with (
                tempfile.TemporaryDirectory(prefix="ltsgen-remote-") as scratch,
                server.recording() as requests,
            ):
                command = [
                    sys.executable,
                    __file__,
                    "--epochs",
                    str(args.epochs),
                    "--seq-len",
                    str(args.seq_len),
                ]
                command += ["--run", system, urls[system], str(workers), scratch]
                done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
            if done.returncode == 0:
                row.update(json.loads(done.stdout.strip().splitlines()[-1]))
                row["gets"] = sum(1 for method, path in requests if method == "GET" and "/shard" in path)
            else:
                row["why"] = "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:120]
            rows.append(row)
    print(
        f"\n## Loaders from s3:// (moto on 127.0.0.1): {kind}, {args.docs:,} documents in {args.shards} shards; "
        f"[{local_bench.BATCH}, {args.seq_len + 1}] blocks; {args.epochs} epochs\n"
    )
    print(
        "| system | workers | first batch (cold) | epoch 1, M tokens/s | later epochs, M tokens/s | shard GETs |"
    )
    print("|---|---|---|---|---|---|")
    for row in rows:
        if "why" in row:
            print(f"| {row['system']} | {row['workers']} | {row['why']} | | | |")
            continue
        later = statistics.median(row["rates"][1:]) if len(row["rates"]) > 1 else float("nan")
        print(
            f"| {row['system']} | {row['workers']} | {row['first_batch_s']:.3f} s | {row['rates'][0] / 1e6:.2f} | "
            f"{later / 1e6:.2f} | {row['gets']} |"
        )
    for workers in sorted({row["workers"] for row in rows}):
        ran = {r["system"]: r for r in rows if r["workers"] == workers and "why" not in r}
        if "ltsgen-cache" in ran and "mosaicml" in ran:
            ours, theirs = ran["ltsgen-cache"], ran["mosaicml"]
            print(
                f"\nworkers={workers}: ltsgen with its cache {ours['rates'][0] / theirs['rates'][0]:.1f}x MosaicML's "
                f"tokens/s in the first epoch, {statistics.median(ours['rates'][1:]) / statistics.median(theirs['rates'][1:]):.1f}x "
                f"later; first batch {ours['first_batch_s']:.3f} s against {theirs['first_batch_s']:.3f} s"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--workers", default="0,2")
    parser.add_argument("--data", type=Path, help="where to keep the generated data (default: a temp dir)")
    parser.add_argument(
        "--run", nargs=4, metavar=("SYSTEM", "URL", "WORKERS", "SCRATCH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.run:
        system, url, workers, scratch = args.run
        print(json.dumps(run_loader(system, url, int(workers), args.epochs, args.seq_len, Path(scratch))))
        return
    sys.path.insert(0, str(HERE.parent / "tests"))
    from s3_server import S3Server

    server = S3Server.start()
    try:
        loaders_section(server, args, args.data or Path(tempfile.mkdtemp(prefix="ltsgen-bench-remote-")))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
