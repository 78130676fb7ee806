"""Beyond one machine, measured on one: the Ray engine, object storage and remote loading against their
local counterparts and peers, in one run.

Each measurement is one function below; ``--only NAME`` runs one of them. Every contestant runs in a fresh
process, as a user runs it; the S3 server is the one the tests use (``tests/support/s3_server.py``: moto's
standalone server on 127.0.0.1), in its own process.

Builds (``--rounds`` round-robin rounds, since shared machines are noisy; the tables give medians; wall
times include start-up and, for Ray, starting a local Ray runtime; the job-phase rates (what the build
prints as "shards written at N words/s") leave start-up, statistics and card out):

- ``ray_build``:    ``ltsgen stories`` with ``--engine ray --workers 2`` (a local Ray runtime on this
                    machine) against ``--workers 2`` (the local process pool), same arguments, both writing
                    to a local folder; plus Ray's fixed cost alone (``ray.init(num_cpus=2)``, one trivial
                    task, ``ray.shutdown()``).
- ``ray_buckets``:  ``ltsgen buckets`` (C4 sample) the same way: both passes on Ray against the local pool.
- ``s3_build``:     ``ltsgen stories --workers 2`` into ``s3://`` against the same build into a local
                    folder: the cost of publishing every shard, journal line and lease through an object
                    store.

Loaders (``loaders``): the documents of ``benchmarks/loaders.py`` (written once as ltsgen parquet shards
and as MosaicML MDS shards) are uploaded to one bucket, then shuffled, packed into [8, seq_len + 1] int64
blocks and read through a torch DataLoader from ``s3://`` by

- ltsgen cache     ``StreamingDataset(url, seq_len=..., cache_dir=...)``: the node-local shard cache
- ltsgen no cache  ``StreamingDataset(url, seq_len=...)``: every process reads its shards, every epoch
- MosaicML         ``streaming.StreamingDataset(remote=url, local=...)``, its remote mode with its own cache

Each (system, workers) runs in a fresh process with a fresh cache, once per round (``--rounds``, in
turns), and reports the first batch (cold: construction, the S3 client's import and the first downloads
included; the loader's own imports excluded), the tokens/s of the first epoch (cold) and the median of the
later ones (warm), and the GET requests the server received for shards; medians over the rounds, with the
load average over the run.

    python benchmarks/remote.py [--only NAME] [--rounds 3] [--stories 3000]
                                [--docs 20000] [--shards 8] [--epochs 3] [--workers 0,2]
                                [--systems ltsgen-cache,ltsgen-nocache,mosaicml]
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
LTSGEN = str(Path(sys.executable).parent / "ltsgen")
C4 = REPO / "tests" / "fixtures" / "c4_en" / "c4-train.00000-of-01024.first400.json.gz"
RATE = re.compile(r"shards written at ([\d,]+) words/s")
SYSTEMS = ("ltsgen-cache", "ltsgen-nocache", "mosaicml")

sys.path.insert(0, str(REPO / "tests" / "support"))
from s3_server import S3Server  # noqa: E402

# ------------------------------------------------------------------ builds: the Ray engine and object storage


def run_ltsgen(args: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Run one ``ltsgen`` command; return (wall seconds, job-phase words/s)."""
    started = time.perf_counter()
    result = subprocess.run([LTSGEN, *args], capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"ltsgen {' '.join(args)} failed:\n{result.stderr}")
    rate = RATE.search(result.stdout)
    return seconds, float(rate.group(1).replace(",", "")) if rate else float("nan")


def side_by_side(
    contestants: dict[str, Callable[[Path], tuple[float, float]]], rounds: int
) -> dict[str, tuple[float, float]]:
    """Each contestant once per round, in turn, into a fresh folder; median (seconds, rate) of each."""
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in contestants}
    with tempfile.TemporaryDirectory(prefix="ltsgen-remote-") as work:
        for round_ in range(rounds):
            for name, run in contestants.items():
                out = Path(work) / f"{name.replace(' ', '_')}-{round_}"
                times[name].append(run(out))
                shutil.rmtree(out, ignore_errors=True)
    return {
        name: (statistics.median(s for s, _ in values), statistics.median(r for _, r in values))
        for name, values in times.items()
    }


def print_table(title: str, results: dict[str, tuple[float, float]], reference: str) -> None:
    base_seconds, base_rate = results[reference]
    print(f"\n{title}")
    print(f"| contestant | wall s (median) | vs {reference} | job-phase words/s | vs {reference} |")
    print("|---|---|---|---|---|")
    for name, (seconds, rate) in results.items():
        print(
            f"| {name} | {seconds:.1f} | {seconds / base_seconds:.2f}x | {rate:,.0f} | {rate / base_rate:.2f}x |"
        )


