"""Evaluation of a trained run at many lengths: perplexity, per-position loss, attention entropy, facts.

A sequence of L tokens gives L-1 next-token predictions; the loss at length L is their mean over the
evaluation set and the perplexity is ``exp`` of it. Long sequences are evaluated in batches sized by a
token budget (the model itself computes attention in blocks of query rows), so 8,192 tokens fit in memory.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import math
import threading
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ltsgen.loaders.contract import TOKENIZER_NAME, atomic_path
from ltsgen.training.checkpoint import CHECKPOINT_NAME, load_checkpoint
from ltsgen.training.data import EvalSet, load_eval_sets
from ltsgen.training.distributed import resolve_device
from ltsgen.training.errors import TrainingError
from ltsgen.training.train import SCALED_ENCODINGS

EVAL_NAME = "eval.json"
CURVE_POINTS = 128  # the per-position loss curve is kept as the mean over this many equal windows
FACT_BIN_EDGES = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)


class EvaluateError(TrainingError):
    """A run or dataset that cannot be evaluated; the message names the file."""


class PeakMemory:
    """Peak memory of a block of work, in MiB.

    CUDA: the allocator's peak of allocated memory. CPU: the peak resident set size above the level at the
    start, sampled every 2 ms by a thread (freed heap memory is returned to the system first, so earlier
    work does not hide this block's peak).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.peak_mib = 0.0

    def __enter__(self) -> PeakMemory:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            return self
        _release_free_heap()
        self._base = self._peak = _rss_bytes()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.002):
            self._peak = max(self._peak, _rss_bytes())

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak_mib = torch.cuda.max_memory_allocated(self.device) / 2**20
            return
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, _rss_bytes())
        self.peak_mib = (self._peak - self._base) / 2**20


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * _PAGE_SIZE


_PAGE_SIZE = 4096
try:  # glibc: give freed heap pages back to the system
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc
    _LIBC = None


def _release_free_heap() -> None:
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


def load_run(run_dir):
    """RUN's model config (a dict), trained weights, config.json (with the step reached) and tokenizer."""
    from ltsgen.tokenizer import load_tokenizer

    run_dir = Path(run_dir)
    config_path = run_dir / "config.json"
    if not config_path.exists():
        raise EvaluateError(f"{config_path}: not found (is {run_dir} a training run?)")
    config = json.loads(config_path.read_text(encoding="utf-8"))
    checkpoint = load_checkpoint(run_dir / CHECKPOINT_NAME)
    config["step"] = int(checkpoint["step"])
    model_config = json.loads(checkpoint["model_config"])
    return model_config, checkpoint["model"], config, load_tokenizer(str(run_dir / TOKENIZER_NAME))


def build_model(model_config: dict, weights: dict, device: torch.device, length: int) -> torch.nn.Module:
    """The trained model, set up to read ``length`` tokens.

    RoPE-PI and YaRN are trained at scale 1 (plain RoPE); beyond their training length they are evaluated
    zero-shot with ``factor = length / training length``, as the FIRE paper compares them.
    """
    from ltsgen.training.model import ModelConfig, TransformerLM

    config = ModelConfig.from_dict(model_config)
    if config.encoding in SCALED_ENCODINGS:
        original = int(config.encoding_options["original_length"])
        config.encoding_options["factor"] = max(1.0, length / original)
    model = TransformerLM(config)
    model.load_state_dict(weights)
    return model.to(device).eval()


@torch.no_grad()
def token_losses(model: torch.nn.Module, tokens: torch.Tensor, device: torch.device, batch_size: int):
    """Next-token loss of every prediction: [N, L-1] float32 on the CPU."""
    out = []
    for start in range(0, tokens.shape[0], batch_size):
        batch = tokens[start : start + batch_size].to(device)
        with (
            torch.autocast("cuda", dtype=torch.bfloat16)
            if device.type == "cuda"
            else contextlib.nullcontext()
        ):
            logits = model(batch[:, :-1])
        losses = F.cross_entropy(logits.float().transpose(1, 2), batch[:, 1:], reduction="none")
        out.append(losses.cpu())
        del logits
    return torch.cat(out)


