"""Training speed per position encoding, as a ratio to NoPE, measured side by side in one run.

Builds a small LongTinyStories set with the built-in engine (once, in a temporary folder), trains a
tokenizer, then runs `ltsgen.training.train` for every encoding with the same model, data and batch and
prints the median training tokens/s (data loading and on-the-fly tokenization included) and its ratio
to NoPE. Machines are noisy: the ratio, measured in one run, is the number to quote.

``--plain-loop`` instead sets ``ltsgen train`` beside a plain PyTorch loop (``plain_loop``: the same model,
the same batches already in memory, AdamW, clipping, nothing else), interleaved round by round, for the
first of ``--encodings``, and prints the ratio of their tokens/s from CPU seconds per step (``--steps``
timed): what ltsgen's loop costs on top of the model's own work, data loading included (``--profile`` names
where it goes). It runs twice: on the stories' text, which the loader tokenizes as the stream reaches each
row group (during the timed steps), and on a copy with the tokenizer attached by ``ltsgen tokenizer
--data`` (stored token ids, as the plain loop's batches are made before its timed steps).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/training.py [--length 128] [--steps 60] [--repeats 2] [--device auto]
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/training.py --plain-loop --encodings rope --steps 20 [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import platform
import pstats
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import torch

from ltsgen.cli import main as ltsgen
from ltsgen.encodings import NAMES, EncodingError, canonical_name
from ltsgen.tokenizer import train_tokenizer
from ltsgen.training import TrainConfig, train
from ltsgen.training.data import TrainingBatches, read_tokenizer
from ltsgen.training.distributed import resolve_device
from ltsgen.training.train import build_model


def plain_loop(config: TrainConfig, tokenizer_path: str, timed_from: int) -> float:
    """CPU seconds per step, over the steps after ``timed_from``, of a bare loop: ``config``'s model, seeded
    alike, trained by AdamW with gradient clipping on the batches ``ltsgen train`` draws for ``config``, all
    read into memory before the loop."""
    device = resolve_device(config.device)
    tokenizer = read_tokenizer(Path(tokenizer_path))
    stream = iter(TrainingBatches(config.data, seq_len=config.train_length, batch_size=config.batch_size,
                                  seed=config.seed, tokenizer=tokenizer))  # fmt: skip
    batches = [next(stream).to(device) for _ in range(config.steps)]
    model, _ = build_model(config, tokenizer.get_vocab_size(), None, device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=(0.9, 0.95), weight_decay=0.1)
    model.train()
    for step, batch in enumerate(batches):
        if step == timed_from:
            started = time.process_time()
        _, loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if (step + 1) % config.log_every == 0:
            loss.item()  # as ltsgen's logged steps wait for the loss
    return (time.process_time() - started) / (config.steps - timed_from)


def ltsgen_step_cost(config: TrainConfig, steps: int) -> float:
    """CPU seconds per step of ``ltsgen train`` (its data loading, tokenizing, metrics and checkpoint
    included): the CPU time of a run of ``2 * steps`` less that of a run of ``steps``, so that what a run
    costs once (model, loader, tokenizer) cancels out."""
    spent = []
    for total in (steps, 2 * steps):
        run = replace(config, steps=total, out=f"{config.out}-{total}")
        started = time.process_time()
        train(run, progress=False, train_tokenizer=train_tokenizer)
        spent.append(time.process_time() - started)
    return (spent[1] - spent[0]) / steps


def against_plain_loop(config: TrainConfig, steps: int, repeats: int, profile: bool) -> None:
    """``ltsgen train`` and ``plain_loop`` interleaved ``repeats`` times: CPU seconds per step of each and
    their ratio (ltsgen's tokens/s over the plain loop's). Per-step CPU time, unlike wall time, holds on a
    machine that other work shares."""
    first = replace(config, steps=1, out=f"{config.out}-tokenizer")
    train(first, progress=False, train_tokenizer=train_tokenizer)  # the tokenizer every run then shares
    config = replace(config, tokenizer=str(Path(first.out) / "tokenizer.json"))
    ratios = []
    for repeat in range(repeats):
        ours = ltsgen_step_cost(replace(config, out=f"{config.out}-{repeat}"), steps)
        plain = plain_loop(replace(config, steps=2 * steps), config.tokenizer, steps)
        ratios.append(plain / ours)
        print(f"round {repeat + 1}: {config.encoding} CPU s/step: ltsgen train {ours:.4f}, plain loop "
              f"{plain:.4f}; tokens/s ratio {ratios[-1]:.3f}", flush=True)  # fmt: skip
    shown = ", ".join(f"{r:.3f}" for r in ratios)
    print(f"\nltsgen train tokens/s over the plain loop's (per-step CPU time, {steps} steps timed, median of "
          f"{repeats} rounds): {statistics.median(ratios):.3f} ({shown})")  # fmt: skip
    if profile:  # a run of its own, after the timed ones (the profiler slows what it watches)
        profiler = cProfile.Profile()
        profiler.runcall(
            train, replace(config, steps=2 * steps, out=f"{config.out}-profiled"), progress=False
        )
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(20)
        print(text.getvalue())


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
    parser.add_argument("--plain-loop", action="store_true", help="ltsgen train against a plain PyTorch loop")
    parser.add_argument(
        "--profile", action="store_true", help="with --plain-loop: profile ltsgen's first run"
    )
    args = parser.parse_args()
    try:  # a misspelt name: one line, before any build; NoPE always runs, the ratios' baseline
        named = [canonical_name(name) for name in args.encodings.split(",")]
    except EncodingError as error:
        parser.error(str(error))
    encodings = named[:1] if args.plain_loop else ["nope", *[name for name in named if name != "nope"]]

    with tempfile.TemporaryDirectory(prefix="ltsgen-bench-train-") as tmp:
        data = Path(tmp) / "lts"
        ltsgen(["stories", "--out", str(data), "--num-stories", "400", "--min-words", "200",
                "--max-words", "3000", "--no-progress"])  # fmt: skip
        if args.plain_loop:
            stored = Path(tmp) / "lts-ids"
            shutil.copytree(data, stored)
            ltsgen(
                ["tokenizer", "--data", str(stored), "--vocab-size", str(args.vocab_size), "--no-progress"]
            )
            encoding = encodings[0]
            for name, where in (("the text, tokenized on the fly", data), ("stored token ids", stored)):
                print(f"\n{name}:", flush=True)
                config = TrainConfig(data=str(where), out=str(Path(tmp) / "runs" / where.name / encoding),
                                     encoding=encoding, train_length=args.length, batch_size=args.batch_size,
                                     d_model=args.d_model, n_layers=args.n_layers, n_heads=args.n_heads,
                                     vocab_size=args.vocab_size, device=args.device, log_every=5)  # fmt: skip
                against_plain_loop(config, args.steps, args.repeats, args.profile)
            _describe(args, "plain-loop rounds")
            return
        speeds: dict[str, list[float]] = {}
        tokenizer = None
        for repeat in range(args.repeats):  # rounds interleave the encodings, so load changes hit all alike
            for encoding in encodings:
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
    _describe(args, "training tokens/s, the median of interleaved rounds")
    print("| encoding | tokens/s | vs NoPE |\n|---|---|---|")
    base = median["nope"]
    for encoding, speed in median.items():
        print(f"| {encoding} | {speed:,.0f} | {speed / base:.2f} |")


def _describe(args: argparse.Namespace, what: str) -> None:
    """The settings of the runs above (``what`` they measured)."""
    device = resolve_device(args.device)
    print(
        f"\n{what} ({args.repeats} rounds): length {args.length}, batch {args.batch_size}, d_model {args.d_model}, "
        f"{args.n_layers} layers, {args.n_heads} heads, vocab {args.vocab_size}; {device}, torch {torch.__version__}, "
        f"{torch.get_num_threads()} thread(s), {platform.machine()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}"
    )


if __name__ == "__main__":
    main()
