"""`ltsgen compare`: train every encoding alike, evaluate each at many lengths, write the report."""

from __future__ import annotations

import argparse

from ltsgen.commands import add_command
from ltsgen.commands.evaluate import add_evaluation_arguments, parse_lengths
from ltsgen.commands.train import add_training_arguments, training_config

HELP = "train each position encoding with the same seed, data and budget, evaluate at many lengths, report"


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "compare",
        summary=HELP,
        description=HELP + ". Writes OUT/results.json, results.csv, report.md, ppl_vs_length.png, "
        "entropy_vs_length.png and loss_vs_position.png; runs live in OUT/runs/<encoding>. A rerun skips "
        "finished encodings and resumes an interrupted one.",
        examples=[
            "ltsgen compare --data lts --encodings rope,alibi,fire --train-length 64 --eval-lengths 64,256,1024 --out cmp",
        ],
    )
    parser.add_argument("--encodings", default="all", help="all, or a comma-separated list of encodings")
    parser.add_argument("--eval-lengths", default="64,128,256,512,1024", help="evaluation lengths in tokens")
    add_training_arguments(parser)
    add_evaluation_arguments(parser)
    parser.add_argument(
        "--workers", type=int, default=1, help="runs trained at once, each in its own process"
    )
    parser.add_argument("--jobs", type=int, dest="workers", help=argparse.SUPPRESS)  # old spelling
    parser.add_argument("--out", required=True, metavar="OUT", help="comparison folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import time

    from ltsgen.errors import UsageError
    from ltsgen.training import compare, resolve_encodings
    from ltsgen.training.errors import user_errors

    lengths = parse_lengths(args.eval_lengths)
    started = time.perf_counter()
    try:
        encodings = resolve_encodings(args.encodings)
        compare(
            training_config(args, encodings[0]), encodings, lengths, eval_sequences=args.eval_sequences,
            batch_tokens=args.batch_tokens, workers=args.workers, progress=not args.no_progress,
        )  # fmt: skip
    except user_errors() as error:
        raise UsageError(str(error)) from None
    print(
        f"compared {len(encodings)} encodings in {time.perf_counter() - started:,.0f} s; report: {args.out}/report.md"
    )
    return 0
