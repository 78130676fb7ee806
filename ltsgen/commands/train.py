"""`ltsgen train`: train the compact model with one position encoding on a dataset directory."""

from __future__ import annotations

import argparse
import json
import os

from ltsgen.commands import add_command

HELP = "train the compact decoder with one position encoding (AdamW, warm-up + cosine, resumable, torchrun)"


def add_training_arguments(parser: argparse.ArgumentParser) -> None:
    """The model, data and optimisation options shared by `ltsgen train` and `ltsgen compare`."""
    parser.add_argument("--data", required=True, metavar="DIR", help="dataset directory built by ltsgen")
    parser.add_argument(
        "--train-length", type=int, default=128, metavar="T", help="training context in tokens"
    )
    parser.add_argument("--steps", type=int, default=1000, help="optimizer steps")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per process and step")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--min-lr-ratio", type=float, default=0.1, help="final LR as a fraction of the peak")
    parser.add_argument(
        "--warmup", type=int, default=None, help="warm-up steps (None: 10%% of the steps, at most 200)"
    )
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--grad-clip", type=float, default=1.0, help="clip the gradient norm")
    parser.add_argument("--d-model", type=int, default=128, help="model width")
    parser.add_argument("--layers", type=int, default=4, help="transformer blocks")
    parser.add_argument("--heads", type=int, default=4, help="attention heads")
    parser.add_argument(
        "--tokenizer",
        metavar="PATH",
        help="tokenizer.json to use (default: DIR/tokenizer.json, else train one)",
    )
    parser.add_argument("--vocab-size", type=int, default=2048, help="vocabulary when a tokenizer is trained")
    parser.add_argument("--seed", type=int, default=0, help="initialisation and data order")
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda, cuda:1 ...")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (best on CUDA)")
    parser.add_argument(
        "--eval-every", type=int, default=0, metavar="N", help="validation loss every N steps"
    )
    parser.add_argument(
        "--checkpoint-every", type=int, default=0, metavar="N", help="checkpoint every N steps"
    )
    parser.add_argument("--log-every", type=int, default=10, metavar="N", help="metrics line every N steps")


def training_config(args: argparse.Namespace, encoding: str):
    from ltsgen.training import TrainConfig

    return TrainConfig(
        data=args.data, out=args.out, encoding=encoding, train_length=args.train_length, steps=args.steps,
        batch_size=args.batch_size, lr=args.lr, min_lr_ratio=args.min_lr_ratio, warmup=args.warmup,
        weight_decay=args.weight_decay, grad_clip=args.grad_clip, d_model=args.d_model, layers=args.layers,
        heads=args.heads, vocab_size=args.vocab_size, tokenizer=args.tokenizer, seed=args.seed,
        device=args.device, compile=args.compile, eval_every=args.eval_every,
        checkpoint_every=args.checkpoint_every, log_every=args.log_every,
    )  # fmt: skip


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "train",
        summary=HELP,
        description=HELP + ". Writes RUN/config.json, RUN/checkpoint.pt, RUN/metrics.jsonl (JSON lines), "
        "RUN/tokenizer.json and RUN/train_summary.json. Several GPUs or machines: launch with torchrun.",
        examples=[
            "ltsgen train --data lts --encoding rope --train-length 128 --steps 1000 --out runs/rope",
            "ltsgen train --data lts --encoding rope --train-length 128 --steps 1000 --out runs/rope --resume",
            "torchrun --nproc-per-node 2 -m ltsgen train --data lts --encoding alibi --out runs/alibi",
        ],
    )
    add_training_arguments(parser)
    parser.add_argument("--encoding", default="rope", help="position encoding (see ltsgen.encodings.NAMES)")
    parser.add_argument("--out", required=True, metavar="RUN", help="run folder")
    parser.add_argument("--resume", action="store_true", help="continue the run in RUN from its checkpoint")
    parser.add_argument(
        "--stop-after",
        type=int,
        metavar="N",
        help="stop this invocation after N steps (checkpointed; resume later)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ltsgen.encodings import NAMES
    from ltsgen.errors import UsageError
    from ltsgen.training import train
    from ltsgen.training.errors import user_errors

    if args.encoding not in NAMES:
        raise UsageError(f"unknown encoding {args.encoding!r}; choose one of {', '.join(NAMES)}")
    try:
        summary = train(
            training_config(args, args.encoding), resume=args.resume, stop_after=args.stop_after,
            progress=not args.no_progress,
        )  # fmt: skip
    except user_errors() as error:
        raise UsageError(str(error)) from None
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps(summary, indent=1, sort_keys=True))
    return 0
