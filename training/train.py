"""The training loop: AdamW, warm-up + cosine decay, gradient clipping, exact resume, DDP under torchrun.

One process trains alone; under ``torchrun`` every rank reads its own slice of each global batch
(``ltsgen.loaders`` splits by rank) and DDP averages the gradients. A checkpoint holds the model,
optimizer, scheduler, random generators and loader state, so ``resume=True`` continues the very run
that was interrupted: same batches, same losses.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from tqdm import tqdm

from ltsgen.encodings import PositionEncoding
from ltsgen.loaders.contract import atomic_path
from ltsgen.training import distributed
from ltsgen.training.checkpoint import (
    CHECKPOINT_NAME,
    load_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from ltsgen.training.data import TrainingBatches, load_eval_sets, resolve_tokenizer
from ltsgen.training.errors import TrainingError
from ltsgen.training.schedule import WarmupCosine

CONFIG_NAME = "config.json"
METRICS_NAME = "metrics.jsonl"
SUMMARY_NAME = "train_summary.json"
SCALED_ENCODINGS = ("rope_pi", "yarn")  # trained at factor 1; rescaled by evaluation length / training length


class TrainError(TrainingError):
    """A training run that cannot start or continue; the message names the file or option."""


@dataclass
class TrainConfig:
    """Everything that defines a run (saved as RUN/config.json)."""

    data: str
    out: str
    encoding: str = "rope"
    train_length: int = 128
    steps: int = 1000
    batch_size: int = 16  # sequences per process and step
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup: int | None = None  # default: 10% of the steps, at most 200
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    d_model: int = 128
    layers: int = 4
    heads: int = 4
    vocab_size: int = 2048  # only used when a tokenizer has to be trained
    tokenizer: str | None = None
    seed: int = 0
    device: str = "auto"
    compile: bool = False
    eval_every: int = 0  # validation loss at the training length every N steps (0: never)
    eval_sequences: int = 16
    checkpoint_every: int = 0  # 0: only at the end (and with every validation)
    log_every: int = 10

    @property
    def warmup_steps(self) -> int:
        return self.warmup if self.warmup is not None else min(200, self.steps // 10)

    def check(self) -> None:
        for name in ("train_length", "steps", "batch_size", "d_model", "layers", "heads", "log_every"):
            if getattr(self, name) < 1:
                raise TrainError(f"--{name.replace('_', '-')} must be at least 1 (got {getattr(self, name)})")
        if self.d_model % self.heads or (self.d_model // self.heads) % 2:
            raise TrainError(f"--d-model {self.d_model} must split into {self.heads} heads of even size")
        if self.lr <= 0:
            raise TrainError(f"--lr must be positive (got {self.lr})")

    # the settings that must match when resuming (the rest may change, e.g. the device)
    RESUME_KEYS = (
        "data", "encoding", "train_length", "steps", "batch_size", "lr", "min_lr_ratio", "warmup",
        "weight_decay", "grad_clip", "d_model", "layers", "heads", "seed",
    )  # fmt: skip

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


def model_config(config: TrainConfig, vocab_size: int):
    """The model a run trains (RoPE-PI and YaRN train at scale 1: they only rescale when evaluated longer)."""
    from ltsgen.training.model import ModelConfig

    options = (
        {"factor": 1.0, "original_length": config.train_length} if config.encoding in SCALED_ENCODINGS else {}
    )
    return ModelConfig(
        vocab_size=vocab_size,
        d_model=config.d_model,
        n_layers=config.layers,
        n_heads=config.heads,
        encoding=config.encoding,
        **options,
    )


def _param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """Decay matrices (weights, embeddings); leave gains, biases and every position-encoding parameter
    alone (decay would pull a T5 table towards zero and APE's frequencies back towards plain RoPE)."""
    encoding_params = {
        id(param)
        for module in model.modules()
        if isinstance(module, PositionEncoding)
        for param in module.parameters()
    }
    decay, no_decay = [], []
    for param in model.parameters():
        if param.requires_grad:
            wanted = param.dim() >= 2 and id(param) not in encoding_params
            (decay if wanted else no_decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _autocast(device: torch.device):
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


class _Metrics:
    """RUN/metrics.jsonl, one JSON object per line; on resume, lines past the checkpoint are dropped."""

    def __init__(self, path: Path, resume_step: int | None, enabled: bool) -> None:
        self.path = path
        self.enabled = enabled
        if not enabled:
            return
        kept = []
        if resume_step is not None and path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                if line.strip() and json.loads(line).get("step", 0) <= resume_step:
                    kept.append(line)
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


def _write_json(path: Path, data: dict[str, Any]) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


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
        with _autocast(device):
            _, loss = model(batch[:, :-1], batch[:, 1:])
        total += float(loss) * batch.shape[0]
        count += batch.shape[0]
    model.train()
    return total / count


def train(config: TrainConfig, *, resume: bool = False, stop_after: int | None = None, progress: bool = True):
    """Train (or continue) the run in ``config.out``; returns the summary dict (also RUN/train_summary.json).

    ``stop_after`` ends this invocation after that many optimizer steps (a checkpoint is written), as a
    time-sliced job would; the schedule still spans ``config.steps``.
    """
    config.check()
    placement = distributed.setup(config.device)
    if placement.device.type == "cpu":
        torch.set_flush_denormal(True)  # large negative biases make denormals, which are slow on CPU
    try:
        return _train(config, placement, resume, stop_after, progress)
    finally:
        distributed.teardown(placement)


def _train(config: TrainConfig, placement, resume: bool, stop_after: int | None, progress: bool):
    from ltsgen.tokenizer import eos_id
    from ltsgen.training.model import ModelConfig, TransformerLM

    run_dir = Path(config.out)
    checkpoint_path = run_dir / CHECKPOINT_NAME
    checkpoint = None
    if checkpoint_path.exists():
        if not resume:
            raise TrainError(
                f"{checkpoint_path}: a run is already there; pass --resume or choose another --out"
            )
        checkpoint = load_checkpoint(checkpoint_path)
        saved = json.loads(checkpoint["train_config"])
        changed = [key for key in TrainConfig.RESUME_KEYS if saved.get(key) != getattr(config, key)]
        if changed:
            diffs = ", ".join(f"{key}: {saved.get(key)!r} -> {getattr(config, key)!r}" for key in changed)
            raise TrainError(f"{checkpoint_path}: cannot resume with other settings ({diffs})")
    if placement.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    distributed.barrier(placement)

    tokenizer, _ = resolve_tokenizer(
        config.data,
        run_dir,
        tokenizer_path=config.tokenizer,
        vocab_size=config.vocab_size,
        placement=placement,
    )
    torch.manual_seed(config.seed)
    if checkpoint is not None:
        model_cfg = ModelConfig.from_dict(json.loads(checkpoint["model_config"]))
    else:
        model_cfg = model_config(config, tokenizer.get_vocab_size())
    raw_model = TransformerLM(model_cfg).to(placement.device)
    optimizer = torch.optim.AdamW(
        _param_groups(raw_model, config.weight_decay),
        lr=config.lr,
        betas=(0.9, 0.95),
        fused=placement.device.type == "cuda",
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, WarmupCosine(config.warmup_steps, config.steps, config.min_lr_ratio)
    )
    batches = TrainingBatches(
        config.data,
        seq_len=config.train_length,
        batch_size=config.batch_size,
        seed=config.seed,
        tokenizer=tokenizer,
        eos=eos_id(tokenizer),
        rank=placement.rank,
        world_size=placement.world_size,
    )
    start_step = 0
    if checkpoint is not None:
        raw_model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        scheduler.load_state_dict(checkpoint["scheduler"])
        loader_states = json.loads(checkpoint["loader_states"])
        try:
            batches.load_state_dict(loader_states[placement.rank % len(loader_states)])
        except ValueError as error:  # e.g. another world size changed the global batch
            raise TrainError(f"{checkpoint_path}: cannot resume the data order ({error})") from None
        set_rng_state(checkpoint["rng"])
        start_step = int(checkpoint["step"])

    model: torch.nn.Module = raw_model
    if config.compile:
        model = torch.compile(model)
    if placement.distributed:
        model = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[placement.device.index] if placement.device.type == "cuda" else None
        )

    val_tokens = None
    if config.eval_every:
        sets = load_eval_sets(config.data, [config.train_length], tokenizer, config.eval_sequences)
        val_tokens = sets[config.train_length].input_ids

    parameters = sum(p.numel() for p in raw_model.parameters())
    if placement.is_main:
        _write_json(
            run_dir / CONFIG_NAME,
            {"train": asdict(config), "model": model_cfg.to_dict(), "parameters": parameters,
             "world_size": placement.world_size, "tokenizer": "tokenizer.json"},
        )  # fmt: skip
    metrics = _Metrics(
        run_dir / METRICS_NAME, start_step if checkpoint is not None else None, placement.is_main
    )

    def save(step: int) -> None:
        states = _gather_loader_states(batches.state_dict(), placement)
        if placement.is_main:
            save_checkpoint(
                checkpoint_path,
                {"step": step, "model": raw_model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "rng": rng_state(),
                 "loader_states": json.dumps(states), "model_config": json.dumps(model_cfg.to_dict()),
                 "train_config": json.dumps(asdict(config))},
            )  # fmt: skip
        distributed.barrier(placement)

    end_step = config.steps if stop_after is None else min(config.steps, start_step + stop_after)
    tokens_per_step = config.batch_size * config.train_length * placement.world_size
    bar = tqdm(
        total=config.steps,
        initial=start_step,
        desc=f"train {config.encoding}",
        unit="step",
        disable=not (progress and placement.is_main),
        dynamic_ncols=True,
    )
    speeds: list[float] = []
    last_loss = math.nan
    started = time.perf_counter()
    window_start, window_steps = time.perf_counter(), 0
    model.train()
    stream = iter(batches)
    for step in range(start_step, end_step):
        batch = next(stream).to(placement.device, non_blocking=True)
        with _autocast(placement.device):
            _, loss = model(batch[:, :-1], batch[:, 1:])
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(raw_model.parameters(), config.grad_clip)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        window_steps += 1
        done = step + 1
        if done % config.log_every == 0 or done == end_step:
            last_loss = float(distributed.mean_across_ranks(loss.detach().float(), placement))
            elapsed = time.perf_counter() - window_start
            speed = window_steps * tokens_per_step / elapsed
            speeds.append(speed)
            metrics.write(
                {"step": done, "loss": last_loss, "lr": scheduler.get_last_lr()[0],
                 "grad_norm": float(grad_norm), "tokens_per_s": speed,
                 "elapsed_s": time.perf_counter() - started}
            )  # fmt: skip
            bar.set_postfix(loss=f"{last_loss:.3f}", tok_s=f"{speed:,.0f}")
            window_start, window_steps = time.perf_counter(), 0
        bar.update(1)
        at_eval = bool(config.eval_every) and done % config.eval_every == 0
        at_checkpoint = bool(config.checkpoint_every) and done % config.checkpoint_every == 0
        if at_eval and val_tokens is not None:
            val = validation_loss(raw_model, val_tokens, placement.device, config.batch_size)
            metrics.write({"step": done, "val_loss": val, "val_perplexity": math.exp(val)})
            bar.write(f"step {done}: validation loss {val:.4f} (perplexity {math.exp(val):.2f})")
        if (at_eval or at_checkpoint) and done != end_step:
            save(done)
    bar.close()
    wall = time.perf_counter() - started
    if end_step > start_step:
        save(end_step)
    metrics.close()
    # the first window includes start-up work (allocation, compilation): leave it out when others exist
    steady = speeds[1:] if len(speeds) > 1 else speeds
    summary = {
        "encoding": config.encoding,
        "step": end_step,
        "finished": end_step == config.steps,
        "last_loss": last_loss,
        "tokens_per_s": sorted(steady)[len(steady) // 2] if steady else None,
        "wall_s": wall,
        "parameters": parameters,
        "world_size": placement.world_size,
        "device": str(placement.device),
    }
    if placement.is_main and summary["finished"]:
        _write_json(run_dir / SUMMARY_NAME, summary)
    return summary
