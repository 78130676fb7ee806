"""`ltsgen evaluate`: perplexity, per-position loss, attention entropy and cued recall of a run at many lengths."""

from __future__ import annotations

import argparse

from ltsgen.commands import add_command, add_storage_argument, integers, storage_defaults

SUMMARY = "evaluate a trained run at several lengths (perplexity, per-position loss, attention entropy, cued recall)"


def parse_lengths(text: str, option: str = "--eval-lengths") -> list[int]:
    """``64,128,256`` -> [64, 128, 256] (sorted); a one-line error otherwise (a length given twice too)."""
    from ltsgen.errors import UsageError

    lengths = integers(text, option, "64,128,256")
    if min(lengths) < 2:
        raise UsageError(f"{option} {text!r}: every length must be at least 2 tokens")
    return sorted(lengths)


def add_evaluation_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `ltsgen evaluate` and `ltsgen compare`."""
    from ltsgen.training.precision import EVAL_DTYPES

    parser.add_argument("--eval-lengths", default="64,128,256,512,1024", help="evaluation lengths in tokens")
    parser.add_argument("--lengths", dest="eval_lengths", help=argparse.SUPPRESS)  # old spelling
    from ltsgen.commands import number

    parser.add_argument(
        "--eval-sequences",
        type=number(int, {"at_least": 1}),
        default=32,
        metavar="N",
        help="documents per length, the same at every length",
    )
    parser.add_argument(
        "--batch-tokens",
        type=number(int, {"at_least": 1}),
        default=16384,
        help="tokens per evaluation batch (memory bound)",
    )
    parser.add_argument(
        "--eval-dtype",
        choices=EVAL_DTYPES,
        default="float32",
        help="evaluation precision (bfloat16: autocast)",
    )
    parser.add_argument(
        "--entropy-sequences", type=number(int, {"at_least": 1}), default=None, metavar="N",
        help="measure attention entropy on the first N of the evaluation documents (default: all of them; "
        "entropy is the costliest part of an evaluation at long lengths)",
    )  # fmt: skip
    parser.add_argument(
        "--window-stride", type=number(int, {"at_least": 1}), default=1, metavar="S",
        help="for the extrapolation penalty, score every S-th of the last T tokens with the full context and "
        "with a T-token window (1: all; the windowed pass costs one T-token forward per scored token)",
    )  # fmt: skip
    parser.add_argument(
        "--eval-concat", action="store_true",
        help="evaluate on the concatenated held-out stream DIR/eval_concat/<longest L>/ (from `ltsgen buckets "
        "--eval-concat`), each window cut to every length, instead of whole documents",
    )  # fmt: skip


def register(subparsers) -> None:
    from ltsgen.encodings import NAMES, rescaled

    parser = add_command(
        subparsers,
        "evaluate",
        summary=SUMMARY,
        description=SUMMARY + ". Every length reads the same documents: DIR/eval/<L> when the dataset has a "
        "set for every length (nested, as `ltsgen buckets` writes them), else the first documents of the "
        "validation (or test) split with at least max(L) tokens, cut to each L. Writes RUN/eval.json "
        "(RUN/eval-<encoding>.json with --as-encoding).",
        examples=[
            "ltsgen evaluate --run runs/rope --data lts --eval-lengths 128,256,512,1024",
            "ltsgen evaluate --run runs/rope --data lts --eval-lengths 128,1024 --as-encoding yarn",
            "ltsgen evaluate --run runs/fire --data c4 --eval-lengths 512,2048,8192 --eval-dtype bfloat16",
        ],
    )
    parser.add_argument("--run", required=True, metavar="RUN", help="run folder written by `ltsgen train`")
    parser.add_argument("--data", required=True, metavar="DIR", help="dataset directory (a path or URL)")
    add_storage_argument(parser)
    add_evaluation_arguments(parser)
    parser.add_argument(
        "--as-encoding",
        choices=tuple(name for name in NAMES if rescaled(name)),
        help="read a RoPE run's weights as RoPE-PI or YaRN, rescaled zero-shot to each length",
    )
    parser.add_argument("--device", default="auto", help="auto (CUDA when present), cpu, cuda ...")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from ltsgen.training import evaluate_run
    from ltsgen.training.rundir import eval_name

    with storage_defaults(args, args.data):
        report = evaluate_run(
            args.run, args.data, parse_lengths(args.eval_lengths), max_sequences=args.eval_sequences,
            batch_tokens=args.batch_tokens, device=args.device, eval_dtype=args.eval_dtype,
            entropy_sequences=args.entropy_sequences, window_stride=args.window_stride,
            eval_concat=args.eval_concat, encoding=args.as_encoding, progress=not args.no_progress,
            log=lambda line: print(f"ltsgen evaluate: note: {line}", file=sys.stderr),
        )  # fmt: skip
    scaling = f", {report['scaling']}" if report["scaling"] else ""
    print(
        f"{report['encoding']}{scaling} (trained as {report['trained_as']} at {report['train_length']} tokens, "
        f"step {report['step']}), {report['eval_dtype']}; documents: {report['documents_from']}"
    )
    print(f"{'length':>8} {'docs':>5} {'loss':>8} {'perplexity':>11} {'penalty':>8} {'entropy':>8} {'last T':>7} "
          f"{'recall':>7} {'control':>7} {'recalls':>7} {'peak MiB':>9}")  # fmt: skip
    for result in report["results"]:
        recall, control = result.get("recall_accuracy"), result.get("recall_accuracy_control")
        print(
            f"{result['eval_length']:>8} {result['num_sequences']:>5} {result['loss']:>8.4f} "
            f"{result['perplexity']:>11.2f} {result['extrapolation_penalty']:>+8.4f} {result['attention_entropy']:>8.3f} "
            f"{result['attention_entropy_last']:>7.3f} {'-' if recall is None else f'{recall:.3f}':>7} "
            f"{'-' if control is None else f'{control:.3f}':>7} {result.get('recall_count', 0):>7} "
            f"{result['peak_memory_mib']:>9.0f}"
        )
    window = report.get("recall_window")
    if window and window["recall_count"]:
        print(f"cued recall within the training window: {window['recall_accuracy']:.3f}, control "
              f"{window['recall_accuracy_control']:.3f}, {window['recall_count']} recalls")  # fmt: skip
    print("recall: share of cued recalls whose every value token is the top-1 prediction; control: the same "
          f"with the value's earlier occurrences replaced; wrote {args.run}/{eval_name(args.as_encoding)}")  # fmt: skip
    return 0
