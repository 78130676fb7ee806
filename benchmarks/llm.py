"""LLM story throughput: ``ltsgen stories --backend openai`` against the loop a user would write.

The server is the scripted OpenAI-compatible server of the tests, in its own process, answering each request
after ``--latency`` seconds (a stand-in for a model server that serves requests in parallel, as vLLM or
OpenAI do). Every contestant sends the same requests, side by side in ``--rounds`` rounds; the table gives
medians:

- peer:         a plain ``openai.OpenAI`` client in a sequential loop, one request after another (the exact
                requests ltsgen sent: the recipe's outline, chapter, continuation and summary prompts);
- ltsgen c=1:   ``ltsgen stories --backend openai --concurrency 1`` end to end (cache, shards, manifest, card);
- ltsgen c=N:   the same with ``--concurrency N``;
- ltsgen rebuild: the c=1 build made again into a new folder from its answer cache (no request sent).

Usage: python benchmarks/llm.py [--stories 48] [--latency 0.1] [--concurrency 16] [--rounds 3]

Acceptance of a real model: ``--acceptance URL=MODEL`` (repeatable, any OpenAI-compatible server) builds
``--stories`` stories of ``--min-words``-``--max-words`` words with each model and the default filters, and
prints per model the share of attempts the filters kept and the rejections by cause; the smallest model
whose stories mostly pass is the one to use. ``make test-llm`` prints the same figures for SmolLM2-135M.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai

from ltsgen.cli import main

REPO = Path(__file__).resolve().parents[1]


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "support" / "openai_server.py"), "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
    )
    return server, server.stdout.readline().strip()


def ltsgen_build(url: str, work: Path, stories: int, concurrency: int, from_cache: bool = False) -> float:
    """Seconds of one build into ``work/out`` with its answers cached in ``work/cache``: from nothing, or
    (``from_cache``) into a new folder from the cache a build before filled (no request sent)."""
    shutil.rmtree(work / "out" if from_cache else work, ignore_errors=True)
    args = ["stories", "--backend", "openai", "--base-url", url, "--model", "scripted-model"]
    args += ["--out", str(work / "out"), "--cache-dir", str(work / "cache"), "--no-progress", "--seed", "1"]
    args += ["--num-stories", str(stories), "--min-words", "300", "--max-words", "3000"]
    args += ["--chapter-words", "400", "--max-tokens", "350", "--concurrency", str(concurrency)]
    args += ["--splits", "train=1.0", "--samples-per-shard", "8"]
    started = time.perf_counter()
    assert main(args) == 0
    return time.perf_counter() - started


def sequential_peer(url: str, requests: list[dict]) -> float:
    client = openai.OpenAI(base_url=url, api_key="none")
    started = time.perf_counter()
    for request in requests:
        client.chat.completions.create(**request)
    return time.perf_counter() - started


def acceptance(url: str, model: str, work: Path, args: argparse.Namespace) -> dict:
    """Build ``args.stories`` stories with ``model`` and the default filters; the manifest's filter counts."""
    from ltsgen.loaders.contract import read_manifest

    out = work / model.replace("/", "_")
    command = ["stories", "--backend", "openai", "--base-url", url, "--model", model, "--out", str(out)]
    cache = args.cache_dir or work / "cache"
    command += ["--cache-dir", str(cache), "--no-progress", "--seed", "1", "--splits", "train=1.0"]
    command += ["--num-stories", str(args.stories), "--min-words", str(args.min_words)]
    command += ["--max-words", str(args.max_words), "--chapter-words", str(args.chapter_words)]
    command += ["--max-tokens", str(args.max_tokens), "--max-attempts", str(args.max_attempts)]
    command += ["--concurrency", str(args.concurrency)]
    assert main(command) == 0
    return read_manifest(out).extra["llm"]["filters"]


def acceptance_table(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for target in args.acceptance:
            url, _, model = target.partition("=")
            filters = acceptance(url, model, Path(tmp), args)
            rows.append((model, filters))
    print(
        f"{args.stories} stories of {args.min_words}-{args.max_words} words, default filters, "
        f"up to {args.max_attempts} attempts per story\n"
    )
    print("| model | stories kept | attempts | kept / attempts | rejected attempts by cause |")
    print("|---|---:|---:|---:|---|")
    for model, filters in rows:
        causes = ", ".join(f"{n} {cause}" for cause, n in filters["rejected"].items() if n) or "none"
        share = filters["kept"] / max(filters["attempts"], 1)
        print(f"| {model} | {filters['kept']} | {filters['attempts']} | {share:.2f} | {causes} |")


def main_benchmark() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stories", type=int, default=48)
    parser.add_argument("--latency", type=float, default=0.1, help="seconds the server takes per answer")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--acceptance", action="append", metavar="URL=MODEL", help="measure a real model")
    parser.add_argument("--min-words", type=int, default=150)
    parser.add_argument("--max-words", type=int, default=300)
    parser.add_argument("--chapter-words", type=int, default=150)
    parser.add_argument("--max-tokens", type=int, default=400)
    parser.add_argument("--max-attempts", type=int, default=4)
    parser.add_argument(
        "--cache-dir",
        type=Path,
        default=None,
        help="with --acceptance: an answer cache kept across runs, so that a changed filter is measured again "
        "for free (the throughput table uses a cache of its own in a temporary folder)",
    )
    args = parser.parse_args()
    if args.acceptance:
        acceptance_table(args)
        return

    server, url = start_server(args.latency)
    times: dict[str, list[float]] = {}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for _ in range(args.rounds):
                for name, concurrency in (
                    ("ltsgen c=1", 1),
                    (f"ltsgen c={args.concurrency}", args.concurrency),
                ):
                    times.setdefault(name, []).append(
                        ltsgen_build(url, work / name, args.stories, concurrency)
                    )
                rerun = ltsgen_build(url, work / "ltsgen c=1", args.stories, 1, from_cache=True)
                times.setdefault("ltsgen rebuild (cache)", []).append(rerun)
                cache = work / "ltsgen c=1" / "cache"
                requests = [json.loads(p.read_text())["request"] for p in sorted(cache.glob("*/*.json"))]
                times.setdefault("peer: sequential openai loop", []).append(sequential_peer(url, requests))
            answers = [json.loads(p.read_text())["answer"] for p in sorted(cache.glob("*/*.json"))]
    finally:
        server.terminate()
        server.wait()

    tokens = sum(a["completion_tokens"] for a in answers)
    peer = statistics.median(times["peer: sequential openai loop"])
    print(f"{args.stories} stories, {len(answers)} requests, {tokens:,} completion tokens, ")
    print(f"server latency {args.latency}s per answer, median of {args.rounds} rounds\n")
    print("| system | seconds | requests/s | completion tokens/s | vs peer |")
    print("|---|---|---|---|---|")
    for name, values in times.items():
        seconds = statistics.median(values)
        sent = 0 if "cache" in name else len(answers)
        print(
            f"| {name} | {seconds:.2f} | {sent / seconds:,.1f} | {tokens * bool(sent) / seconds:,.0f} "
            f"| {peer / seconds:.2f}x |"
        )


if __name__ == "__main__":
    main_benchmark()
