"""The comparison report: results.csv (one row per run and length), summary.csv (means over seeds with 95%
intervals), plots with one panel per training length and bands over seeds, and report.md with the papers'
claims, each ranking beside its significance.

``runs`` is a list of ``{"encoding": label, "train_length", "seed", "train": summary, "eval": eval.json}``.
"""

from __future__ import annotations

import csv
import math
import operator
from collections import defaultdict
from pathlib import Path
from typing import Any

from ltsgen.errors import require
from ltsgen.loaders.contract import atomic_path
from ltsgen.training.stats import mean_interval, paired_test, significant

CSV_COLUMNS = (
    "encoding", "train_length", "seed", "eval_length", "num_sequences", "loss", "perplexity", "attention_entropy",
    "attention_entropy_last", "fact_recall", "fact_loss", "fact_uses", "peak_memory_mib", "train_tokens_per_s",
)  # fmt: skip
SUMMARY_COLUMNS = (
    "encoding", "train_length", "eval_length", "n_seeds", "perplexity_mean", "perplexity_ci_low",
    "perplexity_ci_high", "loss_mean", "attention_entropy_mean", "attention_entropy_last_mean", "fact_recall_mean",
)  # fmt: skip
INTERVAL = "95% Student-t interval of the mean over seeds"
DEGRADED = 1.5  # perplexity at the longest length over the in-distribution one, above which we say "degrades"
CLOSE = 1.2  # ... and at or below which we say "stays close"
NOT_EXTRAPOLATING = ("nope", "rope")
EXTRAPOLATING = ("alibi", "kerple_log", "kerple_power", "fire", "ape")
FINETUNED = "+finetuned"
LEGEND_INCHES = 2.2
PLOTS = "comparison plots"


