"""Train every encoding with the same seed, data order and budget, evaluate each, write the report.

OUT/compare.json fixes the settings; OUT/tokenizer.json is shared by all runs; OUT/runs/<encoding>/ holds
each run. A rerun skips what is finished (a trained run with a train summary, an evaluation at the same
lengths) and resumes an interrupted training from its checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ltsgen.loaders.contract import atomic_path
from ltsgen.training.data import resolve_tokenizer
from ltsgen.training.errors import TrainingError
from ltsgen.training.evaluate import EVAL_NAME, evaluate_run
from ltsgen.training.report import write_report
from ltsgen.training.train import SUMMARY_NAME, TrainConfig, train

SETTINGS_NAME = "compare.json"
RESULTS_NAME = "results.json"
# settings a rerun may change without invalidating finished runs
FREE_SETTINGS = ("encodings", "out", "device", "compile", "eval_every", "checkpoint_every", "log_every")


class CompareError(TrainingError):
    """Settings that conflict with an earlier comparison in the same folder; the message names the file."""


def resolve_encodings(spec: str) -> list[str]:
    """``all`` or a comma-separated list of names from ``ltsgen.encodings.NAMES``."""
    from ltsgen.encodings import NAMES

    if spec.strip() == "all":
        return list(NAMES)
    names = [name.strip() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in NAMES]
    if unknown or not names:
        raise CompareError(
            f"unknown encoding(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(NAMES)}"
        )
    return list(dict.fromkeys(names))


def _check_settings(path: Path, settings: dict[str, Any]) -> None:
    if not path.exists():
        return
    saved = json.loads(path.read_text(encoding="utf-8"))
    changed = [
        key
        for key in set(saved) | set(settings)
        if key not in FREE_SETTINGS and saved.get(key) != settings.get(key)
    ]
    changed = [key for key in changed if key != "eval_lengths"]  # new lengths only re-run the evaluations
    if changed:
        diffs = ", ".join(f"{key}: {saved.get(key)!r} -> {settings.get(key)!r}" for key in sorted(changed))
        raise CompareError(
            f"{path}: an earlier comparison here used other settings ({diffs}); use another --out"
        )


def _write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def run_encoding(
    base: TrainConfig,
    encoding: str,
    tag: str,
    tokenizer_path: str,
    eval_lengths: list[int],
    eval_sequences: int,
    batch_tokens: int,
    progress: bool,
    threads: int | None = None,
) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """Train (or resume, or keep) and evaluate one encoding; returns (train summary, evaluation, log lines)."""
    if threads:
        import torch

        torch.set_num_threads(threads)
    run_dir = Path(base.out) / "runs" / encoding
    summary_path, eval_path = run_dir / SUMMARY_NAME, run_dir / EVAL_NAME
    lines = []
    if summary_path.exists():
        lines.append(f"{tag}: trained earlier, kept")
    else:
        config = replace(base, encoding=encoding, out=str(run_dir), tokenizer=tokenizer_path)
        summary = train(config, resume=True, progress=progress)
        lines.append(f"{tag}: trained {summary['step']} steps, loss {summary['last_loss']:.3f}, "
                     f"{summary['tokens_per_s'] or 0:,.0f} tokens/s")  # fmt: skip
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    evaluation = json.loads(eval_path.read_text(encoding="utf-8")) if eval_path.exists() else None
    if (
        evaluation is not None
        and [r["eval_length"] for r in evaluation["results"]] == eval_lengths
        and evaluation.get("step") == summary["step"]
    ):
        lines.append(f"{tag}: evaluated earlier, kept")
    else:
        evaluation = evaluate_run(
            run_dir, base.data, eval_lengths, max_sequences=eval_sequences, batch_tokens=batch_tokens,
            device=base.device, progress=progress,
        )  # fmt: skip
        shown = ", ".join(
            f"{r['eval_length']}: {r['perplexity']:.2f}"
            for r in evaluation["results"]
            if r.get("num_sequences")
        )
        lines.append(f"{tag}: perplexity {shown}")
    return summary, evaluation, lines


def compare(
    base: TrainConfig,
    encodings: list[str],
    eval_lengths: list[int],
    *,
    eval_sequences: int = 32,
    batch_tokens: int = 16384,
    jobs: int = 1,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the comparison in ``base.out`` (``base.encoding`` is ignored); returns results.json's content.

    ``jobs`` > 1 trains that many encodings at once in worker processes, each with an equal share of the
    CPU threads (progress bars off); every run is the same as it would be alone.
    """
    out = Path(base.out)
    eval_lengths = sorted(set(eval_lengths))
    settings = {**asdict(base), "encodings": encodings, "eval_lengths": eval_lengths,
                "eval_sequences": eval_sequences}  # fmt: skip
    settings.pop("encoding")
    settings.pop("tokenizer")
    _check_settings(out / SETTINGS_NAME, settings)
    out.mkdir(parents=True, exist_ok=True)
    _write_json(out / SETTINGS_NAME, settings)
    _, tokenizer_path = resolve_tokenizer(
        base.data, out, tokenizer_path=base.tokenizer, vocab_size=base.vocab_size
    )

    tags = {encoding: f"[{i}/{len(encodings)}] {encoding}" for i, encoding in enumerate(encodings, 1)}
    common = (str(tokenizer_path), eval_lengths, eval_sequences, batch_tokens)
    runs: dict[str, dict[str, Any]] = {}
    if jobs <= 1:
        for encoding in encodings:
            summary, evaluation, lines = run_encoding(base, encoding, tags[encoding], *common, progress)
            runs[encoding] = {"train": summary, "eval": evaluation}
            for line in lines:
                log(line)
    else:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // jobs)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
            futures = {
                pool.submit(run_encoding, base, encoding, tags[encoding], *common, False, threads): encoding
                for encoding in encodings
            }
            done = {}
            with tqdm(total=len(encodings), desc=f"compare ({jobs} at once)", unit="encoding",
                      disable=not progress) as bar:  # fmt: skip
                for future in as_completed(futures):
                    summary, evaluation, lines = future.result()
                    done[futures[future]] = {"train": summary, "eval": evaluation}
                    for line in lines:
                        bar.write(line) if progress else log(line)
                    bar.update(1)
        runs = {encoding: done[encoding] for encoding in encodings}

    results = {"settings": settings, "runs": runs}
    _write_json(out / RESULTS_NAME, results)
    write_report(out, {key: settings[key] for key in _REPORTED if key in settings}, runs)
    return results


_REPORTED = (
    "data", "train_length", "eval_lengths", "steps", "batch_size", "lr", "warmup", "d_model", "layers", "heads",
    "seed", "eval_sequences", "device",
)  # fmt: skip
