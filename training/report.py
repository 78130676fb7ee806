"""The comparison report: results.csv (one row per run and length), summary.csv (means over seeds with 95%
intervals, seeds and documents crossed: ``ltsgen.training.stats``), claims.csv (every test of the report, Holm-corrected, with its verdict),
plots with one panel per family of encodings, and report.md.

The primary metric is the same-token extrapolation penalty (``ltsgen.training.extrapolation``); perplexity
at each length is reported as the papers report it, but verdicts rest on the penalty
(``ltsgen.training.verdicts``).

``runs`` is a list of ``{"encoding": label, "train_length", "seed", "train": summary, "eval": eval.json}``.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from ltsgen.encodings import NAMES, family, rescaled
from ltsgen.errors import require
from ltsgen.loaders.files import atomic_path
from ltsgen.training.stats import CONFIDENCE, MIN_SEEDS, estimate
from ltsgen.training.verdicts import (
    APE_FORMULA,
    CLAIMS,
    FINETUNED,
    TRAINED_MARGIN,
    PerDocument,
    tests,
    trained_runs,
    window_recalls,
    window_values,
)

CSV_COLUMNS = (
    "encoding", "train_length", "seed", "eval_length", "num_sequences", "loss", "perplexity",
    "same_token_loss_full", "same_token_loss_window", "extrapolation_penalty", "unigram_loss", "trained",
    "attention_entropy", "attention_entropy_last", "recall_accuracy", "recall_accuracy_control", "recall_count",
    "peak_memory_mib",
    "train_tokens_per_s",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "encoding", "train_length", "eval_length", "n_seeds", "perplexity_mean", "perplexity_ci_low",
    "perplexity_ci_high", "loss_mean", "extrapolation_penalty_mean", "extrapolation_penalty_ci_low",
    "extrapolation_penalty_ci_high", "same_token_loss_full_mean", "same_token_loss_window_mean",
    "attention_entropy_mean", "attention_entropy_last_mean", "recall_accuracy_mean", "recall_accuracy_ci_low",
    "recall_accuracy_ci_high", "recall_accuracy_control_mean", "recall_accuracy_control_ci_low",
    "recall_accuracy_control_ci_high", "recall_count",
)  # fmt: skip
RECALL_METRICS = ("recall_accuracy", "recall_accuracy_control")
CLAIM_COLUMNS = ("claim", "source", "measured", "ci_low", "ci_high", "p", "p_holm", "verdict", "train_length",
                 "eval_length", "metric", "n_seeds")  # fmt: skip
INTERVAL = (
    f"{CONFIDENCE:.0%} interval of the mean with seeds and documents crossed (every seed reads the same "
    "documents; a t interval on Satterthwaite's degrees of freedom)"
)
LEGEND_INCHES = 2.2
PLOTS = "comparison plots"
#: what ``write_report`` writes, in order (the last only when there are cued recalls)
REPORT_FILES = ("results.csv", "summary.csv", "claims.csv", "penalty_vs_length.png", "ppl_vs_length.png",
                "entropy_vs_length.png", "loss_vs_position.png", "report.md", "recall_vs_distance.png")  # fmt: skip
#: Panels of the plots: encodings grouped by the family each declares, in the order of ``NAMES``.
FAMILIES = tuple(
    (title, tuple(name for name in NAMES if family(name) == title))
    for title in dict.fromkeys(family(name) for name in NAMES)
)


def result_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run (encoding, training length, seed) and evaluation length."""
    status = trained_runs(runs)
    rows = []
    for run in runs:
        trained = status[(run["encoding"], run["train_length"], run["seed"])]["trained"]
        for result in run["eval"]["results"]:
            rows.append(
                {
                    "encoding": run["encoding"], "train_length": run["train_length"], "seed": run["seed"],
                    "eval_length": result["eval_length"], "num_sequences": result["num_sequences"],
                    "loss": result["loss"], "perplexity": result["perplexity"],
                    "same_token_loss_full": result["same_token_loss_full"],
                    "same_token_loss_window": result["same_token_loss_window"],
                    "extrapolation_penalty": result["extrapolation_penalty"],
                    "unigram_loss": result["unigram_loss"], "trained": trained,
                    "attention_entropy": result["attention_entropy"],
                    "attention_entropy_last": result["attention_entropy_last"],
                    "recall_accuracy": result.get("recall_accuracy"),
                    "recall_accuracy_control": result.get("recall_accuracy_control"),
                    "recall_count": result.get("recall_count"), "peak_memory_mib": result["peak_memory_mib"],
                    "train_tokens_per_s": run["train"].get("tokens_per_s"),
                }
            )  # fmt: skip
    return rows


