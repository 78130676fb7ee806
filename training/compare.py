"""Train every encoding alike at each training length and seed, evaluate each, write the report.

OUT/compare.json fixes the settings; OUT/tokenizer.json is shared by all runs, and so is
OUT/token_counts.json (the records' token counts, when the text is tokenized on the fly: the split is counted
once, not in every run); OUT/runs/T<length>-seed<s>/ holds one folder per encoding. RoPE, RoPE-PI and YaRN
train the same model (RoPE at factor 1), so the family is trained once, as ``rope``, and its weights are
evaluated under each scaling (zero-shot). With ``finetune_steps``, RoPE-PI and YaRN are also fine-tuned from
those weights at each evaluation length beyond the training length (factor = length / training length), as
their papers do, and evaluated there.

Runs are picklable ``RunSpec``s processed by the top-level ``run_job``, dispatched through an ``Engine``
(``ltsgen.engines``: this process, a local process pool or Ray tasks), as the builders' jobs are. A rerun skips what is finished and resumes
an interrupted training from its checkpoint. A run whose loss stops being finite is reported as diverged
(with the step), left out of the tables and plots, and not evaluated; the report is written all the same.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

from ltsgen.encodings import options as encoding_options
from ltsgen.encodings import rescaled, rescaled_options, shares_weights, trained_as, training_options
from ltsgen.engines import Engine, SerialEngine
from ltsgen.errors import LtsgenError, did_you_mean, first_repeated, require
from ltsgen.loaders.contract import TOKENIZER_NAME
from ltsgen.loaders.files import temporaries_of
from ltsgen.training.data import TokenizerTrainer, load_eval_sets, resolve_tokenizer, same_setting
from ltsgen.training.errors import DivergedError, TrainingError
from ltsgen.training.evaluate import evaluate_run
from ltsgen.training.progress import GridProgress
from ltsgen.training.report import FINETUNED, PLOTS, REPORT_FILES, write_report
from ltsgen.training.rundir import (
    SUMMARY_NAME,
    TOKEN_COUNTS_NAME,
    claim_folder,
    eval_name,
    read_record,
    remove_temporaries,
    write_json,
)
from ltsgen.training.stats import TESTS
from ltsgen.training.train import TrainConfig, train

SETTINGS_NAME = "compare.json"
RESULTS_NAME = "results.json"
# the temporary files of a comparison's own atomic writes (a killed comparison leaves them)
_TEMPORARY = temporaries_of(
    map(re.escape, (SETTINGS_NAME, RESULTS_NAME, TOKENIZER_NAME, TOKEN_COUNTS_NAME, *REPORT_FILES))
)
#: settings a rerun may change without invalidating finished runs (new runs or evaluations are made)
FREE_SETTINGS = (
    "encodings", "train_lengths", "seeds", "eval_lengths", "eval_sequences", "eval_dtype", "batch_tokens",
    "entropy_sequences", "window_stride", "eval_concat", "out", "device", "compile", "eval_every", "checkpoint_every", "log_every",
)  # fmt: skip
FINETUNE_LR_RATIO = 0.1  # fine-tuning runs at a tenth of the training learning rate


def resolve_encodings(spec: str) -> list[str]:
    """``all`` or a comma-separated list of names from ``ltsgen.encodings.NAMES``, in any case."""
    from ltsgen.encodings import NAMES, canonical_name

    if spec.strip().lower() == "all":
        return list(NAMES)
    names = [canonical_name(name) for name in spec.split(",") if name.strip()]
    if not names:
        raise TrainingError(f"--encodings: no encoding given; choose from all, {', '.join(NAMES)}")
    twice = first_repeated(names)
    if twice is not None:  # one run said as two, or RoPE and rope
        raise TrainingError(f"--encodings {spec!r}: {twice} is given twice")
    return names


@dataclass(frozen=True)
class Evaluation:
    """One evaluation of a run's weights: reported as ``label``, read as ``encoding`` (None: as trained)."""

    label: str
    lengths: tuple[int, ...]
    encoding: str | None = None
    options: tuple[tuple[str, Any], ...] = ()  # encoding options of ``encoding``


