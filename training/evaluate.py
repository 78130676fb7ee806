"""Evaluation of a trained run at many lengths: perplexity, per-position loss, attention entropy, cued recall.

Every length reads the same documents (sequence i at length L is the first L tokens of document i), so the
numbers change with length alone. A sequence of L tokens gives L-1 next-token predictions; the loss at
length L is their mean over the set and the perplexity is ``exp`` of it. Evaluation runs in float32 by
default. Long sequences are evaluated in batches sized by a token budget (the model attends in blocks of
query rows), so 8,192 tokens fit in memory.

Beside perplexity, each length has the same-token extrapolation penalty (``ltsgen.training.extrapolation``),
the unigram loss of the tokens it scores (the baseline a trained model must beat) and, per document, the
values the report resamples for its intervals. Attention entropy is measured on every sequence unless asked
for fewer.
"""

from __future__ import annotations

import ctypes
import math
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from tqdm import tqdm

from ltsgen.encodings import NAMES, rescaled, shares_weights, trained_as, training_options
from ltsgen.loaders.contract import TOKENIZER_NAME
from ltsgen.training.checkpoint import load_checkpoint, load_weights
from ltsgen.training.data import (
    EvalSet,
    EvalSets,
    check_tokenizer_matches,
    first_source,
    load_eval_sets,
    read_tokenizer,
)
from ltsgen.training.distributed import resolve_device
from ltsgen.training.errors import TrainingError
from ltsgen.training.extrapolation import same_token_losses, unigram_log_probs, unigram_loss
from ltsgen.training.precision import EVAL_DTYPES, eval_precision
from ltsgen.training.recall import recall_scores, top1_correct, window_set
from ltsgen.training.rundir import (
    CHECKPOINT_NAME,
    CONFIG_NAME,
    SUMMARY_NAME,
    eval_name,
    read_record,
    write_json,
)

_LARGEST_EXPONENT = math.log(sys.float_info.max)  # beyond it, exp(loss) is not a float: the perplexity is inf
CURVE_POINTS = 128  # the per-position loss curve is kept as the mean over this many equal windows


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
    run_dir = Path(run_dir)
    config_path = run_dir / CONFIG_NAME
    if not config_path.exists():
        raise TrainingError(f"{config_path}: not found (is {run_dir} a training run?)")
    config = read_record(config_path, {"train": dict})
    if not isinstance(config["train"].get("train_length"), int):
        raise TrainingError(f"{config_path}: damaged, 'train' has no integer 'train_length'")
    summary_path = run_dir / SUMMARY_NAME
    if summary_path.exists() and read_record(summary_path, {}).get("diverged"):
        raise TrainingError(
            f"{summary_path}: this run diverged (its loss was not finite); nothing to evaluate"
        )
    checkpoint = load_checkpoint(run_dir / CHECKPOINT_NAME)
    config["step"] = checkpoint["step"]
    return checkpoint["model_config"], checkpoint["model"], config, read_tokenizer(run_dir / TOKENIZER_NAME)


