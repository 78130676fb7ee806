"""Train every encoding with the same seed, data order and budget, evaluate each, write the report.

OUT/compare.json fixes the settings; OUT/tokenizer.json is shared by all runs; OUT/runs/<encoding>/ holds
each run. A rerun skips what is finished (a trained run with a train summary, an evaluation at the same
lengths) and resumes an interrupted training from its checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from tqdm import tqdm

from ltsgen.errors import require
from ltsgen.loaders.contract import atomic_path
from ltsgen.training.data import resolve_tokenizer
from ltsgen.training.errors import TrainingError
from ltsgen.training.evaluate import EVAL_NAME, evaluate_run
from ltsgen.training.report import PLOTS, write_report
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


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison: train (or resume, or keep) ``config`` and evaluate it; picklable, so that any
    engine (a local process pool, Ray) can carry it to a worker and call ``run_job`` on it there."""

    config: TrainConfig  # encoding, train_length, seed and out (the run folder) set
    tag: str  # how the log names this run
    eval_lengths: tuple[int, ...]
    eval_sequences: int
    batch_tokens: int
    progress: bool = False


#: How runs are dispatched: ``run_map(run_job, specs)`` yields ``run_job(spec)`` of every spec, in any order.
RunMap = Callable[[Callable[[RunSpec], dict[str, Any]], list[RunSpec]], Iterable[dict[str, Any]]]


def run_job(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume, or keep) and evaluate one run; returns ``{"tag", "train", "eval", "lines"}``.

    A top-level function of plain inputs, so that it runs the same in this process, a worker process or a
    Ray task.
    """
    config = spec.config
    run_dir = Path(config.out)
    summary_path, eval_path = run_dir / SUMMARY_NAME, run_dir / EVAL_NAME
    lines = []
    if summary_path.exists():
        lines.append(f"{spec.tag}: trained earlier, kept")
    else:
        summary = train(config, resume=True, progress=spec.progress)
        lines.append(f"{spec.tag}: trained {summary['step']} steps, loss {summary['last_loss']:.3f}, "
                     f"{summary['tokens_per_s'] or 0:,.0f} tokens/s")  # fmt: skip
    summary = json.loads(summary_path.read_text(encoding="utf-8"))
    evaluation = json.loads(eval_path.read_text(encoding="utf-8")) if eval_path.exists() else None
    if (
        evaluation is not None
        and [r["eval_length"] for r in evaluation["results"]] == list(spec.eval_lengths)
        and evaluation.get("step") == summary["step"]
    ):
        lines.append(f"{spec.tag}: evaluated earlier, kept")
    else:
        evaluation = evaluate_run(
            run_dir, config.data, list(spec.eval_lengths), max_sequences=spec.eval_sequences,
            batch_tokens=spec.batch_tokens, device=config.device, progress=spec.progress,
        )  # fmt: skip
        shown = ", ".join(
            f"{r['eval_length']}: {r['perplexity']:.2f}"
            for r in evaluation["results"]
            if r.get("num_sequences")
        )
        lines.append(f"{spec.tag}: perplexity {shown}")
    return {"tag": spec.tag, "train": summary, "eval": evaluation, "lines": lines}


def serial_map(fn: Callable[[RunSpec], dict[str, Any]], specs: list[RunSpec]) -> Iterator[dict[str, Any]]:
    """Run every spec in this process, one after another."""
    for spec in specs:
        yield fn(spec)


def process_pool_map(workers: int) -> RunMap:
    """A ``RunMap`` over ``workers`` spawned processes, each with an equal share of the CPU threads."""

    def run_map(fn: Callable[[RunSpec], dict[str, Any]], specs: list[RunSpec]) -> Iterator[dict[str, Any]]:
        import multiprocessing
        import os
        from concurrent.futures import ProcessPoolExecutor, as_completed

        threads = max(1, (os.cpu_count() or 1) // workers)
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(workers, mp_context=context, initializer=_set_threads,
                                 initargs=(threads,)) as pool:  # fmt: skip
            for future in as_completed([pool.submit(fn, spec) for spec in specs]):
                yield future.result()

    return run_map


def _set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)


def compare(
    base: TrainConfig,
    encodings: list[str],
    eval_lengths: list[int],
    *,
    eval_sequences: int = 32,
    batch_tokens: int = 16384,
    workers: int = 1,
    run_map: RunMap | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the comparison in ``base.out`` (``base.encoding`` is ignored); returns results.json's content.

    Runs go through ``run_map`` (any engine's ``map``); by default one after another in this process, or with
    ``workers`` > 1 that many at once in worker processes, each with an equal share of the CPU threads
    (progress bars off). Every run is the same wherever it runs.
    """
    require("matplotlib", "train", PLOTS)  # missing: say so before training, not after
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

    in_process = run_map is None and workers <= 1
    if run_map is None:
        run_map = serial_map if in_process else process_pool_map(workers)
    specs = [
        RunSpec(
            replace(base, encoding=encoding, out=str(out / "runs" / encoding), tokenizer=str(tokenizer_path)),
            f"[{i}/{len(encodings)}] {encoding}",
            tuple(eval_lengths),
            eval_sequences,
            batch_tokens,
            progress=progress and in_process,
        )
        for i, encoding in enumerate(encodings, 1)
    ]
    by_tag = {}
    with tqdm(total=len(specs), desc=f"compare ({workers} at once)", unit="run",
              disable=not progress or in_process) as bar:  # fmt: skip
        for result in run_map(run_job, specs):
            by_tag[result["tag"]] = result
            for line in result["lines"]:
                bar.write(line) if progress and not in_process else log(line)
            bar.update(1)
    runs = {
        spec.config.encoding: {"train": by_tag[spec.tag]["train"], "eval": by_tag[spec.tag]["eval"]}
        for spec in specs
    }

    results = {"settings": settings, "runs": runs}
    _write_json(out / RESULTS_NAME, results)
    write_report(out, {key: settings[key] for key in _REPORTED if key in settings}, runs)
    return results


_REPORTED = (
    "data", "train_length", "eval_lengths", "steps", "batch_size", "lr", "warmup", "d_model", "layers", "heads",
    "seed", "eval_sequences", "device",
)  # fmt: skip