@dataclass(frozen=True)
class RunSpec:
    """One run of a comparison: train (or resume, or keep) ``config``, then make its evaluations.

    Picklable, so that any engine (a local process pool, Ray) can carry it to a worker and call
    ``run_job`` on it there.
    """

    config: TrainConfig  # encoding, train_length, seed and out (the run folder) set
    tag: str  # how the log names this run
    train_length: int  # the comparison's training length (a fine-tune trains longer, from a run of this one)
    evaluations: tuple[Evaluation, ...]
    eval_sequences: int
    batch_tokens: int
    eval_dtype: str = "float32"
    entropy_sequences: int | None = None
    window_stride: int = 1
    eval_concat: bool = False
    progress: bool = False
    token_counts: str | None = None  # the records' token counts, one file for every run (``train``)
    documents_length: int | None = None  # every run reads the documents of the comparison's longest length


def run_job(spec: RunSpec) -> dict[str, Any]:
    """Train (or resume, or keep) and evaluate one run.

    A top-level function of plain inputs, so that it runs the same in this process, a worker process or a
    Ray task.

    Returns:
        ``{"tag", "train": train summary, "evals": {label: evaluation}, "lines": log lines}``.
    """
    config = spec.config
    run_dir = Path(config.out)
    lines = []
    if config.init_from and _diverged(Path(config.init_from)):
        lines.append(f"{spec.tag}: not trained, the run it starts from diverged")
        start = {"encoding": config.encoding, "train_length": config.train_length, "seed": config.seed}
        return {"tag": spec.tag, "train": {**start, "step": 0, "finished": False, "diverged": True},
                "evals": {}, "lines": lines}  # fmt: skip
    if (run_dir / SUMMARY_NAME).exists():
        remove_temporaries(run_dir)  # train, which would remove them, is not called
        lines.append(f"{spec.tag}: trained earlier, kept")
    else:
        try:
            summary = train(config, resume=True, progress=spec.progress, token_counts=spec.token_counts)
        except DivergedError as error:
            lines.append(f"{spec.tag}: {error}")
        else:
            lines.append(f"{spec.tag}: trained {summary['step']} steps, loss {summary['last_loss']:.3f}, "
                         f"{summary['tokens_per_s'] or 0:,.0f} tokens/s")  # fmt: skip
    summary = read_record(run_dir / SUMMARY_NAME, {"step": int})
    if summary.get("diverged"):
        lines.append(f"{spec.tag}: diverged at step {summary['step']}; not evaluated")
        return {"tag": spec.tag, "train": summary, "evals": {}, "lines": lines}
    evals = {}
    for evaluation in spec.evaluations:
        path = run_dir / eval_name(evaluation.encoding)
        kept = _kept_evaluation(path, lines.append)
        if kept is not None and _still_valid(kept, evaluation, spec, summary["step"]):
            lines.append(f"{spec.tag}: {evaluation.label} evaluated earlier, kept")
            evals[evaluation.label] = kept
            continue
        report = evaluate_run(
            run_dir, config.data, list(evaluation.lengths), max_sequences=spec.eval_sequences,
            batch_tokens=spec.batch_tokens, device=config.device, eval_dtype=spec.eval_dtype,
            entropy_sequences=spec.entropy_sequences, window_stride=spec.window_stride, eval_concat=spec.eval_concat,
            encoding=evaluation.encoding, encoding_options=dict(evaluation.options), window_length=spec.train_length,
            documents_length=spec.documents_length, progress=spec.progress, log=lines.append,
        )  # fmt: skip
        shown = ", ".join(f"{r['eval_length']}: {r['perplexity']:.2f}" for r in report["results"])
        lines.append(f"{spec.tag}: {evaluation.label} perplexity {shown}")
        evals[evaluation.label] = report
    return {"tag": spec.tag, "train": summary, "evals": evals, "lines": lines}