def result_rows(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per run (encoding, training length, seed) and evaluation length."""
    rows = []
    for run in runs:
        for result in run["eval"]["results"]:
            rows.append(
                {
                    "encoding": run["encoding"], "train_length": run["train_length"], "seed": run["seed"],
                    "eval_length": result["eval_length"], "num_sequences": result["num_sequences"],
                    "loss": result["loss"], "perplexity": result["perplexity"],
                    "attention_entropy": result["attention_entropy"],
                    "attention_entropy_last": result["attention_entropy_last"],
                    "fact_recall": result.get("fact_recall"), "fact_loss": result.get("fact_loss"),
                    "fact_uses": result.get("fact_uses"), "peak_memory_mib": result["peak_memory_mib"],
                    "train_tokens_per_s": run["train"].get("tokens_per_s"),
                }
            )  # fmt: skip
    return rows


def summary_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (encoding, training length, evaluation length): means over seeds, perplexity's interval."""
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["encoding"], row["train_length"], row["eval_length"])].append(row)
    out = []
    for (encoding, train_length, eval_length), members in groups.items():
        mean, low, high = mean_interval([m["perplexity"] for m in members])
        recalls = [m["fact_recall"] for m in members if m["fact_recall"] is not None]
        out.append(
            {
                "encoding": encoding, "train_length": train_length, "eval_length": eval_length,
                "n_seeds": len(members), "perplexity_mean": mean, "perplexity_ci_low": low,
                "perplexity_ci_high": high, "loss_mean": _mean([m["loss"] for m in members]),
                "attention_entropy_mean": _mean([m["attention_entropy"] for m in members]),
                "attention_entropy_last_mean": _mean([m["attention_entropy_last"] for m in members]),
                "fact_recall_mean": _mean(recalls) if recalls else None,
            }
        )  # fmt: skip
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def write_csv(path: Path, rows: list[dict[str, Any]], columns: tuple[str, ...]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(
            {key: ("" if value is None else value) for key, value in row.items()} for row in rows
        )


# --------------------------------------------------------------------------------------------------
# per-seed values, the basis of every claim


class Measured:
    """Values per (encoding, training length) and seed, for the claims and their tests."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.values: dict[tuple[str, int], dict[int, dict[int, dict[str, Any]]]] = defaultdict(dict)
        for row in rows:
            self.values[(row["encoding"], row["train_length"])].setdefault(row["seed"], {})[
                row["eval_length"]
            ] = row

    def encodings(self, train_length: int) -> list[str]:
        return [e for e, t in self.values if t == train_length]

    def lengths(self, encoding: str, train_length: int) -> list[int]:
        """The evaluation lengths every seed of this encoding has (none when it was not compared)."""
        per_seed = self.values.get((encoding, train_length), {}).values()
        return sorted(set.intersection(*(set(lengths) for lengths in per_seed))) if per_seed else []

    def per_seed(self, encoding: str, train_length: int, eval_length: int, metric: str) -> dict[int, float]:
        return {seed: lengths[eval_length][metric] for seed, lengths in self.values.get((encoding, train_length), {}).items()
                if eval_length in lengths and lengths[eval_length][metric] is not None}  # fmt: skip

    def change(self, encoding: str, train_length: int, metric: str, combine) -> dict[int, float] | None:
        """Per seed: ``combine(metric at the longest length, metric at the longest in-distribution length)``;
        None without both."""
        lengths = self.lengths(encoding, train_length)
        inside = [n for n in lengths if n <= train_length]
        if not inside or max(lengths) <= max(inside):
            return None
        far = self.per_seed(encoding, train_length, max(lengths), metric)
        near = self.per_seed(encoding, train_length, max(inside), metric)
        return {seed: combine(far[seed], near[seed]) for seed in far if seed in near}

    def ratio(self, encoding: str, train_length: int) -> dict[int, float] | None:
        """Per seed: perplexity at the longest length over the longest in-distribution one."""
        return self.change(encoding, train_length, "perplexity", operator.truediv)

    def growth(self, encoding: str, train_length: int) -> dict[int, float] | None:
        """Per seed: growth of the last-queries attention entropy from in distribution to the longest length."""
        return self.change(encoding, train_length, "attention_entropy_last", operator.sub)


def compared(a: dict[int, float], b: dict[int, float]) -> str:
    """Whether ``a`` lies below ``b`` (per seed, over their common seeds), in words: the paired t-test."""
    seeds = sorted(set(a) & set(b))
    difference, p = paired_test([a[s] for s in seeds], [b[s] for s in seeds])
    if difference >= 0:
        return "no (reversed on average)"
    if p is None:
        return "untested (one seed)"
    verdict = "significant" if significant(p) else "not significant"
    return f"{verdict} (paired t over {len(seeds)} seeds, p = {p:.3f})"


def ranking(measured: Measured, train_length: int, eval_length: int) -> list[dict[str, Any]]:
    """Encodings at ``eval_length`` by mean perplexity, each with the test against the next one."""
    means = []
    for encoding in measured.encodings(train_length):
        values = measured.per_seed(encoding, train_length, eval_length, "perplexity")
        if values:
            means.append((sum(values.values()) / len(values), encoding, values))
    means.sort()
    return [
        {"rank": rank, "encoding": encoding, "mean": mean,
         "vs_next": compared(values, means[rank][2]) if rank < len(means) else None,
         "next": means[rank][1] if rank < len(means) else None}
        for rank, (mean, encoding, values) in enumerate(means, 1)
    ]  # fmt: skip


def claims(measured: Measured, train_length: int) -> list[dict[str, str]]:
    """The papers' claims at one training length, each beside what was measured, a verdict and its test."""
    found: list[dict[str, str]] = []
    ratios = {e: r for e in measured.encodings(train_length) if (r := measured.ratio(e, train_length))}

    def mean(values: dict[int, float]) -> float:
        return sum(values.values()) / len(values)

    def shown(names: list[str]) -> str:
        return ", ".join(f"{n} x{mean(ratios[n]):.2f}" for n in names)

    weak = [n for n in NOT_EXTRAPOLATING if n in ratios]
    strong = [n for n in EXTRAPOLATING if n in ratios]
    if weak:
        degraded = [n for n in weak if mean(ratios[n]) > DEGRADED]
        verdict = "shown" if len(degraded) == len(weak) else (
            f"partly: only {', '.join(degraded)} above x{DEGRADED}" if degraded
            else f"not shown at this scale (none above x{DEGRADED})")  # fmt: skip
        test = "; ".join(f"{n} above x{DEGRADED}: {compared({s: DEGRADED for s in ratios[n]}, ratios[n])}"
                         for n in weak)  # fmt: skip
        found.append({"claim": "NoPE and RoPE degrade sharply beyond the training length", "source": "FIRE, APE",
                      "measured": f"perplexity at the longest length / in distribution: {shown(weak)}",
                      "verdict": verdict, "test": test})  # fmt: skip
    if strong:
        close = [n for n in strong if mean(ratios[n]) <= CLOSE]
        verdict = "shown" if len(close) == len(strong) else (
            f"partly: {', '.join(close)} within x{CLOSE}" if close else f"not shown (none within x{CLOSE})")  # fmt: skip
        intervals = ", ".join(f"{n} [{lo:.2f}, {hi:.2f}]" for n in strong
                              for _, lo, hi in [mean_interval(list(ratios[n].values()))])  # fmt: skip
        found.append({"claim": "ALiBi, Kerple, FIRE and APE stay close to their in-distribution perplexity",
                      "source": "FIRE, APE", "measured": shown(strong), "verdict": verdict,
                      "test": f"a threshold, not a ranking; ratio intervals: {intervals}"})  # fmt: skip
    if weak and strong:
        worst = max(strong, key=lambda n: mean(ratios[n]))
        best = min(weak, key=lambda n: mean(ratios[n]))
        better = mean(ratios[worst]) < mean(ratios[best])
        found.append({"claim": "every decaying or learned-bias encoding extrapolates better than NoPE and RoPE",
                      "source": "FIRE, APE",
                      "measured": f"worst of those: {worst} x{mean(ratios[worst]):.2f}; best of NoPE/RoPE: "
                                  f"{best} x{mean(ratios[best]):.2f}",
                      "verdict": "shown" if better else "not shown",
                      "test": f"{worst} below {best}: {compared(ratios[worst], ratios[best])}"})  # fmt: skip
    longest = max(
        (max(measured.lengths(e, train_length)) for e in measured.encodings(train_length)), default=None
    )
    order = ranking(measured, train_length, longest) if longest else []
    names = [entry["encoding"] for entry in order]
    if "fire" in names and len(names) > 1:
        rank = names.index("fire") + 1
        rival = names[1] if rank == 1 else names[0]
        fire = measured.per_seed("fire", train_length, longest, "perplexity")
        other = measured.per_seed(rival, train_length, longest, "perplexity")
        test = compared(fire, other) if rank == 1 else f"{rival} below fire: {compared(other, fire)}"
        found.append({"claim": "FIRE has the lowest perplexity far beyond the training length", "source": "FIRE",
                      "measured": f"at {longest}: fire {mean(fire):.2f}, rank {rank} of {len(names)} "
                                  f"({'runner-up' if rank == 1 else 'best'}: {rival} {mean(other):.2f})",
                      "verdict": "shown" if rank == 1 else "not shown",
                      "test": test if rank != 1 else f"fire below {rival}: {test}"})  # fmt: skip
    ape, rope = measured.growth("ape", train_length), measured.growth("rope", train_length)
    if ape and rope:
        less = mean(ape) < 0.5 * mean(rope)
        found.append({"claim": "APE's attention entropy stays bounded as the context grows, RoPE's keeps growing",
                      "source": "APE",
                      "measured": f"growth of the last-{train_length}-queries entropy from in distribution to the "
                                  f"longest length: ape {mean(ape):+.2f} nats, rope {mean(rope):+.2f} nats",
                      "verdict": "shown" if less else ("partly (less growth, but more than half of RoPE's)"
                                                       if mean(ape) < mean(rope) else "not shown"),
                      "test": f"ape below rope: {compared(ape, rope)}"})  # fmt: skip
    return found


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
    return f"{label} (zero-shot)" if label in ("rope_pi", "yarn") else label


def plot_vs_length(path: Path, summary, metrics: list[tuple[str, str]], log_y: bool) -> None:
    """Means over seeds (lines) and their intervals (bands) of each metric against the evaluation length:
    one column of panels per training length, one row per metric."""
    plt = _figure()
    train_lengths = sorted({row["train_length"] for row in summary})
    fig, axes = plt.subplots(len(metrics), len(train_lengths), figsize=_figsize(len(train_lengths), len(metrics), 3.8),
                             dpi=120, squeeze=False)  # fmt: skip
    for column, train_length in enumerate(train_lengths):
        rows = [row for row in summary if row["train_length"] == train_length]
        lengths = sorted({row["eval_length"] for row in rows})
        for line, (metric, label) in enumerate(metrics):
            ax = axes[line][column]
            for encoding in dict.fromkeys(row["encoding"] for row in rows):
                series = sorted((r["eval_length"], r) for r in rows if r["encoding"] == encoding)
                xs = [x for x, _ in series]
                ax.plot(
                    xs, [r[f"{metric}_mean"] for _, r in series], label=display(encoding), **_style(encoding)
                )
                if metric == "perplexity" and any(r["n_seeds"] > 1 for _, r in series):
                    ax.fill_between(xs, [r["perplexity_ci_low"] for _, r in series],
                                    [r["perplexity_ci_high"] for _, r in series], color=_style(encoding)["color"],
                                    alpha=0.15, linewidth=0)  # fmt: skip
            ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths, [str(n) for n in lengths])
            ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
            if log_y:
                LogFormatter = require("matplotlib.ticker", "train", PLOTS).LogFormatter  # noqa: N806

                ax.set_yscale("log")
                ax.yaxis.set_major_formatter(LogFormatter())
                ax.yaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))
            ax.set_title(f"trained at {train_length} tokens", fontsize=9)
            ax.set_xlabel("evaluation length (tokens)")
            ax.set_ylabel(label)
            ax.grid(True, which="both", alpha=0.3)
    _legend_right(fig, axes)
    _save(fig, path, plt)


