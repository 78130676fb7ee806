"""`ltsgen train`: train the compact model with one position encoding on a dataset directory."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import MISSING, fields
from typing import Any

from ltsgen.commands import add_command, add_storage_argument, number, storage_defaults

SUMMARY = (
    "train the compact decoder with one position encoding (AdamW, warm-up + cosine, resumable, torchrun)"
)


class KeyValues(argparse.Action):
    """``--encoding-option KEY=VALUE``, repeatable, collected into a dict (values stay text)."""

    def __call__(self, parser, namespace, value, option_string=None):
        key, sep, text = value.partition("=")
        if not sep or not key.strip():
            parser.error(f"{option_string} {value!r}: expected KEY=VALUE, e.g. threshold=128")
        setattr(namespace, self.dest, {**(getattr(namespace, self.dest) or {}), key.strip(): text.strip()})


def add_config_arguments(parser: argparse.ArgumentParser, exclude: tuple[str, ...] = ()) -> None:
    """One option per field of ``TrainConfig`` that has ``cli`` metadata, named after the field.

    Shared by `ltsgen train` and `ltsgen compare` (which excludes what it sets per run).
    """
    from ltsgen.training import TrainConfig

    for item in fields(TrainConfig):
        cli = dict(item.metadata.get("cli") or {})
        if not cli or item.name in exclude:
            continue
        flag = cli.pop("flag", "--" + item.name.replace("_", "-"))
        aliases = cli.pop("aliases", ())
        default = item.default_factory() if item.default_factory is not MISSING else item.default
        if default is MISSING:
            default = None
        if isinstance(default, bool):
            cli.update(action="store_true")
        elif isinstance(default, dict):
            cli.update(action=KeyValues)
            default = None  # the config's own empty dict, unless given
        elif "type" not in cli and default is not None:
            cli.update(type=type(default))
        if item.metadata.get("limits"):
            cli.update(type=number(cli["type"], item.metadata["limits"]))
        parser.add_argument(flag, dest=item.name, default=default, **cli)
        for alias in aliases:  # old spellings, hidden
            hidden = {key: value for key, value in cli.items() if key in ("type", "action", "choices")}
            parser.add_argument(alias, dest=item.name, help=argparse.SUPPRESS, **hidden)


def training_config(args: argparse.Namespace, **settings: Any):
    """The ``TrainConfig`` of the parsed options; ``settings`` set the fields a command decides itself."""
    from ltsgen.training import TrainConfig

    given = {  # unset options (None) keep the config's own default
        item.name: getattr(args, item.name)
        for item in fields(TrainConfig)
        if getattr(args, item.name, None) is not None
    }
    return TrainConfig(**{**given, **settings})


def register(subparsers) -> None:
    parser = add_command(
        subparsers,
        "train",
        summary=SUMMARY,
        description=SUMMARY + ". Writes RUN/config.json (every setting, encoding options resolved for the "
        "training length), RUN/checkpoint.pt with its sha256, RUN/metrics.jsonl (JSON lines), "
        "RUN/tokenizer.json, RUN/token_counts.json (when it tokenizes text: what --resume plans from) and "
        "RUN/train_summary.json (with what the encoding learned). A run that fails "
        "before its first checkpoint removes what it wrote. RUN is a new or empty folder, or one of an "
        "earlier run (a folder with a dataset or files of yours is refused); one run at a time writes there. "
        "A run whose loss stops being finite ends with an error naming the step (exit status 2). Several "
        "GPUs or machines: launch with torchrun.",
        examples=[
            "ltsgen train --data lts --encoding rope --train-length 128 --steps 1000 --out runs/rope",
            "ltsgen train --data lts --encoding fire --encoding-option threshold=64 --out runs/fire",
            "ltsgen train --data lts --encoding rope --train-length 128 --steps 1000 --out runs/rope --resume",
            "ltsgen train --data lts --encoding rope_pi --train-length 512 --encoding-option factor=4 "
            "--encoding-option original_length=128 --init-from runs/rope --steps 200 --out runs/rope_pi-ft",
            "torchrun --nproc-per-node 2 -m ltsgen train --data lts --encoding alibi --out runs/alibi",
            "ltsgen train --data lts=0.7,s3://bucket/c4=0.3 --encoding rope --out runs/mixed  # a mixture",
        ],
    )
    add_config_arguments(parser)
    add_storage_argument(parser)
    parser.add_argument("--out", required=True, metavar="RUN", help="run folder")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in RUN from its checkpoint (none there: it starts, and says so)",
    )
    parser.add_argument(
        "--stop-after",
        type=number(int, {"at_least": 1}),
        metavar="N",
        help="stop this invocation after N steps (checkpointed)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ltsgen.tokenizer import train_tokenizer
    from ltsgen.training import train
    from ltsgen.training.rundir import CHECKPOINT_NAME

    trainer = announced(train_tokenizer, args.data, os.path.join(args.out, "tokenizer.json"))
    checkpoint = os.path.join(args.out, CHECKPOINT_NAME)
    if args.resume and not os.path.exists(checkpoint) and int(os.environ.get("RANK", "0")) == 0:
        print(f"{checkpoint}: no checkpoint to resume from: starting the run at step 0", flush=True)
    with storage_defaults(args, args.data), mixture_log():
        summary = train(
            training_config(args), resume=args.resume, stop_after=args.stop_after,
            progress=not args.no_progress, train_tokenizer=trainer,
        )  # fmt: skip
    if int(os.environ.get("RANK", "0")) == 0:
        print(describe(summary, args.out))
    return 0


def announced(train_tokenizer: Callable, data: str, where: str) -> Callable:
    """``train_tokenizer``, saying in one line, before it trains, that it does and where the result goes."""

    from ltsgen.training.data import first_source

    dataset = first_source(data)  # a mixture's tokenizer is its first source's
    named = dataset if dataset == data else f"the mixture's first source, {dataset},"

    def train_announced(texts, vocab_size: int):
        print(
            f"{named} has no tokenizer and none is given: training a byte-level BPE of {vocab_size:,} tokens on "
            f"its training split, written to {where} (`ltsgen tokenizer --data {dataset}` attaches one to the "
            "data for every run)",
            flush=True,
        )
        return train_tokenizer(texts, vocab_size)

    return train_announced


@contextmanager
def mixture_log() -> Iterator[None]:
    """While training, each mixture source's new epoch (``ltsgen.loaders.mixture`` INFO) as a line on
    stderr, from rank 0."""
    logger = logging.getLogger("ltsgen.loaders.mixture")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    shown = int(os.environ.get("RANK", "0")) == 0 and logger.getEffectiveLevel() > logging.INFO
    if shown:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        if shown:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)


def describe(summary: dict[str, Any], run_dir: str) -> str:
    """A few lines a person reads at the end of a run."""
    if summary.get("nothing_to_do"):
        return f"{run_dir}: finished earlier at step {summary['step']:,}; nothing to do"
    speed = (
        f"{summary['tokens_per_s']:,.0f} tokens/s" if summary.get("tokens_per_s") else "speed not measured"
    )
    lines = [
        f"{summary['encoding']} at {summary['train_length']} tokens: step {summary['step']:,}, loss "
        f"{summary['last_loss']:.3f}, {speed} (median), {summary['wall_s']:,.0f} s on {summary['device']}"
        + (f" x{summary['world_size']}" if summary["world_size"] > 1 else "")
        + f", {summary['parameters']:,} parameters",
    ]
    from ltsgen.training.report import learned_shared, learned_value

    for layer, values in enumerate(summary.get("learned", [])):
        shown = ", ".join(f"{key} {learned_value(value)}" for key, value in values.items())
        where = "shared by every layer" if learned_shared(summary) else f"layer {layer}"
        lines.append(f"  learned ({where}): {shown}")
    if summary["finished"]:
        lines.append(f"run: {run_dir} (checkpoint.pt, metrics.jsonl, train_summary.json)")
    else:
        lines.append(f"stopped at step {summary['step']:,} (checkpointed): continue with --resume")
    return "\n".join(lines)
