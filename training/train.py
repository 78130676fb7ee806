"""The training loop: AdamW, warm-up + cosine decay, gradient clipping, exact resume, DDP under torchrun.

One process trains alone; under ``torchrun`` every rank reads its own slice of each global batch
(``ltsgen.loaders`` splits by rank) and DDP averages the gradients. A checkpoint holds the model,
optimizer, scheduler, random generators and loader state, so ``resume=True`` continues the very run
that was interrupted: same batches, same losses. A run that fails before its first checkpoint removes
what it wrote; one that fails later keeps its last checkpoint to resume from. A run whose loss (or gradient)
stops being finite ends with ``DivergedError`` naming the step, and its summary says so.

The run folder follows a build's rules (``rundir.claim_folder``): one run at a time holds it, and a folder
holding a dataset or files of the user's is refused before anything is written.
"""

from __future__ import annotations

import gc
import json
import math
import os
import time
import traceback
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from ltsgen.encodings import NAMES, build, canonical_name, training_options
from ltsgen.errors import out_of_limits
from ltsgen.loaders.contract import TOKENIZER_NAME
from ltsgen.loaders.files import atomic_path, sha256_file
from ltsgen.training import distributed
from ltsgen.training.checkpoint import (
    load_checkpoint,
    load_weights,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ltsgen.training.copytask import copy_rows
from ltsgen.training.data import (
    TokenizerTrainer,
    TrainingBatches,
    load_eval_sets,
    resolve_tokenizer,
    same_setting,
)
from ltsgen.training.errors import DivergedError, TrainingError
from ltsgen.training.evaluate import perplexity
from ltsgen.training.model import next_token_loss
from ltsgen.training.precision import training_precision
from ltsgen.training.rundir import (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    METRICS_NAME,
    SUMMARY_NAME,
    TOKEN_COUNTS_NAME,
    claim_folder,
    clean_up_failed_run,
    file_error,
    read_json,
    remove_temporaries,
    write_json,
)
from ltsgen.training.schedule import WarmupCosine

BETAS = (0.9, 0.95)


def _option(
    default: Any = None, help: str = "", *, limits: dict[str, float] | None = None, **cli: Any
) -> Any:
    """A config field and how the command line offers it (``metadata["cli"]``: argparse settings;
    ``metadata["limits"]``: the bounds of a number, ``at_least``, ``above`` and ``at_most``)."""
    factory = {"default_factory": default} if callable(default) else {"default": default}
    return field(**factory, metadata={"cli": {"help": help, **cli}, "limits": limits or {}})


# the upper bounds are far beyond any model this trains, and keep a mistyped number (an extra digit or ten)
# from reaching torch as a tensor size it cannot hold
POSITIVE = {"at_least": 1, "at_most": 2**24}
COUNT = {"at_least": 0, "at_most": 2**24}
SEEDS = {"at_least": 0, "at_most": 2**32 - 1}  # numpy's and the loaders' seed range


@dataclass
class TrainConfig:
    """Everything that defines a run (saved as RUN/config.json); ``ltsgen train`` offers every field with
    ``cli`` metadata as an option of the same name."""

    data: str = field(metadata={"cli": {"help": "dataset directory built by ltsgen (a path or URL), or a "
                                        "mixture PATH=WEIGHT,PATH=WEIGHT,... such as lts=0.7,s3://bucket/c4=0.3 "
                                        "(weights in any scale; tokenizer and evaluation from the first source)",
                                        "metavar": "DIR", "required": True}})  # fmt: skip
    out: str = field(metadata={})  # the run folder: each command names it itself
    encoding: str = _option("rope", f"position encoding, in any case: {', '.join(NAMES)}", metavar="NAME")
    encoding_options: dict[str, Any] = _option(
        dict, "set an option of the encoding (repeatable), e.g. threshold=128 or max_distance=256; every "
        "option and its default is in ltsgen.encodings.options(NAME), and config.json records them all",
        flag="--encoding-option", metavar="KEY=VALUE",
    )  # fmt: skip
    train_length: int = _option(
        128, "training context in tokens", metavar="T", limits={"at_least": 2, "at_most": 2**24}
    )
    steps: int = _option(1000, "optimizer steps", limits={"at_least": 1, "at_most": 2**40})
    batch_size: int = _option(16, "sequences per process and step", limits=POSITIVE)
    lr: float = _option(1e-3, "peak learning rate", limits={"above": 0})
    min_lr_ratio: float = _option(
        0.1, "final learning rate as a fraction of the peak", limits={"at_least": 0, "at_most": 1}
    )
    warmup: int | None = _option(
        None, "warm-up steps; without it 10%% of the steps, at most 200", type=int, limits=COUNT
    )
    weight_decay: float = _option(
        0.1, "AdamW weight decay of the weight matrices and embeddings", limits=COUNT
    )
    grad_clip: float = _option(1.0, "clip the gradient norm at this value", limits={"above": 0})
    d_model: int = _option(128, "model width", limits={"at_least": 1, "at_most": 2**16})
    n_layers: int = _option(
        4, "transformer blocks", aliases=("--layers",), limits={"at_least": 1, "at_most": 2**12}
    )
    n_heads: int = _option(
        4, "attention heads", aliases=("--heads",), limits={"at_least": 1, "at_most": 2**12}
    )
    vocab_size: int = _option(
        2048,
        "vocabulary of the tokenizer trained when the data has none",
        limits={"at_least": 257, "at_most": 2**24},
    )
    tokenizer: str | None = _option(
        None, "tokenizer.json to use (or a folder with one, such as a run's); without it the dataset's own, "
        "else one trained on the training split",
        metavar="PATH",
    )  # fmt: skip
    init_from: str | None = _option(
        None, "start from the weights of this run's checkpoint (fine-tuning: same model shape)", metavar="RUN"
    )
    copy_task: int = _option(
        0, "add N rows of the copy task to every step (random tokens repeated to fill the row; the copying cued "
        "recalls need, which text alone teaches slowly: see docs/training.md)", metavar="N", limits=COUNT,
    )  # fmt: skip
    seed: int = _option(0, "initialisation and data order", limits=SEEDS)
    device: str = _option("auto", "auto (CUDA when present), cpu, cuda, cuda:1, ...")
    compile: bool = _option(False, "torch.compile the model (best on CUDA)")
    eval_every: int = _option(
        0, "validation loss at the training length every N steps; 0: never", metavar="N", limits=COUNT
    )
    eval_sequences: int = _option(
        16, "validation sequences (with --eval-every)", metavar="N", limits=POSITIVE
    )
    checkpoint_every: int = _option(
        0, "checkpoint every N steps; 0: at the end and at validations only", metavar="N", limits=COUNT
    )
    log_every: int = _option(10, "a metrics line every N steps", metavar="N", limits=POSITIVE)

    #: the settings that must match when resuming (the rest may change, e.g. the device; batch_size may change
    #: with the number of processes, as long as the global batch stays: ``open_run``)
    RESUME_KEYS = (
        "data", "encoding", "encoding_options", "train_length", "steps", "lr", "min_lr_ratio",
        "warmup", "weight_decay", "grad_clip", "d_model", "n_layers", "n_heads", "init_from", "copy_task", "seed",
    )  # fmt: skip
    #: names of earlier releases, read from old config files
    RENAMED = {"layers": "n_layers", "heads": "n_heads"}

    @property
    def warmup_steps(self) -> int:
        return self.warmup if self.warmup is not None else min(200, self.steps // 10)

    def check(self) -> None:
        for item in fields(self):
            value, limits = getattr(self, item.name), item.metadata.get("limits")
            problem = None if value is None or not limits else out_of_limits(value, limits)
            if problem:
                raise TrainingError(f"--{item.name.replace('_', '-')} {problem} (got {value})")
        if self.warmup is not None and self.warmup >= self.steps:
            raise TrainingError(
                f"--warmup {self.warmup} must be below --steps {self.steps}: the learning rate would never "
                "reach its peak and decay"
            )
        if self.d_model % self.n_heads or (self.d_model // self.n_heads) % 2:
            raise TrainingError(f"--d-model {self.d_model} must split into {self.n_heads} heads of even size")
        self.encoding = canonical_name(self.encoding)  # RoPE is rope; an unknown name: the closest ones
        # unknown options and bad values fail here, before any work, and values out of range in the build
        options = self.encoding_options_resolved()
        build(self.encoding, self.n_heads, self.d_model // self.n_heads, **options)

    def encoding_options_resolved(self) -> dict[str, Any]:
        """Every option of the encoding for this training length, defaults included (``encoding_options``
        overrides them)."""
        return training_options(self.encoding, self.train_length, self.encoding_options)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        data = {cls.RENAMED.get(key, key): value for key, value in data.items()}
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def model_config(config: TrainConfig, vocab_size: int):
    """The model a run trains, its encoding options resolved for the training length."""
    from ltsgen.training.model import ModelConfig

    return ModelConfig(
        vocab_size=vocab_size,
        d_model=config.d_model,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        encoding=config.encoding,
        **config.encoding_options_resolved(),
    )


class _Metrics:
    """RUN/metrics.jsonl, one JSON object per line; on resume, lines past the checkpoint are dropped."""

    def __init__(self, path: Path, resume_step: int | None, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled
        self.logged: list[dict[str, Any]] = []  # the lines kept, parsed
        if not enabled:
            return
        kept = []
        if resume_step is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except ValueError:  # empty, or the half-written last line of a write that failed
                    continue
                if isinstance(record, dict) and record.get("step", 0) <= resume_step:
                    kept.append(line)
                    self.logged.append(record)
        with atomic_path(path) as tmp:
            tmp.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
        self.handle = path.open("a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self.enabled:
            self.handle.write(json.dumps(record, sort_keys=True) + "\n")
            self.handle.flush()

    def close(self) -> None:
        if self.enabled:
            self.handle.close()


def _gather_loader_states(state: dict[str, Any], placement: distributed.Placement) -> list[dict[str, Any]]:
    if not placement.distributed:
        return [state]
    states: list[Any] = [None] * placement.world_size
    dist.all_gather_object(states, state)
    return states


@torch.no_grad()
def validation_loss(
    model: torch.nn.Module, tokens: torch.Tensor, device: torch.device, batch_size: int
) -> float:
    """Mean next-token loss over ``tokens`` [N, L] (L-1 predictions per sequence)."""
    model.eval()
    total, count = 0.0, 0
    for start in range(0, tokens.shape[0], batch_size):
        batch = tokens[start : start + batch_size].to(device)
        with training_precision(device):
            _, loss = model(batch[:, :-1], batch[:, 1:])
        total += float(loss) * batch.shape[0]
        count += batch.shape[0]
    model.train()
    return total / count


def train(
    config: TrainConfig,
    *,
    resume: bool = False,
    stop_after: int | None = None,
    progress: bool = True,
    train_tokenizer: TokenizerTrainer | None = None,
    token_counts: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Train (or continue) the run in ``config.out``; returns the summary (also RUN/train_summary.json).

    Args:
        config: the run.
        resume: continue from RUN/checkpoint.pt (a finished run returns its summary with ``nothing_to_do``).
        stop_after: end this invocation after that many optimizer steps (a checkpoint is written), as a
            time-sliced job would; the schedule still spans ``config.steps``.
        progress: a tqdm bar with loss and tokens/s.
        train_tokenizer: trains a tokenizer when neither ``config.tokenizer`` nor the dataset has one
            (``ltsgen.tokenizer.train_tokenizer``); without it such a run is an error.
        token_counts: the local file that keeps the records' token counts when the text is tokenized on
            the fly (default RUN/token_counts.json; ``compare`` gives its runs one file, counted once).
    """
    config.check()
    placement = distributed.setup(config.device)
    if placement.device.type == "cpu":
        torch.set_flush_denormal(True)  # large negative biases make denormals, which are slow on CPU
    run_dir = Path(config.out)
    claim = None
    with ExitStack() as stack:
        try:
            claim = distributed.main_first(
                placement, lambda: stack.enter_context(claim_folder(run_dir, "run")), run_dir
            )
            counts = Path(token_counts) if token_counts is not None else run_dir / TOKEN_COUNTS_NAME
            return _train(config, placement, resume, stop_after, progress, train_tokenizer, counts)
        except BaseException as error:
            if placement.distributed:
                # free the DDP model that the failed frames hold while the group lives: freed after the
                # teardown, its reducer joins gloo's threads while holding the GIL they wait for (a hang on
                # Ctrl-C, until torchrun kills the rank)
                traceback.clear_frames(error.__traceback__)
                gc.collect()
            if claim is not None:  # the folder is this run's: remove what it wrote, and nothing else
                clean_up_failed_run(claim)
            if isinstance(error, OSError):
                raise file_error(error, run_dir) from None
            raise
        finally:
            distributed.teardown(placement)


def _intact(path: Path) -> bool:
    """Whether a run file reads as the JSON object it was written as (a finished run's ``config.json``, which
    ``evaluate`` reads)."""
    try:
        return isinstance(read_json(path), dict)
    except TrainingError:
        return False


def _train(
    config: TrainConfig, placement, resume, stop_after, progress, train_tokenizer, token_counts: Path
) -> dict[str, Any]:
    run_dir = Path(config.out)
    checkpoint = open_run(run_dir, config, resume, placement)
    finished = (
        checkpoint is not None and checkpoint["step"] == config.steps and (run_dir / SUMMARY_NAME).exists()
    )
    # a finished run whose config.json was damaged has its files written again, as a resume does
    if finished and _intact(run_dir / CONFIG_NAME):
        return {**read_json(run_dir / SUMMARY_NAME), "nothing_to_do": True}
    run = _start(config, placement, checkpoint, train_tokenizer, token_counts)
    end_step = config.steps if stop_after is None else min(config.steps, run.start_step + stop_after)
    meter = _Throughput(config.batch_size * config.train_length * placement.world_size)
    if run.start_step == config.steps:  # killed after its last checkpoint, before its summary:
        meter.take_logged(run.metrics.logged)  # the summary is read from its metrics
    _steps(run, end_step, meter, progress)
    if end_step > run.start_step:
        run.save(end_step)
    run.metrics.close()
    summary = summarise(config, run.model, meter, end_step, placement)
    if placement.is_main and summary["finished"]:
        write_json(run_dir / SUMMARY_NAME, summary)
    return summary


@dataclass
class _Run:
    """A run ready to train from ``start_step``: the model (``runner`` trains it, DDP-wrapped or compiled),
    its optimizer and schedule, the batches, the validation tokens and the metrics file."""

    config: TrainConfig
    placement: Any
    model: torch.nn.Module
    model_cfg: Any
    runner: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: WarmupCosine
    batches: TrainingBatches
    val_tokens: torch.Tensor | None
    metrics: _Metrics
    start_step: int

    def save(self, step: int) -> None:
        """Checkpoint everything a resume needs at ``step`` (every rank's loader state, the main rank writes)."""
        states = _gather_loader_states(self.batches.state_dict(), self.placement)
        out = Path(self.config.out)
        distributed.main_first(self.placement, lambda: save_checkpoint(out / CHECKPOINT_NAME,
            {"step": step, "model": self.model.state_dict(), "optimizer": self.optimizer.state_dict(),
             "scheduler": self.scheduler.state_dict(), "rng": rng_state(), "loader_states": json.dumps(states),
             "model_config": json.dumps(self.model_cfg.to_dict()), "train_config": json.dumps(asdict(self.config))},
        ), out)  # fmt: skip


def _start(config: TrainConfig, placement, checkpoint, train_tokenizer, token_counts: Path) -> _Run:
    """The tokenizer, model, optimizer, schedule and batches of a run, restored from ``checkpoint`` if any;
    the main rank writes RUN/config.json."""
    run_dir = Path(config.out)
    tokenizer, _ = resolve_tokenizer(
        config.data, run_dir, tokenizer_path=config.tokenizer, vocab_size=config.vocab_size,
        placement=placement, train_tokenizer=train_tokenizer,
    )  # fmt: skip
    val_tokens = validation_tokens(config, tokenizer)
    model, model_cfg = build_model(config, tokenizer.get_vocab_size(), checkpoint, placement.device)
    optimizer, scheduler = make_optimizer(model, config, placement.device)
    batches = TrainingBatches(
        config.data, seq_len=config.train_length, batch_size=config.batch_size, seed=config.seed,
        tokenizer=tokenizer, rank=placement.rank, world_size=placement.world_size, token_counts=token_counts,
    )  # fmt: skip
    start_step = (
        0
        if checkpoint is None
        else restore(checkpoint, run_dir / CHECKPOINT_NAME, model, optimizer, scheduler, batches, placement)
    )
    runner = wrap_model(model, config, placement)
    # the vocabulary actually used (the tokenizer's), not the size asked for a tokenizer trained here
    used = {**asdict(config), "vocab_size": tokenizer.get_vocab_size()}
    config_json = {"train": used, "model": model_cfg.to_dict(), "parameters": model.num_parameters(),
                   "world_size": placement.world_size, "tokenizer": "tokenizer.json"}  # fmt: skip
    distributed.main_first(placement, lambda: write_json(run_dir / CONFIG_NAME, config_json), run_dir)
    metrics = _Metrics(run_dir / METRICS_NAME, None if checkpoint is None else start_step, placement.is_main)
    return _Run(config, placement, model, model_cfg, runner, optimizer, scheduler, batches, val_tokens, metrics,
                start_step)  # fmt: skip


def _steps(run: _Run, end_step: int, meter: _Throughput, progress: bool) -> None:
    """Train ``run`` up to ``end_step``: log, validate and checkpoint on their schedules; a loss or gradient
    that stops being finite ends it (``diverged``) at the next of those points."""
    config, placement, model = run.config, run.placement, run.model
    bar = tqdm(total=config.steps, initial=run.start_step, desc=f"train {config.encoding}", unit="step",
               disable=not (progress and placement.is_main), dynamic_ncols=True)  # fmt: skip
    stream = iter(run.batches)
    run.runner.train()
    first_bad = _FirstNonFinite(placement.device)
    for step in range(run.start_step, end_step):
        copy = None
        if config.copy_task:
            copy = copy_rows(config.copy_task, config.train_length, model.config.vocab_size, config.seed, step,
                             placement.rank)  # fmt: skip
        lr = run.scheduler.get_last_lr()[0]  # this step's (train_step moves the schedule on)
        loss, grad_norm = train_step(
            run.runner,
            model,
            run.optimizer,
            run.scheduler,
            next(stream),
            config.grad_clip,
            placement.device,
            copy,
        )
        done = step + 1
        first_bad.update(done, loss, grad_norm)
        meter.count_step()
        at_log = done % config.log_every == 0 or done == config.steps  # as uninterrupted, whatever the stops
        at_eval = run.val_tokens is not None and done % config.eval_every == 0
        at_save = (at_eval or bool(config.checkpoint_every and done % config.checkpoint_every == 0)) and (
            done != end_step
        )
        at_end = done == end_step  # checkpointed after the loop: a stop (--stop-after) is checked too
        if (at_log or at_eval or at_save or at_end) and first_bad.step():
            bar.close()
            diverged(config, model, meter, first_bad.step(), placement, run.metrics)
        record: dict[str, Any] = {"step": done}  # one line per step: its loss and its validation, as due
        if at_log:
            record = meter.record(done, float(distributed.mean_across_ranks(loss, placement)), grad_norm, lr)
            bar.set_postfix(loss=f"{record['loss']:.3f}", tok_s=f"{record['tokens_per_s']:,.0f}")
        bar.update(1)
        if at_eval:
            val = validation_loss(model, run.val_tokens, placement.device, config.batch_size)
            record.update(val_loss=val, val_perplexity=perplexity(val))
            bar.write(f"step {done}: validation loss {val:.4f} (perplexity {perplexity(val):.2f})")
        if at_log or at_eval:
            run.metrics.write(record)
        if at_save:
            run.save(done)
        if at_end and not at_log:  # the summary's last loss, with no metrics line where none is due
            meter.last_loss = float(distributed.mean_across_ranks(loss, placement))
    bar.close()


def open_run(run_dir: Path, config: TrainConfig, resume: bool, placement) -> dict[str, Any] | None:
    """Check the run folder and make it; returns the checkpoint to resume from, or None for a new run.

    A checkpoint without ``resume`` is an error, as is resuming with other settings. Temporary files of an
    interrupted write are removed.
    """
    path = run_dir / CHECKPOINT_NAME
    checkpoint = None
    summary = read_json(run_dir / SUMMARY_NAME) if (run_dir / SUMMARY_NAME).exists() else {}
    if isinstance(summary, dict) and summary.get("diverged"):
        raise DivergedError(
            f"{run_dir / SUMMARY_NAME}: this run diverged at step {summary.get('step')} (its loss was not "
            "finite); resuming repeats it: choose another --out, with a lower --lr"
        )
    if path.exists():
        if not resume:
            raise TrainingError(f"{path}: a run is already there; pass --resume or choose another --out")
        checkpoint = load_checkpoint(path)
        saved_config = TrainConfig.from_dict({"out": config.out, **checkpoint["train_config"]})
        saved = asdict(saved_config)
        changed = [
            key
            for key in TrainConfig.RESUME_KEYS
            if not same_setting(key, saved.get(key), getattr(config, key))
        ]
        if "encoding_options" in changed and saved["encoding"] == config.encoding:
            # options given otherwise that make the same model: "base=1e4", or a default given by hand
            if saved_config.encoding_options_resolved() == config.encoding_options_resolved():
                changed.remove("encoding_options")
        if changed:
            diffs = ", ".join(f"{key}: {saved.get(key)!r} -> {getattr(config, key)!r}" for key in changed)
            raise TrainingError(f"{path}: cannot resume with other settings ({diffs})")
        _check_processes(path, saved, len(checkpoint["loader_states"]), config, placement.world_size)

    def make_folder() -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        remove_temporaries(run_dir)

    distributed.main_first(placement, make_folder, run_dir)
    return checkpoint


def _check_processes(
    path: Path, saved: dict[str, Any], processes: int, config: TrainConfig, world_size: int
) -> None:
    """A run resumes with any number of processes whose batches add up to the same global batch (the data
    order resumes elastically), but with its own number when it adds copy-task rows (drawn per process)."""
    before, now = f"{saved['batch_size']} x {processes}", f"{config.batch_size} x {world_size}"
    if saved["batch_size"] * processes != config.batch_size * world_size:
        raise TrainingError(
            f"{path}: cannot resume with another global batch (--batch-size x processes: {before} -> {now}); "
            "keep their product"
        )
    if config.copy_task and processes != world_size:
        raise TrainingError(
            f"{path}: a run with --copy-task resumes with its own number of processes ({processes}, not "
            f"{world_size}): each draws its own copy rows"
        )


def validation_tokens(config: TrainConfig, tokenizer) -> torch.Tensor | None:
    """The validation sequences at the training length (with ``eval_every``), checked before training."""
    if not config.eval_every:
        return None
    sets = load_eval_sets(config.data, [config.train_length], tokenizer, config.eval_sequences)
    return sets.sets[config.train_length].input_ids


def build_model(config: TrainConfig, vocab_size: int, checkpoint, device: torch.device):
    """The model (seeded), with the checkpoint's config when resuming and the weights of ``init_from``."""
    from ltsgen.training.model import ModelConfig, TransformerLM

    torch.manual_seed(config.seed)
    if checkpoint is not None:
        model_cfg = ModelConfig.from_dict(checkpoint["model_config"])
    else:
        model_cfg = model_config(config, vocab_size)
    model = TransformerLM(model_cfg).to(device)
    if checkpoint is None and config.init_from:
        source = Path(config.init_from) / CHECKPOINT_NAME
        theirs, ours = Path(config.init_from) / TOKENIZER_NAME, Path(config.out) / TOKENIZER_NAME
        if theirs.exists() and ours.exists() and sha256_file(theirs) != sha256_file(ours):
            raise TrainingError(
                f"{theirs}: --init-from's run has another tokenizer than this run's ({ours}): its embeddings "
                "would read every token id as another token; pass --tokenizer " + str(theirs)
            )
        load_weights(model, load_checkpoint(source)["model"], source)
    return model, model_cfg


def make_optimizer(model, config: TrainConfig, device: torch.device):
    """AdamW (``model.configure_optimizer``) and the warm-up + cosine schedule."""
    optimizer = model.configure_optimizer(config.lr, config.weight_decay, BETAS, fused=device.type == "cuda")
    schedule = WarmupCosine(config.warmup_steps, config.steps, config.min_lr_ratio)
    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)


def restore(checkpoint, path: Path, model, optimizer, scheduler, batches, placement) -> int:
    """Load every state of the checkpoint; returns the step it was written at."""
    load_weights(model, checkpoint["model"], path)
    optimizer.load_state_dict(checkpoint["optimizer"])
    scheduler.load_state_dict(checkpoint["scheduler"])
    loader_states = checkpoint["loader_states"]
    try:
        batches.load_state_dict(loader_states[placement.rank % len(loader_states)])
    except ValueError as error:  # e.g. another world size changed the global batch
        raise TrainingError(f"{path}: cannot resume the data order ({error})") from None
    set_rng_state(checkpoint["rng"])
    return checkpoint["step"]


def wrap_model(model, config: TrainConfig, placement) -> torch.nn.Module:
    """What the loop calls: the model, compiled and in DDP as asked."""
    runner = torch.compile(model) if config.compile else model
    if placement.distributed:
        device_ids = [placement.device.index] if placement.device.type == "cuda" else None
        runner = torch.nn.parallel.DistributedDataParallel(runner, device_ids=device_ids)
    return runner


def train_step(
    runner,
    model,
    optimizer,
    scheduler,
    batch: torch.Tensor,
    grad_clip: float,
    device: torch.device,
    copy=None,
):
    """One optimizer step on ``batch`` [B, T + 1], with ``copy`` rows (inputs, targets) in the same forward;
    returns (the text's loss, gradient norm) as tensors."""
    batch = batch.to(device, non_blocking=True)
    with training_precision(device):
        if copy is None:
            _, loss = runner(batch[:, :-1], batch[:, 1:])
            total = loss
        else:
            copy_inputs, copy_targets = (rows.to(device, non_blocking=True) for rows in copy)
            logits = runner(torch.cat([batch[:, :-1], copy_inputs]))
            loss = next_token_loss(logits[: len(batch)], batch[:, 1:])
            total = loss + next_token_loss(logits[len(batch) :], copy_targets)
    total.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.detach().float(), grad_norm


class _FirstNonFinite:
    """The first step whose loss or gradient norm is not finite, kept on the device: ``step()`` reads it (0:
    none), to be called only where the loop waits for the device anyway (logging, validation, checkpoints).
    The same on every rank, whose gradients DDP averages."""

    def __init__(self, device: torch.device) -> None:
        self.first = torch.zeros((), dtype=torch.long, device=device)

    def update(self, step: int, loss: torch.Tensor, grad_norm: torch.Tensor) -> None:
        finite = torch.isfinite(loss) & torch.isfinite(grad_norm)
        self.first = torch.where((self.first == 0) & ~finite, step, self.first)

    def step(self) -> int:
        return int(self.first)


class _Throughput:
    """Tokens per second over each logging window, and the metrics line of a logged step."""

    def __init__(self, tokens_per_step: int) -> None:
        self.tokens_per_step = tokens_per_step
        self.started = self.window_start = time.perf_counter()
        self.window_steps = 0
        self.speeds: list[float] = []
        self.last_loss = math.nan

    def count_step(self) -> None:
        self.window_steps += 1

    def record(self, step: int, loss: float, grad_norm, lr: float) -> dict[str, Any]:
        """The metrics line of ``step``: its loss, learning rate and gradient norm, and the window's speed."""
        now = time.perf_counter()
        speed = self.window_steps * self.tokens_per_step / (now - self.window_start)
        self.speeds.append(speed)
        self.window_start, self.window_steps, self.last_loss = now, 0, loss
        return {"step": step, "loss": loss, "lr": lr, "grad_norm": float(grad_norm),
                "tokens_per_s": speed, "elapsed_s": now - self.started}  # fmt: skip

    def take_logged(self, records: list[dict[str, Any]]) -> None:
        """Take the speeds, last loss and elapsed time of the logged steps of the last invocation that
        trained (its elapsed times rise from its first logged step on)."""
        numbers = ("loss", "tokens_per_s", "elapsed_s")
        logged = [r for r in records if all(isinstance(r.get(key), (int, float)) for key in numbers)]
        start = len(logged) - 1
        while start > 0 and logged[start - 1]["elapsed_s"] < logged[start]["elapsed_s"]:
            start -= 1
        logged = logged[max(start, 0) :]
        self.speeds = [record["tokens_per_s"] for record in logged]
        if logged:
            self.last_loss = logged[-1]["loss"]
            self.started -= logged[-1]["elapsed_s"]

    def median_speed(self) -> float | None:
        # the first window includes start-up work (allocation, compilation): leave it out when others exist
        steady = self.speeds[1:] if len(self.speeds) > 1 else self.speeds
        return sorted(steady)[len(steady) // 2] if steady else None


def diverged(config: TrainConfig, model, meter: _Throughput, step: int, placement, metrics) -> None:
    """Record a run whose loss or gradient norm stopped being finite at ``step`` (no checkpoint of it is
    written), and raise ``DivergedError``."""
    metrics.write({"step": step, "diverged": True})
    metrics.close()
    summary = {**summarise(config, model, meter, step, placement), "finished": False, "diverged": True}
    if placement.is_main:
        write_json(Path(config.out) / SUMMARY_NAME, summary)
    raise DivergedError(
        f"{Path(config.out)}: diverged at step {step}: its loss or gradient norm is not finite; the run is "
        f"stopped (try a lower --lr than {config.lr:g})"
    )


def summarise(config: TrainConfig, model, meter: _Throughput, step: int, placement) -> dict[str, Any]:
    """The run's summary: where it stopped, its last loss and speed, and what its encoding learned."""
    summary = {
        "encoding": config.encoding,
        "train_length": config.train_length,
        "seed": config.seed,
        "step": step,
        "finished": step == config.steps,
        "last_loss": meter.last_loss,
        "tokens_per_s": meter.median_speed(),
        "wall_s": time.perf_counter() - meter.started,
        "parameters": model.num_parameters(),
        "world_size": placement.world_size,
        "device": str(placement.device),
    }
    learned = model.learned_encoding_values()
    if any(learned):
        summary["learned"] = learned  # one entry per layer, or one shared by every layer:
        summary["learned_shared"] = model.encodings[0].shared_across_layers
    return summary
