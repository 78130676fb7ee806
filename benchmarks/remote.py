"""Beyond one machine, measured on one: the Ray engine and object storage against their local counterparts.

Each measurement is one function below; ``--only NAME`` runs one of them. Contestants run side by side
in ``--rounds`` round-robin rounds (shared machines are noisy) and the tables give medians. Every build is
a fresh ``ltsgen`` process, as a user runs it, so the wall times include start-up (and, for Ray, starting
a local Ray runtime); the job-phase rates (what the build prints as "shards written at N words/s") leave
start-up, statistics and card out.

- ``ray_build``:    ``ltsgen stories`` with ``--engine ray --workers 2`` (a local Ray runtime on this
                    machine) against ``--workers 2`` (the local process pool), same arguments, both writing
                    to a local folder; plus Ray's fixed cost alone (``ray.init(num_cpus=2)``, one trivial
                    task, ``ray.shutdown()``).
- ``ray_buckets``:  ``ltsgen buckets`` (C4 sample) the same way: both passes on Ray against the local pool.
- ``s3_build``:     ``ltsgen stories --workers 2`` into ``s3://`` on the local S3-compatible server (moto,
                    127.0.0.1) against the same build into a local folder: the cost of publishing every
                    shard, journal line and lease through an object store.

The S3 server is the one the tests use (``tests/s3_server.py``), in its own process.

Usage: python benchmarks/remote.py [--rounds 3] [--stories 3000] [--only ray_build]
"""

from __future__ import annotations

import argparse
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

REPO = Path(__file__).resolve().parents[1]
LTSGEN = str(Path(sys.executable).parent / "ltsgen")
C4 = REPO / "tests" / "fixtures" / "c4_en" / "c4-train.00000-of-01024.first400.json.gz"
RATE = re.compile(r"shards written at ([\d,]+) words/s")

sys.path.insert(0, str(REPO / "tests"))
from s3_server import S3Server  # noqa: E402


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


MEASUREMENTS = {"ray_build": ray_build, "ray_buckets": ray_buckets, "s3_build": s3_build}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stories", type=int, default=3000, help="stories per build")
    parser.add_argument("--only", choices=sorted(MEASUREMENTS), help="run one measurement")
    args = parser.parse_args()
    for name, measure in MEASUREMENTS.items():
        if args.only in (None, name):
            measure(args)


if __name__ == "__main__":
    main()