def ray_start_seconds(rounds: int) -> float:
    """Median seconds of ``ray.init(num_cpus=2)`` + one trivial task + ``ray.shutdown()``, in a fresh process."""
    code = (
        "import time; t = time.perf_counter(); import ray; ray.init(num_cpus=2, include_dashboard=False, "
        "log_to_driver=False); ray.get(ray.remote(lambda: 1).remote()); ray.shutdown(); "
        "print(time.perf_counter() - t)"
    )
    return statistics.median(
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(rounds)
    )


def stories_args(stories: int) -> list[str]:
    return ["stories", "--num-stories", str(stories), "--min-words", "200", "--max-words", "3000"]


def ray_build(args: argparse.Namespace) -> None:
    common = [*stories_args(args.stories), "--samples-per-shard", "20", "--workers", "2", "--no-progress"]
    results = side_by_side(
        {
            "local engine, 2 workers": lambda out: run_ltsgen([*common, "--out", str(out)]),
            "ray engine, 2 workers": lambda out: run_ltsgen([*common, "--engine", "ray", "--out", str(out)]),
        },
        args.rounds,
    )
    print_table(
        f"ltsgen stories, {args.stories:,} stories of 200-3,000 words", results, "local engine, 2 workers"
    )
    print(
        f"\nRay's fixed cost on this machine (init, one task, shutdown): {ray_start_seconds(args.rounds):.1f} s"
    )


def ray_buckets(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="ltsgen-tok-") as work:
        tokenizer = Path(work) / "tok.json"
        train = [
            "tokenizer",
            "--source",
            "c4",
            "--input",
            str(C4),
            "--vocab-size",
            "2048",
            "--out",
            str(tokenizer),
        ]
        run_ltsgen(train)
        common = [
            "buckets",
            "--source",
            "c4",
            "--input",
            str(C4),
            "--tokenizer",
            str(tokenizer),
            "--workers",
            "2",
        ]
        common += [
            "--bucket-lengths",
            "128,256,512,1024",
            "--shard-tokens",
            "20000",
            "--no-progress",
            "--no-card",
        ]
        results = side_by_side(
            {
                "local engine, 2 workers": lambda out: run_ltsgen([*common, "--out", str(out)]),
                "ray engine, 2 workers": lambda out: run_ltsgen(
                    [*common, "--engine", "ray", "--out", str(out)]
                ),
            },
            args.rounds,
        )
    print_table("ltsgen buckets, the C4 test sample (400 documents)", results, "local engine, 2 workers")


def s3_build(args: argparse.Namespace) -> None:
    server = S3Server.start()
    env = {**os.environ, **server.env}
    bucket = server.bucket()
    common = [*stories_args(args.stories), "--samples-per-shard", "20", "--workers", "2", "--no-progress"]
    try:
        results = side_by_side(
            {
                "local folder": lambda out: run_ltsgen([*common, "--out", str(out)], env),
                "s3:// (moto on 127.0.0.1)": lambda out: run_ltsgen(
                    [*common, "--out", f"s3://{bucket}/{out.name}"], env
                ),
            },
            args.rounds,
        )
    finally:
        server.stop()
    print_table(f"ltsgen stories --workers 2, {args.stories:,} stories", results, "local folder")


# ------------------------------------------------------------------------------------- loaders from s3://


def _module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


local_bench = _module("loader_benchmark", HERE / "loaders.py")


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


def loaders(args: argparse.Namespace) -> None:
    server = S3Server.start()
    try:
        loaders_section(server, args, args.data or local_bench.temporary_folder("ltsgen-bench-remote-"))
    finally:
        server.stop()


