"""Bucketing speed against its floor (the raw tokenizer) and the peer (a Hugging Face datasets pipeline).

One process, the same text for every contestant: the real C4, arXiv and code samples (C4 ``--copies`` times,
each copy marked so that no document is an exact duplicate), a byte-level BPE of 8,192 tokens trained on C4,
one tokenizer thread per process. The contestants run side by side in ``--rounds`` round-robin rounds (shared
machines are noisy); the table gives each one's median:

- raw:       ``Tokenizer.encode_batch`` (and ``encode_batch_fast``, which skips character offsets) over
             every text held in memory, in batches of 1,000 documents (no reading, no writing);
- ltsgen:    ``ltsgen buckets`` end to end (read jsonl, clean, dedup, tokenize, bucket, write parquet
             shards and the manifest; no data card), with 1 and 2 workers;
- datasets:  ``load_dataset("json")`` + ``map(tokenize, batched=True)`` + one ``filter`` per bucket +
             ``to_parquet`` per bucket, the straightforward way to do it with Hugging Face datasets.

The samples are read from ``--data-dir`` or ``$LTSGEN_DATA_DIR`` (folders ``c4_en/*.json.gz``,
``arxiv_redpajama/*.jsonl``, ``code_debian_standin/*.jsonl.gz``: 800 C4 documents, 20 papers and 740 code
files in the measurements the docs quote); without them it says so and runs on the smaller test fixtures.

Usage: python benchmarks/buckets.py [--copies 1] [--rounds 3] [--data-dir DIR]
"""

from __future__ import annotations

import os

os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one core per process for every contestant

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

LENGTHS = [512, 1024, 2048, 4096, 8192, 16384, 32768]
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"


def samples_dir(given: Path | None) -> Path:
    """The folder of real samples: ``given``, else ``$LTSGEN_DATA_DIR``, else the test fixtures (saying so)."""
    folder = given or (Path(os.environ["LTSGEN_DATA_DIR"]) if os.environ.get("LTSGEN_DATA_DIR") else None)
    if folder is not None and folder.is_dir():
        return folder
    print(f"larger samples not found ({folder or 'no --data-dir or LTSGEN_DATA_DIR'}): using {FIXTURES}")
    return FIXTURES


def sample_texts(data: Path, copies: int) -> tuple[list[dict], int]:
    """The benchmark's rows (C4 copies first, then arXiv, then code) and the number of C4 documents."""

    def lines(path: Path) -> list[dict]:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as handle:
            return [json.loads(line) for line in handle]

    def one(pattern: str) -> Path:
        found = sorted(data.glob(pattern))
        if len(found) != 1:
            raise SystemExit(f"{data}: expected one file {pattern}, found {len(found)}")
        return found[0]

    c4 = lines(one("c4_en/*.json.gz"))
    rows = [{"text": f"[copy {n}] {r['text']}", "url": r["url"]} for n in range(copies) for r in c4]
    rows += [{"text": r["text"], "url": r["meta"]["url"]} for r in lines(one("arxiv_redpajama/*.jsonl"))]
    code = lines(one("code_debian_standin/*.jsonl.gz"))
    rows += [{"text": r["text"], "url": r["meta"]["file_name"]} for r in code]
    return rows, len(c4)


def timed(function) -> tuple[float, object]:
    started = time.perf_counter()
    result = function()
    return time.perf_counter() - started, result


def run_ltsgen(corpus: Path, tokenizer: Path, out: Path, workers: int) -> int:
    from ltsgen.corpora.pipeline import BucketConfig, build_buckets

    config = BucketConfig(
        source="c4", inputs=[str(corpus)], out=out, tokenizer=str(tokenizer), bucket_lengths=LENGTHS,
        eval_lengths=LENGTHS, eval_sequences=0,
    )  # fmt: skip
    result = build_buckets(config, workers=workers, progress=False, card=False)
    return result.tokens