def summary_rows(rows: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (encoding, training length, evaluation length): means over seeds, with the intervals of
    perplexity (``exp`` of the loss's) and of the extrapolation penalty over seeds and documents."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["encoding"], row["train_length"], row["eval_length"])].append(row)
    data = PerDocument(runs)
    out = []
    for (encoding, train_length, eval_length), members in groups.items():
        loss = estimate(data.values(encoding, train_length, eval_length, "loss"))
        penalty = estimate(data.values(encoding, train_length, eval_length, "extrapolation_penalty"))
        out.append(
            {
                "encoding": encoding, "train_length": train_length, "eval_length": eval_length,
                "n_seeds": len(members), "perplexity_mean": math.exp(loss.mean),
                "perplexity_ci_low": math.exp(loss.low), "perplexity_ci_high": math.exp(loss.high),
                "loss_mean": loss.mean, "extrapolation_penalty_mean": penalty.mean,
                "extrapolation_penalty_ci_low": penalty.low, "extrapolation_penalty_ci_high": penalty.high,
                "same_token_loss_full_mean": _mean([m["same_token_loss_full"] for m in members]),
                "same_token_loss_window_mean": _mean([m["same_token_loss_window"] for m in members]),
                "attention_entropy_mean": _mean([m["attention_entropy"] for m in members]),
                "attention_entropy_last_mean": _mean([m["attention_entropy_last"] for m in members]),
                **recall_summary(data, (encoding, train_length, eval_length), members),
            }
        )  # fmt: skip
    return out


def recall_summary(
    data: PerDocument, key: tuple[str, int, int], members: list[dict[str, Any]]
) -> dict[str, Any]:
    """Cued recall accuracy and its control: means over seeds with their intervals
    (documents without a scored recall left out), and the recalls of one seed."""
    scored = [m for m in members if m.get("recall_count")]
    out: dict[str, Any] = {"recall_count": scored[0]["recall_count"] if scored else None}
    for metric in RECALL_METRICS:
        values = recall_values(data, key, metric) if scored else {}
        found = estimate(values) if values else None
        out.update({f"{metric}_mean": found and found.mean, f"{metric}_ci_low": found and found.low,
                    f"{metric}_ci_high": found and found.high})  # fmt: skip
    return out


def recall_values(data: PerDocument, key: tuple[str, int, int], metric: str) -> dict[int, list[float]]:
    """{seed: [value per document]} of a recall metric, NaN for a document without a scored recall."""
    return {
        seed: [math.nan if v is None else v for v in docs] for seed, docs in data.values(*key, metric).items()
    }


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(
            {key: ("" if value is None else value) for key, value in row.items()} for row in rows
        )


# --------------------------------------------------------------------------------------------------
# plots


def _figure():
    require("matplotlib", "train", PLOTS).use("Agg")
    return require("matplotlib.pyplot", "train", PLOTS)


def _style(label: str) -> dict[str, Any]:
    """A fixed colour, line and marker per encoding, so that every plot and report reads the same."""
    from ltsgen.encodings import NAMES

    name = label.removesuffix(FINETUNED)
    index = NAMES.index(name) if name in NAMES else len(NAMES)
    return {"color": f"C{index % 10}", "linestyle": ":" if label.endswith(FINETUNED) else ("-", "--")[index // 10 % 2],
            "marker": "os^vD<>ph*X"[index % 11], "markersize": 4}  # fmt: skip


def display(label: str, finetune_steps: int | None = None) -> str:
    """How the report names a result: RoPE-PI and YaRN say how they read longer inputs."""
    if label.endswith(FINETUNED):
        steps = f" {finetune_steps} steps" if finetune_steps else ""
        return f"{label.removesuffix(FINETUNED)} (fine-tuned{steps})"
    return f"{label} (zero-shot)" if label in NAMES and rescaled(label) else label


def families(labels: list[str]) -> list[tuple[str, list[str]]]:
    """The non-empty families of ``labels`` (fine-tuned variants go with their encoding), in ``FAMILIES``
    order; labels of no family go last, alone."""
    out, placed = [], set()
    for title, members in FAMILIES:
        found = [label for label in labels if label.removesuffix(FINETUNED) in members]
        placed.update(found)
        if found:
            out.append((title, found))
    return out + [(label, [label]) for label in labels if label not in placed]


def _panels(plt, rows: int, columns: int, height: float = 3.0):
    fig, axes = plt.subplots(rows, columns, figsize=(3.6 * columns + LEGEND_INCHES, height * rows), dpi=120,
                             squeeze=False, sharey="row")  # fmt: skip
    return fig, axes


def _length_axis(ax, lengths: list[int], train_length: int) -> None:
    ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xticks(lengths, [str(n) for n in lengths], fontsize=7)
    ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
    ax.grid(True, which="both", alpha=0.3)


def _title(ax, text: str) -> None:
    """The panel's title at the top of its axes, where matplotlib's automatic placement puts it: given, so
    that drawing does not measure every panel's tick labels to find it (a fifth of a report's time)."""
    ax.set_title(text, fontsize=8, y=1.0)


def plot_vs_length(path: Path, summary, metrics: list[tuple[str, str]], log_y: bool) -> None:
    """Means over seeds (lines) and, where summary.csv has them, their intervals (bands) of each metric
    against the evaluation length: one panel per family of encodings, one row per (training length, metric)."""
    plt = _figure()
    train_lengths = sorted({row["train_length"] for row in summary})
    groups = families(list(dict.fromkeys(row["encoding"] for row in summary)))
    fig, axes = _panels(plt, len(train_lengths) * len(metrics), len(groups))
    for block, train_length in enumerate(train_lengths):
        rows = [row for row in summary if row["train_length"] == train_length]
        lengths = sorted({row["eval_length"] for row in rows})
        for line, (metric, label) in enumerate(metrics):
            for column, (title, members) in enumerate(groups):
                ax = axes[block * len(metrics) + line][column]
                for encoding in members:
                    series = sorted((r["eval_length"], r) for r in rows if r["encoding"] == encoding)
                    xs = [x for x, _ in series]
                    style = _style(encoding)
                    ax.plot(xs, [r[f"{metric}_mean"] for _, r in series], label=display(encoding), **style)
                    if f"{metric}_ci_low" in SUMMARY_COLUMNS and any(r["n_seeds"] > 1 for _, r in series):
                        ax.fill_between(xs, [r[f"{metric}_ci_low"] for _, r in series],
                                        [r[f"{metric}_ci_high"] for _, r in series], color=style["color"],
                                        alpha=0.15, linewidth=0)  # fmt: skip
                if metric == "extrapolation_penalty":
                    ax.axhline(0, color="black", linewidth=0.8)
                _length_axis(ax, lengths, train_length)
                if log_y:
                    ax.set_yscale("log")
                _title(ax, f"{title} (T = {train_length})")
                ax.set_xlabel("evaluation length (tokens)", fontsize=7)
                if column == 0:
                    ax.set_ylabel(label, fontsize=8)
    _legend_all(fig, axes)
    _save(fig, path, plt)


def plot_loss_vs_position(path: Path, runs: list[dict[str, Any]]) -> None:
    """Per-position loss at each run's longest length (lines, the mean over seeds), and at each length beyond
    the training length, the loss of its last T tokens with the full context (circles) and with a T-token
    window (crosses), at their middle: one panel per family, one row per training length."""
    plt = _figure()
    train_lengths = sorted({run["train_length"] for run in runs})
    base = [run for run in runs if not run["encoding"].endswith(FINETUNED)]
    groups = families(list(dict.fromkeys(run["encoding"] for run in base)))
    fig, axes = _panels(plt, len(train_lengths), len(groups))
    for row, train_length in enumerate(train_lengths):
        for column, (title, members) in enumerate(groups):
            ax = axes[row][column]
            for encoding in members:
                mine = [
                    {r["eval_length"]: r for r in run["eval"]["results"]}
                    for run in base
                    if run["train_length"] == train_length and run["encoding"] == encoding
                ]
                if not mine:
                    continue
                longest = max(n for results in mine for n in results)  # a seed may lack a length
                curves = [results[longest]["per_position"] for results in mine if longest in results]
                style = {**_style(encoding), "markersize": 0}
                loss = [_mean(list(values)) for values in zip(*(c["loss"] for c in curves), strict=True)]
                ax.plot(curves[0]["position"], loss, label=display(encoding), linewidth=1, **style)
                far = sorted({n for results in mine for n in results if n > train_length})
                xs = [n - train_length / 2 for n in far]
                for key, marker in (("same_token_loss_full", "o"), ("same_token_loss_window", "X")):
                    ys = [_mean([results[n][key] for results in mine if n in results]) for n in far]
                    ax.plot(xs, ys, linestyle="none", marker=marker, markersize=8, zorder=5,
                            markerfacecolor="white" if marker == "o" else style["color"], markeredgecolor="black")  # fmt: skip
            ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
            ax.set_xscale("log", base=2)
            _title(ax, f"{title} (T = {train_length})")
            ax.set_xlabel("position (tokens); at each length's last T tokens: o full context, x T-token window",
                          fontsize=6)  # fmt: skip
            ax.grid(True, alpha=0.3)
            if column == 0:
                ax.set_ylabel("next-token loss (nats)", fontsize=8)
    _legend_all(fig, axes)
    _save(fig, path, plt)


def plot_recall_vs_distance(path: Path, runs: list[dict[str, Any]]) -> None:
    """Cued recall accuracy (solid) and its control (dashed, hollow) against the distance bin, at each run's
    longest length, means over seeds: one panel per training length."""
    plt = _figure()
    train_lengths = sorted({run["train_length"] for run in runs})
    fig, axes = _panels(plt, 1, len(train_lengths), height=3.8)
    for column, train_length in enumerate(train_lengths):
        ax = axes[0][column]
        bins = recall_bins(runs, train_length)
        labels = sorted({b for per in bins.values() for b in per}, key=_bin_order)
        for encoding, per in bins.items():
            xs = [i for i, b in enumerate(labels) if b in per]
            style = _style(encoding)
            for key, extra, name in (("accuracy", {}, display(encoding)),
                                     ("accuracy_control", {"linestyle": "--", "markerfacecolor": "none"},
                                      f"{display(encoding)}, control")):  # fmt: skip
                ys = [_mean([e[key] for e in per[labels[i]]]) for i in xs]
                ax.plot(xs, ys, label=name, **{**style, **extra})
        ax.set_xticks(range(len(labels)), labels, fontsize=7)
        ax.set_ylim(-0.03, 1.03)
        _title(ax, f"trained at {train_length} tokens")
        ax.set_xlabel("distance to the value's earlier occurrence (T = training length)", fontsize=7)
        if column == 0:
            ax.set_ylabel("cued recall accuracy", fontsize=8)
        ax.grid(True, alpha=0.3)
    _legend_all(fig, axes)
    _save(fig, path, plt)


def _legend_all(fig, axes) -> None:
    """One legend of every labelled line of every panel, just right of them."""
    seen: dict[str, Any] = {}
    for row in axes:
        for ax in row:
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                seen.setdefault(label, handle)
    edge = 1 - LEGEND_INCHES / fig.get_figwidth()
    fig.tight_layout(rect=(0, 0, edge, 1))
    fig.legend(list(seen.values()), list(seen), fontsize=8, loc="center left", bbox_to_anchor=(edge, 0.5),
               frameon=False)  # fmt: skip


def _save(fig, path: Path, plt) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


# --------------------------------------------------------------------------------------------------
# report.md


def _table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def _with_interval(row: dict[str, Any] | None, metric: str, digits: int = 2) -> str:
    if row is None:
        return "-"
    return f"{_num(row[f'{metric}_mean'], digits)} [{_num(row[f'{metric}_ci_low'], digits)}, {_num(row[f'{metric}_ci_high'], digits)}]"


def _evaluated_on(settings: dict[str, Any]) -> str:
    """What every length reads, as the report's opening says it."""
    if settings.get("eval_concat"):
        return (
            "the same windows at every length (sequence i at length L is the first L tokens of window i of the "
            "concatenated held-out stream). Consecutive windows are pieces of the same few documents, not "
            "independent documents: the intervals below treat them as documents, and may be too narrow "
            "for a sample of documents"
        )
    return "the same documents at every length (sequence i at length L is the first L tokens of document i)"


def render_markdown(
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    rows,
    summary,
    found,
    documents: str,
    notice: str | None,
) -> str:
    steps = settings.get("finetune_steps")
    train_lengths = sorted({row["train_length"] for row in rows})
    seeds = sorted({row["seed"] for row in rows})
    parts = [
        f"# Length extrapolation of position encodings (trained at {', '.join(map(str, train_lengths))} tokens)",
        "",
        f"Every encoding was trained with the same data order and budget for each seed ({', '.join(map(str, seeds))}), "
        f"then evaluated on {_evaluated_on(settings)}. RoPE-PI and YaRN reuse RoPE's training (they differ only "
        "in how they read longer inputs); "
        f'"zero-shot" rescales at evaluation with factor = length / training length. '
        f"Values are means over seeds (perplexity: exp of the mean loss, the seeds' geometric mean); brackets "
        f"hold the {INTERVAL}."
        + (
            " Where one seed is behind a value (`n_seeds` in summary.csv and claims.csv), they cover the "
            "documents' variation only, not the training's, and so do the p-values: read them as one run's, "
            "not an encoding's."
            if any(row["n_seeds"] == 1 for row in [*summary, *found])
            else ""
        ),
        "",
        "**The primary metric is the same-token extrapolation penalty**: at each length L beyond the training "
        "length T, the last T tokens of every sequence are scored once with the full L-token context and once "
        "with only the T tokens before each one (the training context); the penalty is the difference, in nats "
        "per token (negative: the longer context helps; positive: it hurts). Both scores are of the same tokens, "
        "so the text's difficulty at each position cancels out. Perplexity at each length is the papers' metric "
        "and is reported, but no verdict rests on it.",
        "",
    ]
    if documents:
        parts += [f"Evaluation documents: {documents}.", ""]
    if notice:
        parts += [f"**Note:** {notice}.", ""]
    parts += [_table(["setting", "value"], [[key, f"`{value}`"] for key, value in settings.items()]), "",
              "![extrapolation penalty vs length](penalty_vs_length.png)", "",
              "![perplexity vs length](ppl_vs_length.png)", ""]  # fmt: skip
    parts += _trained_section(runs)
    for train_length in train_lengths:
        parts += _length_section(runs, summary, train_length, steps, found)
    parts += _claims_section(found, steps)
    parts += _speed_section(runs, rows, steps)
    parts += [
        "Scale matters: the papers train models of 30M-350M parameters for thousands of steps; a small, briefly "
        "trained model may not have learned to use positions the way a large one does, so a claim not shown here "
        "is a statement about this scale, not a refutation.",
        "",
    ]
    return "\n".join(parts)


def _trained_section(runs) -> list[str]:
    status = trained_runs(runs)
    untrained = [(key, value) for key, value in status.items() if not value["trained"]]
    margins = [value["margin"] for value in status.values()]
    parts = [
        "## Did the models learn?",
        "",
        f"A run counts as trained when its loss with a T-token window (the training context) is at least "
        f"{TRAINED_MARGIN} nats per token below the loss of a unigram model of the same tokens, fitted on every "
        "token of the evaluation documents (so it has seen what it scores: a strict baseline), on average over "
        "the evaluation lengths."
        + (f" Margins over the runs: {_num(min(margins))} to {_num(max(margins))} nats." if margins else ""),
        "",
    ]
    if not status:
        return [*parts, "No run was evaluated.", ""]
    if untrained:
        listed = "; ".join(f"{label} T={t} seed {seed}: window loss {_num(v['window_loss'])}, unigram "
                           f"{_num(v['unigram_loss'])} (margin {_num(v['margin'])})"
                           for (label, t, seed), v in untrained)  # fmt: skip
        parts += [f"**{len(untrained)} of {len(status)} runs are undertrained**, and every verdict that rests on "
                  f"them is \"undertrained\": {listed}. Train longer (--steps) or larger.", ""]  # fmt: skip
    else:
        parts += [f"All {len(status)} runs are trained.", ""]
    return parts


def _length_section(runs, summary, train_length: int, steps, found) -> list[str]:
    rows = [row for row in summary if row["train_length"] == train_length]
    lengths = sorted({row["eval_length"] for row in rows})
    far = [n for n in lengths if n > train_length]
    encodings = list(dict.fromkeys(row["encoding"] for row in rows))
    cell = {(row["encoding"], row["eval_length"]): row for row in rows}
    parts = [f"## Trained at {train_length} tokens", ""]
    if far:
        parts += [
            "### Extrapolation penalty (nats per token, full context minus a T-token window, same tokens)",
            "",
            _table(
                ["encoding", *map(str, far)],
                [
                    [
                        display(e, steps),
                        *(_with_interval(cell.get((e, n)), "extrapolation_penalty", 3) for n in far),
                    ]
                    for e in encodings
                ],
            ),  # fmt: skip
            "",
        ]
    parts += [
        "### Perplexity by evaluation length (the papers' metric)",
        "",
        _table(
            ["encoding", *map(str, lengths)],
            [
                [display(e, steps), *(_with_interval(cell.get((e, n)), "perplexity") for n in lengths)]
                for e in encodings
            ],
        ),  # fmt: skip
        "",
        "### Attention entropy (nats, mean over layers and heads): all queries / the last "
        f"{train_length} queries",
        "",
        _table(
            ["encoding", *map(str, lengths)],
            [
                [
                    display(e, steps),
                    *(
                        f"{_num(c['attention_entropy_mean'])} / {_num(c['attention_entropy_last_mean'])}"
                        if (c := cell.get((e, n)))
                        else "-"
                        for n in lengths
                    ),
                ]
                for e in encodings
            ],
        ),  # fmt: skip
        "",
        _entropy_sentence(runs, train_length),
        "",
    ]
    parts += _recalls_section(runs, rows, train_length, lengths, steps, found)
    parts += _learned_section(runs, train_length)
    return parts


def _entropy_sentence(runs, train_length: int) -> str:
    """Which evaluation sequences the entropy was measured on: all of them, or the first N of M."""
    counts = {(r.get("entropy_sequences"), r.get("num_sequences")) for run in runs
              if run["train_length"] == train_length for r in run["eval"]["results"]}  # fmt: skip
    counts = sorted(pair for pair in counts if None not in pair)
    measured = ", ".join(str(n) for n in sorted({n for n, _ in counts})) or "-"
    if all(n == evaluated for n, evaluated in counts):
        return f"Entropy is measured on every evaluation sequence ({measured} per length)."
    evaluated = ", ".join(str(n) for n in sorted({n for _, n in counts}))
    return f"Entropy is measured on the first {measured} of the {evaluated} evaluation sequences per length."


def _claims_section(found: list[dict[str, Any]], steps) -> list[str]:
    if not found:
        return [
            "## Tests",
            "",
            "No test applies: no evaluation length lies beyond the training length, or no encoding compared "
            "has a comparison or claim (every encoding against NoPE and against RoPE, and the papers' claims).",
            "",
        ]
    seeds = sorted({row["n_seeds"] for row in found})
    return [
        "## Tests and verdicts (claims.csv)",
        "",
        f"Fixed before the data is seen: every encoding against NoPE and against RoPE, and the papers' claims "
        f"listed in ltsgen.training.verdicts (CLAIMS, {len(CLAIMS)} of them, each with its source), at the longest "
        "evaluation length; where cued recalls are scored, each encoding's recalls within its training window "
        "against their control. Each is a paired test, seeds and documents crossed (a t test on Satterthwaite's "
        'degrees of freedom); "measured" is the '
        "mean difference (or the mean, for a claim against 0) with its interval. p_holm is Holm's correction "
        f'across all {len(found)} tests of this report. A verdict is "shown" only when p_holm < 0.05 in the '
        f"claimed direction, every run behind it is trained and it has at least {MIN_SEEDS} seeds (here: "
        f'{", ".join(map(str, seeds))}); "reversed" is significant the other way.',
        "",
        f"APE here is {APE_FORMULA}. Its entropy claims compare the growth of the last-T-queries entropy from "
        "the longest in-distribution length to the longest length, document by document.",
        "",
        _table(
            ["claim", "source", "T", "metric", "measured [95% interval]", "p", "p_holm", "verdict"],
            [
                [
                    row["claim"],
                    row["source"],
                    str(row["train_length"]),
                    row["metric"],
                    f"{_num(row['measured'], 3)} [{_num(row['ci_low'], 3)}, {_num(row['ci_high'], 3)}]",
                    _p(row["p"]),
                    _p(row["p_holm"]),
                    f"**{row['verdict']}**",
                ]
                for row in found
            ],
        ),  # fmt: skip
        "",
    ]


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def recall_bins(runs, train_length: int) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Per encoding and distance bin, each seed's entry at its longest evaluation length (eval.json's
    ``recalls``), fine-tuned variants left out (they are evaluated at one length)."""
    bins: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run["train_length"] == train_length and not run["encoding"].endswith(FINETUNED):
            for entry in run["eval"]["results"][-1].get("recalls", []):
                bins[run["encoding"]][entry["bin"]].append(entry)
    return bins


def _recalls_section(runs, rows, train_length, lengths, steps, found) -> list[str]:
    cell = {(row["encoding"], row["eval_length"]): row for row in rows if row["recall_count"]}
    bins = recall_bins(runs, train_length)
    if not cell:
        return []
    encodings = list(dict.fromkeys(e for e, _ in cell))
    scored = [n for n in lengths if any((e, n) in cell for e in encodings)]

    def pair(row: dict[str, Any] | None) -> str:
        if row is None:
            return "-"
        shown = [_with_interval(row, metric) for metric in RECALL_METRICS]
        return f"{shown[0]} / {shown[1]} ({row['recall_count']})"

    labels = sorted({b for per in bins.values() for b in per}, key=_bin_order)
    parts = [
        "### Cued recall",
        "",
        "Share of cued recalls whose every value token is the top-1 prediction (`recall_accuracy`) / the same "
        "with the value's earlier occurrences replaced by another value of its kind, so that the context no "
        "longer holds the answer (`recall_accuracy_control`), and the number of recalls scored. The gap is what "
        "the model read from the context. Each document's share, averaged over the documents with a scored "
        "recall (each document weighs the same; results.csv gives each run's share of all its recalls, where a "
        f"document weighs by its recalls). By evaluation length, with the {INTERVAL}:",
        "",
        _table(
            ["encoding", *map(str, scored)],
            [[display(e, steps), *(pair(cell.get((e, n))) for n in scored)] for e in encodings],
        ),  # fmt: skip
        "",
    ]
    if labels:
        parts += [
            f"By distance in tokens from the value's nearest earlier occurrence (T = {train_length}), at the longest "
            "length, accuracy / control (recalls per seed), means over seeds:",
            "",
            _table(
                ["encoding", *labels],
                [[display(e, steps), *(_bin_cell(bins[e].get(b)) for b in labels)] for e in bins],
            ),  # fmt: skip
            "",
            "![recall vs distance](recall_vs_distance.png)",
            "",
        ]
    return parts + _window_section(runs, train_length, steps, found)


def _window_section(runs, train_length: int, steps, found: list[dict[str, Any]]) -> list[str]:
    """Cued recall with each recall in its own T-token window, beside its control, and the test of the gap
    (``verdicts.window_recalls``: one of the report's tests, corrected with all of them in ``found``)."""
    per = window_recalls(runs, train_length)
    tested = {
        row["window_of"]: row for row in found if row.get("window_of") and row["train_length"] == train_length
    }
    body = []
    for encoding, seeds in per.items():
        a, c = (estimate(window_values(seeds, metric)) for metric in RECALL_METRICS)
        row = tested[encoding]
        body.append([display(encoding, steps), f"{_num(a.mean)} [{_num(a.low)}, {_num(a.high)}]",
                     f"{_num(c.mean)} [{_num(c.low)}, {_num(c.high)}]", str(next(iter(seeds.values()))["recall_count"]),
                     f"{_num(row['measured'], 3)} [{_num(row['ci_low'], 3)}, {_num(row['ci_high'], 3)}]",
                     _p(row["p"]), _p(row["p_holm"]), row["verdict"]])  # fmt: skip
    if not body:
        return []
    return [
        f"Within the training window: each cued recall read in its own {train_length}-token window that ends at "
        "the value and holds its nearest earlier occurrence (positions every encoding was trained on), beside "
        f"its control (each document's share, averaged over documents); {INTERVAL}. The gap is tested above 0 "
        "(paired by seed and document), one of the tests of this report, Holm-corrected with all of them "
        f"(claims.csv); a verdict only for trained runs of at least {MIN_SEEDS} seeds (RoPE-PI and YaRN "
        "zero-shot read such a window as RoPE does, and are tested once, as RoPE, or as the first of them "
        "when RoPE is not compared):",
        "",
        _table(["encoding", "accuracy", "control", "recalls", "gap", "p", "p_holm", "verdict"], body),
        "",
    ]


def _bin_order(label: str) -> int:
    return 0 if label == "<=T" else int(label.split("-")[0].removesuffix("T") or 1)


def _bin_cell(entries: list[dict[str, Any]] | None) -> str:
    if not entries:
        return "-"
    accuracy = _mean([e["accuracy"] for e in entries])
    control = _mean([e["accuracy_control"] for e in entries])
    return f"{_num(accuracy)} / {_num(control)} ({entries[0]['count']})"


def _learned_section(runs, train_length: int) -> list[str]:
    """What each learned encoding ended with, per layer (or once, when shared), the mean over seeds."""
    learned: dict[str, dict[int, list[list[dict[str, Any]]]]] = defaultdict(dict)
    shared: dict[str, bool] = {}
    for run in runs:
        if run["train_length"] == train_length and run["train"].get("learned"):
            learned[run["train"]["encoding"]][run["seed"]] = run["train"]["learned"]
            shared[run["train"]["encoding"]] = learned_shared(run["train"])
    lines = []
    for encoding, per_seed in learned.items():
        layers = list(zip(*per_seed.values(), strict=True))  # per layer: that layer's values of every seed
        for layer, values in enumerate(layers):
            where = "all layers" if shared[encoding] else f"layer {layer}"
            shown = "; ".join(
                f"{name} {learned_value(_average([v[name] for v in values]))}" for name in values[0]
            )
            lines.append(f"- {encoding}, {where}: {shown}")
    if not lines:
        return []
    return ["### What the encodings learned", "",
            "Means over seeds, per head where a list (each run's train_summary.json has its own):", "", *lines, ""]  # fmt: skip


def _average(values: list[Any]) -> Any:
    if isinstance(values[0], list):
        return [_average(list(column)) for column in zip(*values, strict=True)]
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def learned_shared(summary: dict[str, Any]) -> bool:
    """Whether a run's learned values (its ``train_summary.json``) are one module's, shared by every layer (a
    run of one layer whose module is its own is not); a summary written before it said so: whether it has
    one entry."""
    return summary.get("learned_shared", len(summary["learned"]) == 1)


def learned_value(value: Any) -> str:
    """A learned value (a number, none, or a list of them per head) to 3 significant digits."""
    if isinstance(value, list):
        return "[" + ", ".join(learned_value(v) for v in value) + "]"
    return "none" if value is None else f"{value:.3g}"


def _speed_section(runs, rows, steps) -> list[str]:
    """Per compared encoding: the training tokens/s behind it and its evaluation peak memory per length."""
    speeds: dict[str, list[float]] = defaultdict(list)
    memory: dict[str, dict[int, float]] = defaultdict(dict)
    for run in runs:  # a zero-shot RoPE-PI or YaRN run carries RoPE's training, a fine-tuned one its tuning
        if run["train"].get("tokens_per_s"):
            speeds[run["encoding"]].append(run["train"]["tokens_per_s"])
    for row in rows:
        memory[row["encoding"]][row["eval_length"]] = max(
            row["peak_memory_mib"], memory[row["encoding"]].get(row["eval_length"], 0)
        )
    lengths = sorted({row["eval_length"] for row in rows})
    nope = _mean(speeds["nope"]) if speeds.get("nope") else None
    body = []
    for label in dict.fromkeys(run["encoding"] for run in runs):
        speed = _mean(speeds[label]) if speeds.get(label) else None
        ratio = _num(speed / nope) if speed and nope and not label.endswith(FINETUNED) else "-"
        body.append(
            [display(label, steps), _num(speed, 0), ratio, *(_num(memory[label].get(n), 0) for n in lengths)]
        )
    return [
        "## Speed and memory",
        "",
        "Training tokens/s (median over logging windows, mean over runs) of the training behind each encoding and "
        "its ratio to NoPE (RoPE-PI and YaRN zero-shot: RoPE's training, the same weights; a fine-tuned one: its "
        "fine-tuning, at a longer length, so no ratio); evaluation peak "
        "memory in MiB per length (CUDA: peak allocated; CPU: peak resident memory above the start of that length's "
        "evaluation), the largest over runs. Runs trained at different times, or side by side with --workers, may "
        "have shared the machine with other work: for speed ratios, run benchmarks/training.py.",
        "",
        _table(["encoding", "train tokens/s", "vs NoPE", *(f"mem@{n}" for n in lengths)], body),
        "",
    ]


def write_recall_plot(out_dir: Path, runs: list[dict[str, Any]]) -> Path | None:
    """Draw recall_vs_distance.png when the runs have cued recalls and return its path; else remove the one
    an earlier grid's report drew there (of runs this report does not cover)."""
    path = out_dir / REPORT_FILES[-1]
    if any(recall_bins(runs, t) for t in {run["train_length"] for run in runs}):
        plot_recall_vs_distance(path, runs)
        return path
    path.unlink(missing_ok=True)
    return None


def write_report(
    out_dir,
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    documents: str = "",
    notice: str | None = None,
) -> list[Path]:
    """Write results.csv, summary.csv, claims.csv, the four plots (and recall_vs_distance.png when there are
    cued recalls) and report.md into ``out_dir``; return their paths.

    ``documents`` says where the evaluation documents come from; ``notice`` that fewer than asked reach the
    longest length.
    """
    out_dir = Path(out_dir)
    rows = result_rows(runs)
    summary = summary_rows(rows, runs)
    found = tests(runs)
    paths = [out_dir / name for name in REPORT_FILES[:-1]]
    write_csv(paths[0], rows, CSV_COLUMNS)
    write_csv(paths[1], summary, SUMMARY_COLUMNS)
    write_csv(paths[2], found, CLAIM_COLUMNS)
    if rows:  # else no run was evaluated (every one diverged): nothing to plot
        plot_vs_length(
            paths[3], summary, [("extrapolation_penalty", "extrapolation penalty (nats/token)")], log_y=False
        )
        plot_vs_length(paths[4], summary, [("perplexity", "perplexity")], log_y=True)
        plot_vs_length(paths[5], summary, [("attention_entropy", "entropy, all queries (nats)"),
                                           ("attention_entropy_last", "entropy, last T queries (nats)")],
                       log_y=False)  # fmt: skip
        plot_loss_vs_position(paths[6], runs)
    if recall_plot := write_recall_plot(out_dir, runs):
        paths.append(recall_plot)
    with atomic_path(paths[7]) as tmp:
        tmp.write_text(
            render_markdown(settings, runs, rows, summary, found, documents, notice), encoding="utf-8"
        )
    return paths
