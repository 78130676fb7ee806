"""Training speed per position encoding, as a ratio to NoPE, measured side by side in one run.

Builds a small LongTinyStories set with the built-in engine (once, in a temporary folder), trains a
tokenizer, then runs `ltsgen.training.train` for every encoding with the same model, data and batch and
prints the median training tokens/s (data loading and on-the-fly tokenization included) and its ratio
to NoPE. Machines are noisy: the ratio, measured in one run, is the number to quote.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/training.py [--length 128] [--steps 60] [--repeats 2] [--device auto]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
from pathlib import Path

import torch

from ltsgen.cli import main as ltsgen
from ltsgen.encodings import NAMES
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import TrainConfig, train
from ltsgen.training.distributed import resolve_device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=128, help="training length (default 128)")
    parser.add_argument("--steps", type=int, default=60, help="steps per encoding (default 60)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--n-layers", type=int, default=4)
    parser.add_argument("--n-heads", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=2048)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--encodings", default=",".join(NAMES))
    parser.add_argument("--repeats", type=int, default=2, help="interleaved rounds per encoding (default 2)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="ltsgen-bench-train-") as tmp:
        data = Path(tmp) / "lts"
        ltsgen(["stories", "--out", str(data), "--num-stories", "400", "--min-words", "200",
                "--max-words", "3000", "--no-progress"])  # fmt: skip
        speeds: dict[str, list[float]] = {}
        tokenizer = None
        for repeat in range(args.repeats):  # rounds interleave the encodings, so load changes hit all alike
            for encoding in args.encodings.split(","):
                out = Path(tmp) / "runs" / f"{encoding}-{repeat}"
                config = TrainConfig(
                    data=str(data), out=str(out), encoding=encoding, train_length=args.length, steps=args.steps,
                    batch_size=args.batch_size, d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
                    vocab_size=args.vocab_size, device=args.device, log_every=5, tokenizer=tokenizer,
                )  # fmt: skip
                speed = train(config, progress=False, train_tokenizer=train_tokenizer)["tokens_per_s"]
                tokenizer = tokenizer or str(out / "tokenizer.json")
                speeds.setdefault(encoding, []).append(speed)
                print(f"round {repeat + 1}: {encoding:>13} {speed:>9,.0f} tokens/s", flush=True)
    median = {encoding: statistics.median(values) for encoding, values in speeds.items()}
    device = resolve_device(args.device)
    print(
        f"\ntraining tokens/s (median of {args.repeats} interleaved rounds), length {args.length}, batch {args.batch_size}, d_model {args.d_model}, "
        f"{args.n_layers} layers, {args.n_heads} heads, vocab {args.vocab_size}; {device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), {platform.machine()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )
    print("| encoding | tokens/s | vs NoPE |\n|---|---|---|")
    base = median.get("nope") or next(iter(median.values()))
    for encoding, speed in median.items():
        print(f"| {encoding} | {speed:,.0f} | {speed / base:.2f} |")


if __name__ == "__main__":
    main()