def run_datasets(corpus: Path, tokenizer_path: Path, out: Path) -> int:
    import datasets
    from tokenizers import Tokenizer

    datasets.disable_progress_bars()
    tokenizer = Tokenizer.from_file(str(tokenizer_path))

    def tokenize(batch):
        ids = [e.ids for e in tokenizer.encode_batch(batch["text"], add_special_tokens=False)]
        return {"input_ids": ids, "num_tokens": [len(i) for i in ids]}

    table = datasets.load_dataset("json", data_files=str(corpus), split="train", cache_dir=str(out / "cache"))
    table = table.map(tokenize, batched=True, batch_size=1000)
    bounds = [0, *LENGTHS, 2**62]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        bucket = table.filter(
            lambda n, lo=lo, hi=hi: [lo <= x < hi for x in n], input_columns="num_tokens", batched=True
        )
        bucket.to_parquet(str(out / f"{lo}-{hi}.parquet"))
    return int(sum(table["num_tokens"]))


def raw(tokenizer, texts: list[str], fast: bool) -> int:
    encode = tokenizer.encode_batch_fast if fast else tokenizer.encode_batch
    tokens = 0
    for start in range(0, len(texts), 1000):
        tokens += sum(len(e.ids) for e in encode(texts[start : start + 1000], add_special_tokens=False))
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=1, help="copies of the C4 sample in the text")
    parser.add_argument("--rounds", type=int, default=3, help="round-robin rounds (the table gives medians)")
    parser.add_argument("--data-dir", type=Path, help="the folder of real samples (or $LTSGEN_DATA_DIR)")
    args = parser.parse_args()

    from ltsgen.tokenizer import train_tokenizer

    rows, c4_documents = sample_texts(samples_dir(args.data_dir), args.copies)
    texts = [r["text"] for r in rows]
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        corpus = scratch / "corpus.jsonl"
        corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        tokenizer = train_tokenizer(texts[:c4_documents], 8192)
        tokenizer_path = scratch / "tokenizer.json"
        tokenizer.save(str(tokenizer_path))
        megabytes = corpus.stat().st_size / 1e6
        print(
            f"text: {len(texts):,} documents, {sum(map(len, texts)) / 1e6:.1f}M characters ({megabytes:.1f} MB jsonl)"
        )
        contestants = {
            "raw Tokenizer.encode_batch": lambda: raw(tokenizer, texts, fast=False),
            "raw Tokenizer.encode_batch_fast": lambda: raw(tokenizer, texts, fast=True),
            "ltsgen buckets, 1 worker": lambda: run_ltsgen(corpus, tokenizer_path, scratch / "ltsgen", 1),
            "ltsgen buckets, 2 workers": lambda: run_ltsgen(corpus, tokenizer_path, scratch / "ltsgen", 2),
            "datasets map + filter + to_parquet": lambda: run_datasets(
                corpus, tokenizer_path, scratch / "datasets"
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in contestants}
        tokens = None
        for _ in range(args.rounds):
            for name, contestant in contestants.items():
                shutil.rmtree(scratch / "ltsgen", ignore_errors=True)
                shutil.rmtree(scratch / "datasets", ignore_errors=True)
                seconds, counted = timed(contestant)
                assert tokens is None or counted == tokens, (name, counted, tokens)
                tokens = counted
                times[name].append(seconds)

    median = {name: statistics.median(values) for name, values in times.items()}
    floor, peer = median["raw Tokenizer.encode_batch"], median["datasets map + filter + to_parquet"]
    print(f"{tokens:,} tokens; medians of {args.rounds} round-robin rounds\n")
    print("| pipeline | seconds | M tokens/s | vs raw encode_batch | vs datasets |")
    print("|---|---|---|---|---|")
    for name, seconds in median.items():
        print(
            f"| {name} | {seconds:.2f} | {tokens / seconds / 1e6:.2f} | {floor / seconds:.2f}x | {peer / seconds:.2f}x |"
        )


if __name__ == "__main__":
    main()