def loaders_section(server, args: argparse.Namespace, root: Path) -> None:
    kind = "lts"
    write = ["--write", str(root), kind, str(args.docs), str(args.shards)]
    subprocess.run([sys.executable, str(HERE / "loaders.py"), *write], check=True)
    directory = local_bench.data_dir(root, kind, args.docs, args.shards)
    urls = upload(server, directory)
    env = dict(os.environ, **server.env, S3_ENDPOINT_URL=server.endpoint, OMP_NUM_THREADS="1")
    contestants = [
        (system, int(workers)) for system in args.systems.split(",") for workers in args.workers.split(",")
    ]
    runs: dict[tuple[str, int], list[dict]] = {contestant: [] for contestant in contestants}
    loads = [_load_average()]
    for _ in range(args.rounds):  # each contestant once per round, in turn
        for system, workers in contestants:
            if system not in urls:
                runs[system, workers].append({"why": "not installed (make bench-peers)"})
                continue
            runs[system, workers].append(run_remote_loader(server, system, urls[system], workers, args, env))
        loads.append(_load_average())
    print(
        f"\n## Loaders from s3:// (moto on 127.0.0.1): {kind}, {args.docs:,} documents in {args.shards} shards; "
        f"[{local_bench.BATCH}, {args.seq_len + 1}] blocks; {args.epochs} epochs; medians of {args.rounds} "
        f"rounds (load average {min(loads):.1f}-{max(loads):.1f})\n"
    )
    print(
        "| system | workers | first batch (cold) | first batch, each round | epoch 1, M tokens/s "
        "| later epochs, M tokens/s | shard GETs |"
    )
    print("|---|---|---|---|---|---|---|")
    rows = {}
    for (system, workers), results in runs.items():
        failed = [result["why"] for result in results if "why" in result]
        if failed:
            print(f"| {system} | {workers} | {failed[0]} | | | | |")
            continue
        row = rows[system, workers] = {
            "first": statistics.median(r["first_batch_s"] for r in results),
            "epoch1": statistics.median(r["rates"][0] for r in results),
            "later": statistics.median(rate for r in results for rate in r["rates"][1:])
            if args.epochs > 1
            else float("nan"),
            "gets": statistics.median(r["gets"] for r in results),
        }
        each = ", ".join(f"{r['first_batch_s']:.2f}" for r in results)
        print(
            f"| {system} | {workers} | {row['first']:.3f} s | {each} | {row['epoch1'] / 1e6:.2f} | "
            f"{row['later'] / 1e6:.2f} | {row['gets']:g} |"
        )
    if args.epochs > 1 and (note := local_bench.held_in_memory(args.shards)):
        print(f"\n{note}")
    for workers in sorted({workers for _, workers in rows}):
        if ("ltsgen-cache", workers) in rows and ("mosaicml", workers) in rows:
            ours, theirs = rows["ltsgen-cache", workers], rows["mosaicml", workers]
            print(
                f"\nworkers={workers}: ltsgen with its cache {ours['epoch1'] / theirs['epoch1']:.1f}x MosaicML's "
                f"tokens/s in the first epoch, {ours['later'] / theirs['later']:.1f}x later; first batch "
                f"{ours['first']:.3f} s against {theirs['first']:.3f} s ({ours['first'] / theirs['first']:.2f}x)"
            )


def run_remote_loader(server, system: str, url: str, workers: int, args: argparse.Namespace, env) -> dict:
    """One fresh process of ``system`` with ``workers`` and a fresh cache: its ``run_loader`` figures and the
    shard GETs the server received (or ``why`` it failed)."""
    with tempfile.TemporaryDirectory(prefix="ltsgen-remote-") as scratch, server.recording() as requests:
        command = [sys.executable, __file__, "--epochs", str(args.epochs), "--seq-len", str(args.seq_len)]
        command += ["--run", system, url, str(workers), scratch]
        done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if done.returncode != 0:
        return {"why": "failed: " + (done.stderr.strip().splitlines() or ["?"])[-1][:120]}
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["gets"] = sum(1 for method, path in requests if method == "GET" and "/shard" in path)
    return result


def _load_average() -> float:
    return os.getloadavg()[0]


MEASUREMENTS = {"ray_build": ray_build, "ray_buckets": ray_buckets, "s3_build": s3_build, "loaders": loaders}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", choices=sorted(MEASUREMENTS), help="run one measurement")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each contestant, in turns")
    parser.add_argument("--stories", type=int, default=3000, help="builds: stories per build")
    parser.add_argument("--docs", type=int, default=20000, help="loaders: documents")
    parser.add_argument("--shards", type=int, default=8, help="loaders: shards")
    parser.add_argument("--epochs", type=int, default=3, help="loaders: epochs")
    parser.add_argument("--seq-len", type=int, default=1024, help="loaders: block length")
    parser.add_argument("--workers", default="0,2", help="loaders: DataLoader worker counts")
    parser.add_argument(
        "--systems", default=",".join(SYSTEMS), help=f"loaders: which of {', '.join(SYSTEMS)}"
    )
    parser.add_argument(
        "--data", type=Path, help="loaders: where to keep the generated data (default: a temp dir)"
    )
    parser.add_argument(
        "--run", nargs=4, metavar=("SYSTEM", "URL", "WORKERS", "SCRATCH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.run:
        system, url, workers, scratch = args.run
        print(json.dumps(run_loader(system, url, int(workers), args.epochs, args.seq_len, Path(scratch))))
        return
    for name, measure in MEASUREMENTS.items():
        if args.only in (None, name):
            measure(args)


if __name__ == "__main__":
    main()