def plot_loss_vs_position(path: Path, runs: list[dict[str, Any]]) -> None:
    """Per-position loss at each run's longest length, the mean over seeds: one panel per training length."""
    plt = _figure()
    train_lengths = sorted({run["train_length"] for run in runs})
    fig, axes = plt.subplots(1, len(train_lengths), figsize=_figsize(len(train_lengths), 1, 3.8), dpi=120,
                             squeeze=False)  # fmt: skip
    for column, train_length in enumerate(train_lengths):
        ax = axes[0][column]
        curves: dict[str, list[dict[str, list[float]]]] = defaultdict(list)
        for run in runs:
            if run["train_length"] == train_length and not run["encoding"].endswith(FINETUNED):
                curves[run["encoding"]].append(run["eval"]["results"][-1]["per_position"])
        for encoding, members in curves.items():
            position = members[0]["position"]
            loss = [sum(values) / len(values) for values in zip(*(m["loss"] for m in members), strict=True)]
            ax.plot(position, loss, label=display(encoding), **{**_style(encoding), "markersize": 0})
        ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
        ax.set_title(f"trained at {train_length} tokens", fontsize=9)
        ax.set_xlabel("position in the sequence (tokens)")
        ax.set_ylabel("next-token loss (nats)")
        ax.grid(True, alpha=0.3)
    _legend_right(fig, axes)
    _save(fig, path, plt)


