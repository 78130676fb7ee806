"""`ltsgen evaluate`: perplexity, per-position loss, attention entropy and facts loss of a run at many lengths."""

from __future__ import annotations

import argparse

from ltsgen.commands import add_command

HELP = "evaluate a trained run at several lengths (perplexity, per-position loss, attention entropy, facts)"


def parse_lengths(text: str) -> list[int]:
    """``64,128,256`` -> [64, 128, 256]; a one-line error otherwise."""
    from ltsgen.errors import UsageError

    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(f"--lengths {text!r}: expected comma-separated integers like 64,128,256") from None
    if not lengths or min(lengths) < 2:
        raise UsageError(f"--lengths {text!r}: every length must be at least 2 tokens")
    return sorted(set(lengths))


def add_evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `ltsgen evaluate` and `ltsgen compare`."""
    parser.add_argument(
        "--eval-sequences",
        type=int,
        default=32,
        metavar="N",
        help="sequences per evaluation length",
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=16384,
        help="tokens per evaluation batch (memory bound)",
    )


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "evaluate",
        summary=HELP,
        description=HELP + ". Sequences are exactly L tokens: DIR/eval/<L> when the dataset has it, else the "
        "first L tokens of validation (or test) documents with at least L tokens. Writes RUN/eval.json.",
        examples=[
            "ltsgen evaluate --run runs/rope --data lts --lengths 128,256,512,1024",
        ],
    )
    parser.add_argument("--run", required=True, metavar="RUN", help="run folder written by `ltsgen train`")
    parser.add_argument("--data", required=True, metavar="DIR", help="dataset directory")
    parser.add_argument("--lengths", default="64,128,256,512,1024", help="evaluation lengths in tokens")
    add_evaluation_arguments(parser)
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda ...")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ltsgen.errors import UsageError
    from ltsgen.training import evaluate_run
    from ltsgen.training.errors import user_errors

    lengths = parse_lengths(args.lengths)
    try:
        report = evaluate_run(
            args.run, args.data, lengths, max_sequences=args.eval_sequences, batch_tokens=args.batch_tokens,
            device=args.device, progress=not args.no_progress,
        )  # fmt: skip
    except user_errors() as error:
        raise UsageError(str(error)) from None
    print(f"{report['encoding']} trained at {report['train_length']} tokens, step {report['step']}:")
    print(f"{'length':>8} {'seqs':>5} {'loss':>8} {'perplexity':>11} {'entropy':>8} {'peak MiB':>9}")
    for result in report["results"]:
        if not result.get("num_sequences"):
            print(f"{result['eval_length']:>8} {0:>5}  (no document reaches this length)")
            continue
        print(
            f"{result['eval_length']:>8} {result['num_sequences']:>5} {result['loss']:>8.4f} "
            f"{result['perplexity']:>11.2f} {result['attention_entropy']:>8.3f} {result['peak_memory_mib']:>9.0f}"
        )
    print(f"wrote {args.run}/eval.json")
    return 0
