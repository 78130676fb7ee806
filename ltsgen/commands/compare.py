"""`ltsgen compare`: train every encoding alike (grids of training lengths and seeds), evaluate each, report."""

from __future__ import annotations

import argparse

from ltsgen.commands import (
    add_command,
    add_engine_arguments,
    add_storage_argument,
    integers,
    number,
    storage_defaults,
)
from ltsgen.commands.evaluate import add_evaluation_arguments, parse_lengths
from ltsgen.commands.train import add_config_arguments, announced, training_config

SUMMARY = (
    "train each position encoding with the same data and budget per seed, evaluate at many lengths, report"
)


def register(subparsers) -> None:
    from ltsgen.encodings import NAMES

    parser = add_command(
        subparsers,
        "compare",
        summary=SUMMARY,
        description=SUMMARY
        + ". The primary metric is the same-token extrapolation penalty: the last T tokens at each length "
        "scored with the full context minus the same tokens scored with a T-token window (nats per token). "
        "Writes OUT/results.json, results.csv (one row per run and length), summary.csv (means over seeds "
        "with 95% intervals, seeds and documents crossed), claims.csv (each encoding "
        "against NoPE and RoPE and the papers' claims, Holm-corrected, with verdicts that need trained models "
        "and 5 seeds), report.md, penalty_vs_length.png, ppl_vs_length.png, entropy_vs_length.png and "
        "loss_vs_position.png (one panel per family of encodings); runs live in "
        "OUT/runs/T<length>-seed<seed>/<encoding>, and share OUT/tokenizer.json and, when the text is "
        "tokenized on the fly, OUT/token_counts.json (the split counted once). RoPE, RoPE-PI and YaRN "
        "train once (as rope) and are evaluated under each scaling, zero-shot; --finetune-steps adds "
        "RoPE-PI and YaRN fine-tuned at each evaluation length beyond the training length. A rerun skips "
        "finished runs and resumes an interrupted one. --encoding-option KEY=VALUE applies to every compared "
        f"encoding that has the option. Encodings: {', '.join(NAMES)}.",
        examples=[
            "ltsgen compare --data lts --encodings rope,alibi,fire --train-lengths 64 --eval-lengths 64,256,1024 --out cmp",
            "ltsgen compare --data lts --encodings rope,alibi,ape --train-lengths 64,128,256 --seeds 0,1,2 --out grid",
            "ltsgen compare --data lts --encodings rope_pi,yarn --finetune-steps 200 --out scaled",
            "ltsgen compare --data c4 --encodings all --train-lengths 2048 --eval-lengths 512,2048,8192 --device cuda --out c4",
            "ltsgen compare --data lts=0.7,c4=0.3 --encodings rope,alibi --out mixed  # a mixture of two datasets",
        ],
    )
    parser.add_argument("--encodings", default="all", help="all, or a comma-separated list of encodings")
    parser.add_argument("--train-lengths", default="128", metavar="T,...", help="training lengths in tokens")
    parser.add_argument("--train-length", dest="train_lengths", help=argparse.SUPPRESS)  # old spelling
    parser.add_argument("--seeds", default="0", metavar="S,...", help="seeds: initialisation and data order")
    parser.add_argument("--seed", dest="seeds", help=argparse.SUPPRESS)  # old spelling
    add_config_arguments(parser, exclude=("encoding", "train_length", "seed", "eval_sequences", "init_from"))
    add_storage_argument(parser)
    add_evaluation_arguments(parser)
    parser.add_argument(
        "--finetune-steps", type=number(int, {"at_least": 0}), default=0, metavar="N",
        help="also fine-tune RoPE-PI and YaRN for N steps at each evaluation length beyond the training length",
    )  # fmt: skip
    add_engine_arguments(parser, "runs trained")
    parser.add_argument("--jobs", type=int, dest="workers", help=argparse.SUPPRESS)  # old spelling
    parser.add_argument(
        "--cpus-per-run",
        type=number(float, {"above": 0}),
        default=1.0,
        help="with --engine ray: CPUs each run's task reserves",
    )
    parser.add_argument(
        "--gpus-per-run",
        type=number(float, {"at_least": 0}),
        default=0.0,
        help="with --engine ray: GPUs each run's task reserves (use with --device cuda; 0.5 packs two runs "
        "on one GPU)",
    )
    parser.add_argument("--out", required=True, metavar="OUT", help="comparison folder")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` -> [0, 1, 2] (in the order given); a one-line error otherwise (a seed given twice too)."""
    from ltsgen.errors import UsageError, out_of_limits
    from ltsgen.training.train import SEEDS

    seeds = integers(text, "--seeds", "0,1,2")
    for seed in seeds:
        problem = out_of_limits(seed, SEEDS)
        if problem:
            raise UsageError(f"--seeds: every seed {problem} (got {seed})")
    return seeds


def run(args: argparse.Namespace) -> int:
    import time

    from ltsgen.errors import UsageError
    from ltsgen.tokenizer import train_tokenizer
    from ltsgen.training import compare, resolve_encodings

    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {args.workers})")
    train_lengths = parse_lengths(str(args.train_lengths), "--train-lengths")
    started = time.perf_counter()
    encodings = resolve_encodings(args.encodings)
    with storage_defaults(args, args.data), _run_engine(args) as engine:
        results = compare(
            training_config(args, encoding=encodings[0], train_length=train_lengths[0]), encodings,
            parse_lengths(args.eval_lengths), train_lengths=train_lengths, seeds=parse_seeds(args.seeds),
            eval_sequences=args.eval_sequences, batch_tokens=args.batch_tokens, eval_dtype=args.eval_dtype,
            entropy_sequences=args.entropy_sequences, window_stride=args.window_stride, eval_concat=args.eval_concat, finetune_steps=args.finetune_steps,
            train_tokenizer=announced(train_tokenizer, args.data, f"{args.out}/tokenizer.json"),
            progress=not args.no_progress,
            engine=engine,
        )  # fmt: skip
    trained = len(
        {run["train"]["encoding"] + str(run["train_length"]) + str(run["seed"]) for run in results["runs"]}
    )
    print(
        f"compared {len(encodings)} encodings ({trained} trainings) in {time.perf_counter() - started:,.0f} s; "
        f"report: {args.out}/report.md"
    )
    return 0


def _run_engine(args: argparse.Namespace):
    """The engine of ``--engine``/``--workers``/``--ray-address``; a Ray task reserves ``--cpus-per-run``
    CPUs and ``--gpus-per-run`` GPUs (a context manager; it closes the engine)."""
    from ltsgen.engines import make_engine

    resources = {"num_cpus": args.cpus_per_run, "num_gpus": args.gpus_per_run}
    return make_engine(args.engine, args.workers, args.ray_address, resources)