@torch.no_grad()
def attention_entropy(model: torch.nn.Module, tokens: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Mean attention entropy [n_layers, n_heads] (nats) over ``tokens``, one sequence at a time."""
    total = None
    for row in tokens:
        entropy = model.attention_entropy(row[None].to(device)).float().cpu()
        total = entropy if total is None else total + entropy
    return total / tokens.shape[0]


def per_position_curve(losses: torch.Tensor, points: int = CURVE_POINTS) -> dict[str, list[float]]:
    """Mean loss by position, averaged over ``points`` equal windows: {"position": centres, "loss": means}."""
    by_position = losses.mean(dim=0)
    windows = torch.tensor_split(torch.arange(by_position.numel()), min(points, by_position.numel()))
    return {
        "position": [float(w.float().mean()) for w in windows],
        "loss": [float(by_position[w].mean()) for w in windows],
    }


def facts_by_distance(losses: torch.Tensor, facts: list[list[tuple[int, int]]]) -> list[dict[str, Any]]:
    """Loss on the tokens of long-range facts' later uses, grouped by distance to the first mention."""
    sums: dict[int, list[float]] = {}
    for row, positions in enumerate(facts):
        for position, distance in positions:
            if position < 1:
                continue
            edge = max(i for i, lo in enumerate(FACT_BIN_EDGES) if lo <= distance)
            entry = sums.setdefault(edge, [0.0, 0])
            entry[0] += float(losses[row, position - 1])
            entry[1] += 1
    return [
        {
            "distance_lo": FACT_BIN_EDGES[edge],
            "distance_hi": FACT_BIN_EDGES[edge + 1] if edge + 1 < len(FACT_BIN_EDGES) else None,
            "loss": total / count,
            "tokens": count,
        }
        for edge, (total, count) in sorted(sums.items())
    ]


def evaluate_length(
    model, eval_set: EvalSet, device: torch.device, *, batch_tokens: int, entropy_sequences: int
):
    """Every number for one evaluation length (see the module docstring)."""
    length = eval_set.length
    count = eval_set.input_ids.shape[0]
    result: dict[str, Any] = {
        "eval_length": length,
        "num_sequences": count,
        "description": eval_set.description,
    }
    if count == 0:
        return result
    started = time.perf_counter()
    with PeakMemory(device) as memory:
        losses = token_losses(model, eval_set.input_ids, device, max(1, batch_tokens // length))
        entropy = attention_entropy(model, eval_set.input_ids[:entropy_sequences], device)
    loss = float(losses.double().mean())
    result.update(
        loss=loss,
        perplexity=math.exp(loss),
        tokens=int(losses.numel()),
        attention_entropy=float(entropy.mean()),
        attention_entropy_per_layer=[float(v) for v in entropy.mean(dim=1)],
        per_position=per_position_curve(losses),
        peak_memory_mib=memory.peak_mib,
        seconds=time.perf_counter() - started,
    )
    if eval_set.facts:
        result["facts"] = facts_by_distance(losses, eval_set.facts)
    return result


def evaluate_run(
    run_dir,
    data_dir,
    lengths: list[int],
    *,
    max_sequences: int = 32,
    batch_tokens: int = 16384,
    entropy_sequences: int = 4,
    device: str = "auto",
    progress: bool = True,
) -> dict[str, Any]:
    """Evaluate RUN on DIR at each length; writes and returns RUN/eval.json."""
    resolved = resolve_device(device)
    model_config, weights, config, tokenizer = load_run(run_dir)
    lengths = sorted(set(lengths))
    sets = load_eval_sets(data_dir, lengths, tokenizer, max_sequences)
    results = []
    for length in tqdm(
        lengths, desc=f"evaluate {config['train']['encoding']}", unit="length", disable=not progress
    ):
        model = build_model(model_config, weights, resolved, length)
        results.append(
            evaluate_length(
                model, sets[length], resolved, batch_tokens=batch_tokens, entropy_sequences=entropy_sequences
            )
        )
    report = {
        "run": str(run_dir),
        "data": str(data_dir),
        "encoding": config["train"]["encoding"],
        "train_length": config["train"]["train_length"],
        "step": config["step"],
        "parameters": config.get("parameters"),
        "device": str(resolved),
        "results": results,
    }
    with atomic_path(Path(run_dir) / EVAL_NAME) as tmp:
        tmp.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return report