def as_encoding(
    model_config: dict[str, Any], encoding: str, train_length: int, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The model config of a run read as ``encoding``, another encoding that reads the same trained weights
    (``ltsgen.encodings.trained_as``: RoPE, RoPE-PI or YaRN at its training scale, with ``overrides`` of its
    options): the weights are the same, only the rescaling beyond the training length differs."""
    trained = model_config["encoding"]
    options = model_config.get("encoding_options", {})
    sharing = [name for name in NAMES if shares_weights(name)]
    if (
        trained not in sharing
        or encoding not in sharing
        or trained_as(trained) != trained_as(encoding)
        or options.get("factor", 1.0) != 1.0
    ):
        raise TrainingError(
            f"a {trained} run can be evaluated as another encoding only within {', '.join(sharing)} and "
            f"at training factor 1 (asked: {encoding})"
        )
    base = {"base": options["base"]} if "base" in options else {}
    return {
        **model_config,
        "encoding": encoding,
        "encoding_options": training_options(encoding, train_length, {**base, **(overrides or {})}),
    }


def build_model(
    model_config: dict, weights: dict, device: torch.device, source: Path = Path(CHECKPOINT_NAME)
) -> torch.nn.Module:
    """The trained model on ``device``, in evaluation mode (call ``set_eval_length`` before each length);
    ``source``: the checkpoint the weights come from, named by errors."""
    from ltsgen.training.model import ModelConfig, TransformerLM

    model = TransformerLM(ModelConfig.from_dict(model_config))
    load_weights(model, weights, source)
    return model.to(device).eval()


@torch.no_grad()
def token_scores(
    model: torch.nn.Module, tokens: torch.Tensor, device: torch.device, batch_size: int, dtype: str
) -> tuple[torch.Tensor, torch.Tensor]:
    """Next-token loss and top-1 correctness of every prediction: two [N, L-1] tensors on the CPU."""
    losses, correct = [], []
    for start in range(0, tokens.shape[0], batch_size):
        batch = tokens[start : start + batch_size].to(device)
        with eval_precision(device, dtype):
            logits = model(batch[:, :-1])
        targets = batch[:, 1:]
        losses.append(F.cross_entropy(logits.float().transpose(1, 2), targets, reduction="none").cpu())
        correct.append(top1_correct(logits, batch).cpu())
        del logits
    return torch.cat(losses), torch.cat(correct)


@torch.no_grad()
def attention_entropy(
    model: torch.nn.Module, tokens: torch.Tensor, device: torch.device, dtype: str
) -> torch.Tensor:
    """Attention entropy [N, n_layers, n_heads, L] (nats) of every query position of each of ``tokens``, one
    sequence at a time."""
    rows = []
    for row in tokens:
        with eval_precision(device, dtype):
            rows.append(model.attention_entropy_by_position(row[None].to(device)).float().cpu())
    return torch.stack(rows)


def per_position_curve(losses: torch.Tensor, points: int = CURVE_POINTS) -> dict[str, list[float]]:
    """Mean loss by position, averaged over ``points`` equal windows: {"position": centres, "loss": means}."""
    by_position = losses.mean(dim=0)
    windows = torch.tensor_split(torch.arange(by_position.numel()), min(points, by_position.numel()))
    return {
        "position": [float(w.float().mean()) for w in windows],
        "loss": [float(by_position[w].mean()) for w in windows],
    }


def recall_results(
    model, eval_set: EvalSet, correct: torch.Tensor, device: torch.device, *, train_length: int, batch_size: int,
    dtype: str,
) -> dict[str, Any]:  # fmt: skip
    """Cued recall accuracy beside its control (``ltsgen.training.recall``); ``correct`` is the set's own."""
    recalls = eval_set.recalls
    control_correct = correct[:0]
    if recalls.recalls:
        _, control_correct = token_scores(model, recalls.control_ids, device, batch_size, dtype)
    return recall_scores(recalls, correct, control_correct, train_length)


def perplexity(loss: float) -> float:
    """``exp(loss)``, or ``inf`` where that is beyond the largest float (a loss over ~709.8 nats)."""
    return math.exp(loss) if loss < _LARGEST_EXPONENT else math.inf


def window_results(
    model, eval_set: EvalSet, device: torch.device, *, train_length: int, batch_tokens: int, dtype: str
) -> dict[str, Any]:
    """Cued recall beside its control with each recall in its own training-length window (the value's
    nearest earlier occurrence inside it): the skill as trained, at positions every encoding has seen."""
    windows = window_set(eval_set.recalls, eval_set.input_ids, train_length)
    model.set_eval_length(train_length)
    batch_size = max(1, batch_tokens // train_length)
    correct = control = torch.zeros(0, train_length - 1, dtype=torch.bool)
    if windows.documents:
        _, correct = token_scores(model, windows.input_ids, device, batch_size, dtype)
        _, control = token_scores(model, windows.recalls.control_ids, device, batch_size, dtype)
    return recall_scores(
        windows.recalls, correct, control, train_length, windows.documents, eval_set.input_ids.shape[0]
    )


def evaluate_length(
    model, eval_set: EvalSet, device: torch.device, *, train_length: int, batch_tokens: int,
    entropy_sequences: int | None, dtype: str, window_stride: int = 1, unigram: torch.Tensor | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Every number for one evaluation length (see the module docstring); ``per_document`` holds the values
    of each sequence that the report's intervals and tests resample. ``unigram``: the log-probabilities of
    the unigram baseline (``unigram_log_probs``; default: fitted on this set's tokens)."""
    length = eval_set.length
    started = time.perf_counter()
    model.set_eval_length(length)
    tokens = eval_set.input_ids
    with PeakMemory(device) as memory:
        losses, correct = token_scores(model, tokens, device, max(1, batch_tokens // length), dtype)
        entropy = attention_entropy(model, tokens[:entropy_sequences], device, dtype)
        full, window, positions = same_token_losses(
            model, tokens, losses, train_length, window_stride, device, batch_tokens, dtype
        )
    loss = float(losses.double().mean())
    last = entropy[..., -min(train_length, length) :].mean(dim=(1, 2, 3))
    result: dict[str, Any] = {
        "eval_length": length,
        "num_sequences": tokens.shape[0],
        "documents": eval_set.documents,
        "loss": loss,
        "perplexity": perplexity(loss),
        "tokens": int(losses.numel()),
        "same_token_loss_full": float(full.mean()),
        "same_token_loss_window": float(window.mean()),
        "extrapolation_penalty": float((full - window).mean()),
        "same_token_positions": len(positions),
        "unigram_loss": unigram_loss(
            unigram_log_probs(tokens) if unigram is None else unigram, tokens[:, positions]
        ),
        "entropy_sequences": entropy.shape[0],
        "attention_entropy": float(entropy.mean()),
        "attention_entropy_last": float(last.mean()),
        "attention_entropy_per_layer": [float(v) for v in entropy.mean(dim=(0, 2, 3))],
        "per_position": per_position_curve(losses),
        "per_document": {
            "loss": losses.double().mean(dim=1).tolist(),
            "same_token_loss_full": full.tolist(),
            "same_token_loss_window": window.tolist(),
            "extrapolation_penalty": (full - window).tolist(),
            "attention_entropy_last": last.double().tolist(),
        },
        "peak_memory_mib": memory.peak_mib,
        "seconds": time.perf_counter() - started,
    }
    if eval_set.recalls is not None:
        model.set_eval_length(length)  # the controls read as the recalls did (the windows reset it to T)
        recalls = recall_results(model, eval_set, correct, device, train_length=train_length,
                                 batch_size=max(1, batch_tokens // length), dtype=dtype)  # fmt: skip
        result["per_document"].update(recalls.pop("per_document"))
        result.update(recalls)
    return result


def evaluate_run(
    run_dir,
    data_dir,
    lengths: list[int],
    *,
    max_sequences: int = 32,
    batch_tokens: int = 16384,
    entropy_sequences: int | None = None,
    window_stride: int = 1,
    eval_concat: bool = False,
    device: str = "auto",
    eval_dtype: str = "float32",
    encoding: str | None = None,
    encoding_options: dict[str, Any] | None = None,
    window_length: int | None = None,
    documents_length: int | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Evaluate RUN on DIR at each length; writes and returns RUN/eval.json.

    Args:
        run_dir, data_dir: the run (from ``train``) and the dataset to evaluate on.
        lengths: evaluation lengths in tokens.
        max_sequences: documents per length (the same documents at every length).
        batch_tokens: tokens per evaluation batch.
        entropy_sequences: sequences whose attention entropy is measured per length (None: all).
        window_stride: score every n-th of the last T tokens for the extrapolation penalty (1: all of them;
            see ``ltsgen.training.extrapolation``).
        eval_concat: read the bucket pipeline's concatenated held-out stream (``DIR/eval_concat/<max L>/``)
            instead of documents (see ``load_eval_sets``).
        device: ``auto``, ``cpu``, ``cuda``, ...
        eval_dtype: ``float32`` (the default: bias and softmax at full precision) or ``bfloat16`` autocast.
        encoding: evaluate a RoPE-family run as ``rope_pi`` or ``yarn`` (zero-shot rescaling of the same
            weights); the result goes to RUN/eval-<encoding>.json.
        encoding_options: options of ``encoding`` (YaRN's ``beta_fast``, ...); its defaults otherwise.
        window_length: T of the window that the penalty, the last-T-queries entropy and the windowed recalls
            use (default: the run's training length; for a run fine-tuned at a longer length, the comparison's
            T, so that its penalty is measured as the others' are).
        documents_length: choose the documents, and fit the unigram baseline, as for this longer length
            (a comparison's longest, for a run it evaluates at fewer lengths: a fine-tune), so that the run
            is read on the same documents as the others and pairs with them document by document.
        progress: a progress bar over lengths.
        log: where the notice goes when fewer documents than asked reach the longest length.

    Returns:
        The content of the eval file: run, data, encoding (its options, and those asked of ``encoding``),
        train_length, window_length, step, documents, notice and one entry of ``results`` per length.
    """
    _check_settings(window_stride, eval_dtype)
    resolved = resolve_device(device)
    run_dir = Path(run_dir)
    model_config, weights, config, tokenizer = load_run(run_dir)
    check_tokenizer_matches(first_source(data_dir), run_dir / TOKENIZER_NAME)
    train_length = config["train"]["train_length"]
    trained = model_config["encoding"]
    if encoding is not None and encoding != trained:
        model_config = as_encoding(model_config, encoding, train_length, encoding_options)
        asked = dict(encoding_options or {})
    else:
        encoding, asked = None, {}
    if documents_length is not None and documents_length < max(lengths):
        raise TrainingError(f"documents_length {documents_length} is below the longest length {max(lengths)}")
    chosen = sorted({*lengths, documents_length or max(lengths)})
    sets = load_eval_sets(data_dir, chosen, tokenizer, max_sequences, concat=eval_concat)
    if sets.notice:
        log(f"{run_dir}: {sets.notice}")
    model = build_model(model_config, weights, resolved, run_dir / CHECKPOINT_NAME)
    window = train_length if window_length is None else window_length
    scoring = dict(train_length=window, batch_tokens=batch_tokens, entropy_sequences=entropy_sequences,
                   dtype=eval_dtype, window_stride=window_stride)  # fmt: skip
    results = _evaluate_lengths(
        model, sets, sorted(set(lengths)), resolved, scoring, f"evaluate {model_config['encoding']}", progress
    )
    report = {"run": str(run_dir), "data": str(data_dir), "encoding": model_config["encoding"], "trained_as": trained,
              "encoding_options": model_config.get("encoding_options", {}), "options_asked": asked,
              "scaling": scaling(model_config), "train_length": train_length, "window_length": window,
              "step": config["step"], "documents_length": chosen[-1],
              "parameters": config.get("parameters"), "device": str(resolved), "eval_dtype": eval_dtype,
              "documents_from": sets.description, "requested_sequences": max_sequences,
              "requested_entropy_sequences": entropy_sequences, "window_stride": window_stride,
              "eval_concat": eval_concat, "notice": sets.notice, "results": results}  # fmt: skip
    longest = sets.sets[max(sets.sets)]
    if longest.recalls is not None:
        report["recall_window"] = window_results(
            model, longest, resolved, train_length=window, batch_tokens=batch_tokens, dtype=eval_dtype
        )
    write_json(run_dir / eval_name(encoding), report)
    return report


def _check_settings(window_stride: int, eval_dtype: str) -> None:
    if window_stride < 1:
        raise TrainingError(f"--window-stride must be at least 1 (got {window_stride})")
    if eval_dtype not in EVAL_DTYPES:
        raise TrainingError(f"--eval-dtype {eval_dtype!r}: choose one of {', '.join(EVAL_DTYPES)}")


def _evaluate_lengths(
    model: torch.nn.Module,
    sets: EvalSets,
    lengths: list[int],
    device: torch.device,
    scoring: dict[str, Any],
    desc: str,
    progress: bool,
) -> list[dict[str, Any]]:
    """``evaluate_length`` at each of ``lengths`` (ascending) with ``scoring``'s settings; the unigram
    baseline is fitted on every token of the longest set's documents."""
    unigram = unigram_log_probs(sets.sets[max(sets.sets)].input_ids)  # every token of the documents
    return [
        evaluate_length(model, sets.sets[length], device, unigram=unigram, **scoring)
        for length in tqdm(lengths, desc=desc, unit="length", disable=not progress)
    ]


def scaling(model_config: dict[str, Any]) -> str | None:
    """How a RoPE-PI or YaRN model reads lengths beyond its training: ``zero-shot`` (trained at factor 1) or
    ``fine-tuned at factor s``; None for the other encodings."""
    if not rescaled(model_config["encoding"]):
        return None
    factor = model_config.get("encoding_options", {}).get("factor", 1.0)
    return "zero-shot" if factor == 1.0 else f"fine-tuned at factor {factor:g}"