def _still_valid(kept: dict[str, Any], evaluation: Evaluation, spec: RunSpec, step: int) -> bool:
    """Whether an earlier evaluation file answers ``evaluation`` of ``spec``'s run at ``step``: the same
    data, lengths, documents, window, step, evaluation settings and options of the encoding it is read as
    (an ``ltsgen evaluate`` of the run on other data or with other options is evaluated again, not paired
    with the other runs)."""
    lengths = [r["eval_length"] for r in kept["results"]]
    as_trained = evaluation.encoding is None

    def resolved(options: Any) -> Any:  # as the model takes them: base=1e4 is base=10000
        return _resolved(evaluation.encoding, spec.train_length, options)

    made_with = (
        kept.get("documents_length", max(lengths, default=None)),  # files before it chose by their longest
        kept.get("window_length"), kept.get("step"), kept.get("requested_sequences"), kept.get("eval_dtype"),
        kept.get("requested_entropy_sequences"), kept.get("window_stride"), kept.get("eval_concat"),
        resolved(kept.get("options_asked", {} if as_trained else None)),  # files before it: as trained
    )  # fmt: skip
    asked = (
        spec.documents_length or max(evaluation.lengths), spec.train_length, step, spec.eval_sequences,
        spec.eval_dtype, spec.entropy_sequences, spec.window_stride, spec.eval_concat,
        resolved({} if as_trained else dict(evaluation.options)),
    )  # fmt: skip
    same_data = same_setting("data", kept.get("data"), str(spec.config.data))
    return same_data and lengths == list(evaluation.lengths) and made_with == asked


def _resolved(encoding: str | None, train_length: int, options: Any) -> Any:
    """Options an evaluation reads ``encoding`` with, as the model takes them (defaults filled in, values
    typed: ``base=1e4`` is ``base=10000``); as they are where they do not resolve."""
    if encoding is None or not isinstance(options, dict):
        return options
    try:
        return training_options(encoding, train_length, options)
    except (TypeError, ValueError, LtsgenError):
        return options


def _diverged(run_dir: Path) -> bool:
    path = run_dir / SUMMARY_NAME
    return path.exists() and bool(read_record(path, {}).get("diverged"))


def _kept_evaluation(path: Path, log: Callable[[str], None]) -> dict[str, Any] | None:
    """An earlier evaluation file, or None (absent, or damaged: then it is evaluated again)."""
    if not path.exists():
        return None
    try:
        kept = read_record(path, {"results": list})
        if all(isinstance(r, dict) and isinstance(r.get("eval_length"), int) for r in kept["results"]):
            return kept
    except TrainingError as error:
        log(f"{error}; evaluated again")
        return None
    log(f"{path}: damaged, a result has no integer eval_length; evaluated again")
    return None


def run_job_with_threads(threads: int, spec: RunSpec) -> dict[str, Any]:
    """``run_job`` with torch limited to ``threads`` CPU threads (a worker keeps the count it started with)."""
    import torch

    torch.set_num_threads(threads)
    return run_job(spec)


def run_folder(out: Path, train_length: int, seed: int, name: str) -> Path:
    """OUT/runs/T<train_length>-seed<seed>/<name>."""
    return out / "runs" / f"T{train_length}-seed{seed}" / name


