"""`ltsgen compare`: train every encoding alike, evaluate each at many lengths, write the report."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING

from ltsgen.commands import add_command, add_engine_arguments

if TYPE_CHECKING:
    from ltsgen.engines import RayEngine
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
    add_engine_arguments(parser, "runs trained")
    parser.add_argument("--jobs", type=int, dest="workers", help=argparse.SUPPRESS)  # old spelling
    parser.add_argument(
        "--cpus-per-run", type=float, default=1.0, help="with --engine ray: CPUs each run's task reserves"
    )
    parser.add_argument(
        "--gpus-per-run",
        type=float,
        default=0.0,
        help="with --engine ray: GPUs each run's task reserves (use with --device cuda; 0.5 packs two runs "
        "on one GPU)",
    )
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
        with _run_engine(args) as engine:
            compare(
                training_config(args, encodings[0]), encodings, lengths, eval_sequences=args.eval_sequences,
                batch_tokens=args.batch_tokens, workers=args.workers or 1, progress=not args.no_progress,
                run_map=_threaded_map(engine, args.cpus_per_run) if engine is not None else None,
            )  # fmt: skip
    except user_errors() as error:
        raise UsageError(str(error)) from None
    print(
        f"compared {len(encodings)} encodings in {time.perf_counter() - started:,.0f} s; report: {args.out}/report.md"
    )
    return 0


@contextmanager
def _run_engine(args: argparse.Namespace) -> Iterator[RayEngine | None]:
    """The Ray engine that carries each run as a task with its CPUs and GPUs; ``None`` for the local engine
    (``compare`` runs in this process, or ``--workers`` processes)."""
    from ltsgen.errors import UsageError

    if args.engine != "ray":
        if args.ray_address is not None:
            raise UsageError("--ray-address needs --engine ray")
        yield None
        return
    if args.cpus_per_run <= 0 or args.gpus_per_run < 0:
        raise UsageError("--cpus-per-run must be positive and --gpus-per-run at least 0")
    from ltsgen.engines import RayEngine

    resources = {"num_cpus": args.cpus_per_run, "num_gpus": args.gpus_per_run}
    with RayEngine(args.ray_address, args.workers, resources) as engine:
        yield engine


def _threaded_map(engine: RayEngine, cpus: float):
    """``engine.map`` with torch in each task limited to the task's CPUs (a Ray worker keeps the thread
    count it started with)."""
    threads = max(1, int(cpus))
    return lambda fn, specs: engine.map(partial(_with_threads, threads, fn), specs)


def _with_threads(threads: int, fn, spec):
    import torch

    torch.set_num_threads(threads)
    return fn(spec)