def _figsize(columns: int, rows: int, height: float) -> tuple[float, float]:
    """Panels of 5.2 inches (6.4 when alone) and 2.2 inches for the legend on the right."""
    return (6.4 if columns == 1 else 5.2 * columns) + LEGEND_INCHES, height * rows


def _legend_right(fig, axes) -> None:
    """One legend for every panel, just right of them."""
    handles, labels = axes[0][-1].get_legend_handles_labels()
    edge = 1 - LEGEND_INCHES / fig.get_figwidth()
    fig.tight_layout(rect=(0, 0, edge, 1))
    fig.legend(handles, labels, fontsize=8, loc="center left", bbox_to_anchor=(edge, 0.5), frameon=False)


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


def _with_interval(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row["n_seeds"] < 2:
        return _num(row["perplexity_mean"])
    half = (row["perplexity_ci_high"] - row["perplexity_ci_low"]) / 2
    return f"{_num(row['perplexity_mean'])} ±{_num(half)}"


def render_markdown(
    settings: dict[str, Any], runs: list[dict[str, Any]], rows, summary, documents: str, notice: str | None
) -> str:
    measured = Measured(rows)
    steps = settings.get("finetune_steps")
    train_lengths = sorted({row["train_length"] for row in rows})
    seeds = sorted({row["seed"] for row in rows})
    parts = [
        f"# Length extrapolation of position encodings (trained at {', '.join(map(str, train_lengths))} tokens)",
        "",
        f"Every encoding was trained with the same data order and budget for each seed ({', '.join(map(str, seeds))}), "
        "then evaluated on the same documents at every length (sequence i at length L is the first L tokens of "
        f"document i). RoPE-PI and YaRN reuse RoPE's training (they differ only in how they read longer inputs); "
        f'"zero-shot" rescales at evaluation with factor = length / training length. '
        f"Values are means over seeds; ± is half the {INTERVAL}.",
        "",
    ]
    if documents:
        parts += [f"Evaluation documents: {documents}.", ""]
    if notice:
        parts += [f"**Note:** {notice}.", ""]
    parts += [_table(["setting", "value"], [[key, f"`{value}`"] for key, value in settings.items()]), "",
              "![perplexity vs length](ppl_vs_length.png)", ""]  # fmt: skip
    for train_length in train_lengths:
        parts += _length_section(measured, runs, summary, train_length, steps)
    parts += _speed_section(runs, rows)
    parts += [
        "Scale matters: the papers train models of 30M-350M parameters for thousands of steps; a small, briefly "
        "trained model may not have learned to use positions the way a large one does, so a claim not shown here "
        "is a statement about this scale, not a refutation.",
        "",
    ]
    return "\n".join(parts)


def _length_section(measured: Measured, runs, summary, train_length: int, steps) -> list[str]:
    rows = [row for row in summary if row["train_length"] == train_length]
    lengths = sorted({row["eval_length"] for row in rows})
    encodings = list(dict.fromkeys(row["encoding"] for row in rows))
    cell = {(row["encoding"], row["eval_length"]): row for row in rows}

    def ratio(encoding: str) -> str:
        values = measured.ratio(encoding, train_length)
        return _num(sum(values.values()) / len(values)) if values else "-"

    parts = [
        f"## Trained at {train_length} tokens",
        "",
        "### Perplexity by evaluation length",
        "",
        _table(
            ["encoding", *map(str, lengths), f"ratio longest / <= {train_length}"],
            [
                [display(e, steps), *(_with_interval(cell.get((e, n))) for n in lengths), ratio(e)]
                for e in encodings
            ],
        ),  # fmt: skip
        "",
    ]
    longest = max(lengths)
    order = ranking(measured, train_length, longest)
    parts += [
        f"### Ranking at {longest} tokens, each against the next",
        "",
        _table(
            ["rank", "encoding", "perplexity", "better than the next?"],
            [
                [
                    str(e["rank"]),
                    display(e["encoding"], steps),
                    _num(e["mean"]),
                    f"vs {e['next']}: {e['vs_next']}" if e["next"] else "-",
                ]
                for e in order
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
    ]
    parts += _facts_section(runs, rows, train_length, lengths, steps)
    parts += _learned_section(runs, train_length)
    table = claims(measured, train_length)
    if table:
        parts += [
            "### The papers' claims beside what was measured",
            "",
            f"Ratios are perplexity at the longest length over perplexity at the longest in-distribution length "
            f"(<= {train_length}), means over seeds. A claim is marked shown only when these numbers show it; the "
            "last column says whether the comparison it rests on holds across seeds (paired t-test, 5% level).",
            "",
            _table(
                ["claim", "paper", "measured here", "verdict", "significance"],
                [[c["claim"], c["source"], c["measured"], c["verdict"], c["test"]] for c in table],
            ),  # fmt: skip
            "",
        ]
    return parts


def _facts_section(runs, rows, train_length, lengths, steps) -> list[str]:
    recall = {(row["encoding"], row["eval_length"]): row["fact_recall_mean"] for row in rows
              if row["fact_recall_mean"] is not None}  # fmt: skip
    bins: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    edges: dict[str, int] = {}
    for run in runs:
        if run["train_length"] != train_length:
            continue
        for entry in run["eval"]["results"][-1].get("facts", []):
            hi = entry["distance_hi"]
            label = f"{entry['distance_lo']}-{hi - 1 if hi else 'inf'}"
            edges[label] = entry["distance_lo"]
            bins[run["encoding"]][label].append(entry["recall"])
    if not bins:
        return []
    labels = sorted(edges, key=edges.get)
    far = [n for n in lengths if any((e, n) in recall for e in bins)]
    parts = [
        "### Fact recall",
        "",
        "Top-1 accuracy on the first token of each later use of a fact's value, by distance in tokens to the "
        "value's nearest earlier occurrence, at the longest length (mean over seeds):",
        "",
        _table(
            ["encoding", *labels],
            [
                [display(e, steps), *(_num(_mean(v[b])) if (v := bins[e]).get(b) else "-" for b in labels)]
                for e in bins
            ],
        ),  # fmt: skip
        "",
    ]
    if far:
        parts += [
            f"Recall of uses whose nearest earlier occurrence lies beyond the training length ({train_length} "
            "tokens), by evaluation length (`fact_recall` in results.csv):",
            "",
            _table(
                ["encoding", *map(str, far)],
                [[display(e, steps), *(_num(recall.get((e, n))) for n in far)] for e in bins],
            ),  # fmt: skip
            "",
        ]
    return parts


def _learned_section(runs, train_length: int) -> list[str]:
    """What each learned encoding ended with, per layer (or once, when shared), the mean over seeds."""
    learned: dict[str, dict[int, list[list[dict[str, Any]]]]] = defaultdict(dict)
    for run in runs:
        if run["train_length"] == train_length and run["train"].get("learned"):
            learned[run["train"]["encoding"]][run["seed"]] = run["train"]["learned"]
    lines = []
    for encoding, per_seed in learned.items():
        layers = list(zip(*per_seed.values(), strict=True))  # per layer: that layer's values of every seed
        for layer, values in enumerate(layers):
            where = "all layers" if len(layers) == 1 else f"layer {layer}"
            shown = "; ".join(f"{name} {_values(_average([v[name] for v in values]))}" for name in values[0])
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


def _values(value) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_values(v) for v in value) + "]"
    return "none" if value is None else f"{value:.3g}"


def _speed_section(runs, rows) -> list[str]:
    speeds: dict[str, list[float]] = defaultdict(list)
    memory: dict[str, dict[int, float]] = defaultdict(dict)
    for run in runs:
        if run["train"].get("tokens_per_s"):
            speeds[run["train"]["encoding"]].append(run["train"]["tokens_per_s"])
    for row in rows:
        memory[row["encoding"]][row["eval_length"]] = max(
            row["peak_memory_mib"], memory[row["encoding"]].get(row["eval_length"], 0)
        )
    lengths = sorted({row["eval_length"] for row in rows})
    nope = _mean(speeds["nope"]) if speeds.get("nope") else None
    body = [[name, _num(_mean(values), 0), _num(_mean(values) / nope) if nope else "-",
             *(_num(memory.get(name, {}).get(n), 0) for n in lengths)] for name, values in speeds.items()]  # fmt: skip
    return [
        "## Speed and memory",
        "",
        "Training tokens/s (median over logging windows, mean over runs) and its ratio to NoPE; evaluation peak "
        "memory in MiB per length (CUDA: peak allocated; CPU: peak resident memory above the start of that length's "
        "evaluation), the largest over runs. Runs trained at different times, or side by side with --workers, may "
        "have shared the machine with other work: for speed ratios, run benchmarks/training.py.",
        "",
        _table(["trained encoding", "train tokens/s", "vs NoPE", *(f"mem@{n}" for n in lengths)], body),
        "",
    ]


def write_report(
    out_dir,
    settings: dict[str, Any],
    runs: list[dict[str, Any]],
    *,
    documents: str = "",
    notice: str | None = None,
) -> list[Path]:
    """Write results.csv, summary.csv, the three plots and report.md into ``out_dir``; return their paths.

    ``documents`` says where the evaluation documents come from; ``notice`` that fewer than asked reach the
    longest length.
    """
    out_dir = Path(out_dir)
    rows = result_rows(runs)
    summary = summary_rows(rows)
    paths = [out_dir / name for name in ("results.csv", "summary.csv", "ppl_vs_length.png", "entropy_vs_length.png",
                                          "loss_vs_position.png", "report.md")]  # fmt: skip
    write_csv(paths[0], rows, CSV_COLUMNS)
    write_csv(paths[1], summary, SUMMARY_COLUMNS)
    if rows:  # else no run was evaluated (every one diverged): nothing to plot
        plot_vs_length(paths[2], summary, [("perplexity", "perplexity")], log_y=True)
        plot_vs_length(paths[3], summary, [("attention_entropy", "attention entropy, all queries (nats)"),
                                           ("attention_entropy_last", "attention entropy, last T queries (nats)")],
                       log_y=False)  # fmt: skip
        plot_loss_vs_position(paths[4], runs)
    with atomic_path(paths[5]) as tmp:
        tmp.write_text(render_markdown(settings, runs, rows, summary, documents, notice), encoding="utf-8")
    return paths