def compare(
    base: TrainConfig,
    encodings: list[str],
    eval_lengths: list[int],
    *,
    train_lengths: list[int] | None = None,
    seeds: list[int] | None = None,
    eval_sequences: int = 32,
    batch_tokens: int = 16384,
    eval_dtype: str = "float32",
    entropy_sequences: int | None = None,
    window_stride: int = 1,
    eval_concat: bool = False,
    finetune_steps: int = 0,
    engine: Engine | None = None,
    train_tokenizer: TokenizerTrainer | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the comparison in ``base.out``; returns results.json's content.

    Args:
        base: the settings every run shares (its encoding, train_length and seed are replaced per run;
            its ``encoding_options`` apply to every encoding that has the option).
        encodings: names from ``ltsgen.encodings.NAMES``.
        eval_lengths: evaluation lengths in tokens.
        train_lengths, seeds: the grid (default: ``base``'s training length and seed).
        eval_sequences, batch_tokens, eval_dtype, entropy_sequences, window_stride, eval_concat: as
            ``evaluate_run``'s.
        finetune_steps: also fine-tune RoPE-PI and YaRN for this many steps at each evaluation length
            beyond the training length (0: zero-shot only).
        engine: where the runs go (``ltsgen.engines.make_engine``): by default one after another in this
            process; an engine whose jobs run in other processes (a process pool, Ray tasks) gives each run
            its ``cpus_per_job`` torch threads. Every run is the same wherever it runs.
        train_tokenizer: trains the shared tokenizer when the data has none and none is given.
        progress, log: a bar over the steps of the whole grid (each run's steps and an ETA, read from the
            runs' metrics.jsonl wherever they train) and, in this process, each run's own bar; where the
            per-run lines go.
    """
    require("matplotlib", "train", PLOTS)  # missing: say so before training, not after
    require("scipy.stats", "train", TESTS)
    out = Path(base.out)
    eval_lengths = sorted(set(eval_lengths))
    train_lengths = sorted(set(train_lengths or [base.train_length]))
    seeds = list(dict.fromkeys(seeds if seeds is not None else [base.seed]))
    _check_options(encodings, base.encoding_options)
    for encoding in encodings:  # values out of range: refused before anything is written
        for train_length in train_lengths:
            options = dict(_options_of(encoding, base))
            replace(base, encoding=encoding, train_length=train_length, encoding_options=options).check()
    if window_stride < 1:
        raise TrainingError(f"--window-stride must be at least 1 (got {window_stride})")
    settings = {**asdict(base), "encodings": encodings, "train_lengths": train_lengths, "seeds": seeds,
                "eval_lengths": eval_lengths, "eval_sequences": eval_sequences, "eval_dtype": eval_dtype,
                "batch_tokens": batch_tokens, "entropy_sequences": entropy_sequences, "window_stride": window_stride, "eval_concat": eval_concat,
                "finetune_steps": finetune_steps}  # fmt: skip
    for key in ("encoding", "tokenizer", "train_length", "seed", "init_from"):
        settings.pop(key)
    _check_settings(out / SETTINGS_NAME, settings)
    with claim_folder(out, "comparison"):
        remove_temporaries(out, _TEMPORARY)
        return _compare(base, settings, engine or SerialEngine(), train_tokenizer, progress, log)


def _compare(base, settings, engine, train_tokenizer, progress, log) -> dict[str, Any]:
    """``compare`` in its claimed folder, with its checked ``settings``."""
    out, encodings, finetune_steps = Path(base.out), settings["encodings"], settings["finetune_steps"]
    train_lengths, seeds = settings["train_lengths"], settings["seeds"]
    eval_lengths, eval_sequences = settings["eval_lengths"], settings["eval_sequences"]
    batch_tokens, eval_dtype = settings["batch_tokens"], settings["eval_dtype"]
    window_stride, eval_concat = settings["window_stride"], settings["eval_concat"]
    entropy_sequences = settings["entropy_sequences"]
    first_start = not (out / SETTINGS_NAME).exists() and not (out / TOKENIZER_NAME).exists()
    try:
        tokenizer, tokenizer_path = resolve_tokenizer(
            base.data, out, tokenizer_path=base.tokenizer, vocab_size=base.vocab_size,
            train_tokenizer=train_tokenizer,
        )  # fmt: skip
        held_out = load_eval_sets(base.data, eval_lengths, tokenizer, eval_sequences, concat=eval_concat)
    except BaseException:  # bad data or settings, refused before any run: the folder is not bound to them
        if first_start:
            (out / TOKENIZER_NAME).unlink(missing_ok=True)
        raise
    write_json(out / SETTINGS_NAME, settings)
    log(f"evaluation documents: {held_out.description}")
    if held_out.notice:
        log(f"note: {held_out.notice}")

    in_process = engine.cpus_per_job is None
    job = run_job if in_process else partial(run_job_with_threads, engine.cpus_per_job)
    shared = replace(base, tokenizer=str(tokenizer_path))
    common = dict(eval_sequences=eval_sequences, batch_tokens=batch_tokens, eval_dtype=eval_dtype,
                  entropy_sequences=entropy_sequences, window_stride=window_stride, eval_concat=eval_concat, progress=progress and in_process,
                  token_counts=str(out / TOKEN_COUNTS_NAME), documents_length=max(eval_lengths))  # fmt: skip
    specs = _base_specs(shared, encodings, train_lengths, seeds, eval_lengths, common)
    finetunes = _finetune_specs(shared, encodings, train_lengths, seeds, eval_lengths, finetune_steps, common)
    runs = [(spec.tag, Path(spec.config.out), spec.config.steps) for spec in specs + finetunes]
    with GridProgress(runs, enabled=progress, log=log) as grid:
        results = list(_dispatch(engine, job, specs, grid))
        results += _dispatch(engine, job, finetunes, grid)

    by_tag = {result["tag"]: result for result in results}
    runs = [
        {"encoding": evaluation.label, "train_length": spec.train_length, "seed": spec.config.seed,
         "train": by_tag[spec.tag]["train"], "eval": by_tag[spec.tag]["evals"].get(evaluation.label)}
        for spec in specs + finetunes
        for evaluation in spec.evaluations
    ]  # fmt: skip
    results_json = {"settings": settings, "evaluation_documents": held_out.description, "runs": runs}
    write_json(out / RESULTS_NAME, results_json)
    reported = {key: settings[key] for key in _REPORTED if key in settings}
    diverged = [run for run in runs if run["eval"] is None]
    overflowed = [run for run in runs if run["eval"] is not None and not _finite(run["eval"])]
    notices = [held_out.notice, _left_out(diverged, "diverged (their loss stopped being finite)"),
               _left_out(overflowed, "have an evaluation loss too large for a perplexity (exp overflows)")]  # fmt: skip
    reportable = [run for run in runs if run["eval"] is not None and _finite(run["eval"])]
    write_report(out, reported, reportable, documents=held_out.description,
                 notice="; ".join(n for n in notices if n) or None)  # fmt: skip
    return results_json


def _finite(evaluation: dict[str, Any]) -> bool:
    return all(math.isfinite(result["perplexity"]) for result in evaluation["results"])


def _left_out(runs: list[dict[str, Any]], why: str) -> str | None:
    """The runs left out of the report's tables and plots, and why, in one sentence."""
    if not runs:
        return None
    named = ", ".join(f"{run['encoding']} (T={run['train_length']}, seed {run['seed']}, step "
                      f"{run['train'].get('step')})" for run in runs)  # fmt: skip
    return (
        f"{len(runs)} of the runs {why} and are left out of the tables, plots and tests (a verdict then rests "
        f"on the runs that remain, chosen by how they ended): {named}"
    )


def _base_specs(base, encodings, train_lengths, seeds, eval_lengths, common) -> list[RunSpec]:
    """One training per (encoding, training length, seed); encodings that read the same weights (the RoPE
    family: ``ltsgen.encodings.trained_as``) share one."""
    trained = [e for e in dict.fromkeys(trained_as(e) for e in encodings)]
    specs = []
    for train_length in train_lengths:
        for seed in seeds:
            for name in trained:
                family = [e for e in encodings if trained_as(e) == name] if shares_weights(name) else [name]
                evaluations = tuple(
                    Evaluation(e, tuple(eval_lengths), None if e == name else e, _options_of(e, base))
                    for e in family
                )
                config = replace(base, encoding=name, train_length=train_length, seed=seed,
                                 out=str(run_folder(Path(base.out), train_length, seed, name)),
                                 encoding_options=dict(_options_of(name, base)))  # fmt: skip
                tag = f"{'+'.join(family)} T={train_length} seed={seed}"
                specs.append(RunSpec(config, tag, train_length, evaluations, **common))
    return specs


def _finetune_specs(base, encodings, train_lengths, seeds, eval_lengths, steps, common) -> list[RunSpec]:
    """RoPE-PI and YaRN fine-tuned from the RoPE run at each evaluation length beyond the training length."""
    if steps <= 0:
        return []
    specs = []
    for train_length in train_lengths:
        for seed in seeds:
            for name in (e for e in encodings if rescaled(e)):
                for length in (n for n in eval_lengths if n > train_length):
                    scale = rescaled_options(name, length, train_length)
                    config = replace(
                        base, encoding=name, train_length=length, seed=seed, steps=steps, warmup=None,
                        lr=base.lr * FINETUNE_LR_RATIO, batch_size=max(1, base.batch_size * train_length // length),
                        init_from=str(run_folder(Path(base.out), train_length, seed, trained_as(name))),
                        encoding_options={**dict(_options_of(name, base)), **scale},
                        out=str(run_folder(Path(base.out), train_length, seed, f"{name}-finetuned-{length}")),
                    )  # fmt: skip
                    evaluation = Evaluation(name + FINETUNED, (length,))
                    tag = f"{name} fine-tuned at {length} T={train_length} seed={seed}"
                    specs.append(RunSpec(config, tag, train_length, (evaluation,), **common))
    return specs


def _options_of(encoding: str, base: TrainConfig) -> tuple[tuple[str, Any], ...]:
    """The given encoding options that ``encoding`` has."""
    return tuple((k, v) for k, v in base.encoding_options.items() if k in encoding_options(encoding))


def _check_options(encodings: list[str], given: dict[str, Any]) -> None:
    unused = [key for key in given if not any(key in encoding_options(e) for e in encodings)]
    if unused:
        known = sorted({key for encoding in encodings for key in encoding_options(encoding)})
        close = did_you_mean(unused[0], known, n=1)
        raise TrainingError(
            f"--encoding-option {', '.join(unused)}: no compared encoding has such an option"
            + (f" ({close})" if close else "")
            + f"; they take {', '.join(known) if known else 'no options'}"
        )


def _dispatch(
    engine: Engine, job: Callable[[RunSpec], dict[str, Any]], specs: list[RunSpec], grid: GridProgress
) -> Iterator[dict[str, Any]]:
    for result in engine.map(job, specs):
        for line in result["lines"]:
            grid.write(line)
        grid.refresh()
        yield result


def _check_settings(path: Path, settings: dict[str, Any]) -> None:
    if not path.exists():
        return
    saved = read_record(path, {})
    changed = [key for key in set(saved) | set(settings)
               if key not in FREE_SETTINGS and not same_setting(key, saved.get(key), settings.get(key))]  # fmt: skip
    if "encoding_options" in changed:  # given otherwise ("base=1e4", a default by hand), the same runs?
        resolved = _resolved_options(settings)
        if resolved is not None and resolved == _resolved_options(saved):
            changed.remove("encoding_options")
    if changed:
        diffs = ", ".join(f"{key}: {saved.get(key)!r} -> {settings.get(key)!r}" for key in sorted(changed))
        raise TrainingError(
            f"{path}: an earlier comparison here used other settings ({diffs}); use another --out"
        )


def _resolved_options(settings: dict[str, Any]) -> dict[str, Any] | None:
    """Every option of every compared encoding at every training length, as its runs are trained with the
    comparison's ``encoding_options`` (None for a settings record these do not read)."""
    given = settings.get("encoding_options") or {}
    try:
        return {
            f"{encoding}@{length}": _resolved(
                encoding, length, {k: v for k, v in given.items() if k in encoding_options(encoding)}
            )
            for encoding in settings["encodings"]
            for length in settings["train_lengths"]
        }
    except (KeyError, TypeError, LtsgenError):  # a record of other fields, or of an encoding not known now
        return None


_REPORTED = (
    "data", "train_lengths", "seeds", "eval_lengths", "steps", "batch_size", "lr", "warmup", "d_model",
    "n_layers", "n_heads", "encoding_options", "eval_sequences", "entropy_sequences", "eval_dtype", "window_stride",
    "eval_concat",
    "finetune_steps", "device",
)  # fmt: skip
