"""The comparison report: results.csv, plots (matplotlib, Agg) and report.md with the papers' claims.

``runs`` maps an encoding name to ``{"train": <train summary>, "eval": <eval.json>}``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from ltsgen.errors import require
from ltsgen.loaders.contract import atomic_path

CSV_COLUMNS = (
    "encoding", "train_length", "eval_length", "num_sequences", "loss", "perplexity", "attention_entropy",
    "peak_memory_mib", "train_tokens_per_s",
)  # fmt: skip
DEGRADED = 1.5  # perplexity at the longest length over the in-distribution one, above which we say "degrades"
CLOSE = 1.2  # ... and at or below which we say "stays close"
GAP = 1.1  # how much better the worst extrapolating encoding must be than the best non-extrapolating one
PLOTS = "comparison plots"
NOT_EXTRAPOLATING = ("nope", "rope")
EXTRAPOLATING = ("alibi", "kerple_log", "kerple_power", "fire", "ape")


def result_rows(runs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per encoding and evaluation length (lengths without sequences left out)."""
    rows = []
    for encoding, run in runs.items():
        for result in run["eval"]["results"]:
            if not result.get("num_sequences"):
                continue
            rows.append(
                {
                    "encoding": encoding,
                    "train_length": run["eval"]["train_length"],
                    "eval_length": result["eval_length"],
                    "num_sequences": result["num_sequences"],
                    "loss": result["loss"],
                    "perplexity": result["perplexity"],
                    "attention_entropy": result["attention_entropy"],
                    "peak_memory_mib": result["peak_memory_mib"],
                    "train_tokens_per_s": run["train"].get("tokens_per_s"),
                }
            )
    return rows


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp, tmp.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def _series(rows, metric: str) -> dict[str, tuple[list[int], list[float]]]:
    series: dict[str, tuple[list[int], list[float]]] = {}
    for row in rows:
        xs, ys = series.setdefault(row["encoding"], ([], []))
        xs.append(row["eval_length"])
        ys.append(row[metric])
    return series


def _figure():
    require("matplotlib", "train", PLOTS).use("Agg")
    return require("matplotlib.pyplot", "train", PLOTS)


def _style(encoding: str) -> dict[str, Any]:
    """A fixed colour, line and marker per encoding, so that every plot and report reads the same."""
    from ltsgen.encodings import NAMES

    index = NAMES.index(encoding) if encoding in NAMES else len(NAMES)
    return {"color": f"C{index % 10}", "linestyle": ("-", "--")[index // 10 % 2], "marker": "os^vD<>ph*X"[index % 11],
            "markersize": 4}  # fmt: skip


def plot_vs_length(path: Path, rows, metric: str, ylabel: str, train_length: int, log_y: bool) -> None:
    """One line per encoding of ``metric`` against the evaluation length, the training length marked."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(8.5, 4.8), dpi=120)
    for encoding, (xs, ys) in _series(rows, metric).items():
        ax.plot(xs, ys, label=encoding, **_style(encoding))
    ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
    ax.text(train_length, 0.98, " training length", transform=ax.get_xaxis_transform(), va="top", fontsize=8)
    ax.set_xscale("log", base=2)
    lengths = sorted({row["eval_length"] for row in rows})
    ax.set_xticks(lengths, [str(length) for length in lengths])
    ax.tick_params(axis="x", which="minor", bottom=False, labelbottom=False)
    if log_y:
        LogFormatter = require("matplotlib.ticker", "train", PLOTS).LogFormatter  # noqa: N806

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(LogFormatter())
        ax.yaxis.set_minor_formatter(LogFormatter(minor_thresholds=(2, 0.5)))
    ax.set_xlabel("evaluation length (tokens)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    _save(fig, path, plt)


def plot_loss_vs_position(path: Path, runs, train_length: int) -> None:
    """Per-position loss at the longest evaluated length, one line per encoding."""
    plt = _figure()
    fig, ax = plt.subplots(figsize=(8.5, 4.8), dpi=120)
    for encoding, run in runs.items():
        measured = [r for r in run["eval"]["results"] if r.get("num_sequences")]
        if measured:
            curve = measured[-1]["per_position"]
            ax.plot(curve["position"], curve["loss"], label=encoding, **{**_style(encoding), "markersize": 0})
    ax.axvline(train_length, color="grey", linewidth=1, linestyle=":")
    ax.set_xlabel("position in the sequence (tokens)")
    ax.set_ylabel("next-token loss (nats)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    _save(fig, path, plt)


def _save(fig, path: Path, plt) -> None:
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def _by_length(rows, metric: str) -> dict[str, dict[int, float]]:
    table: dict[str, dict[int, float]] = {}
    for row in rows:
        table.setdefault(row["encoding"], {})[row["eval_length"]] = row[metric]
    return table


def degradation(rows, train_length: int) -> dict[str, tuple[int, int, float]]:
    """Per encoding: (reference length, longest length, perplexity ratio longest / reference).

    The reference is the evaluated length closest to the training length from below (in distribution).
    """
    out = {}
    for encoding, values in _by_length(rows, "perplexity").items():
        inside = [length for length in values if length <= train_length] or [min(values)]
        ref, longest = max(inside), max(values)
        out[encoding] = (ref, longest, values[longest] / values[ref])
    return out


def claims(rows, train_length: int) -> list[dict[str, str]]:
    """The papers' qualitative claims, each beside what this run measured and a plain verdict."""
    ratios = degradation(rows, train_length)
    entropy = _by_length(rows, "attention_entropy")
    ppl = _by_length(rows, "perplexity")
    found: list[dict[str, str]] = []

    def fmt(names):
        return ", ".join(f"{n} x{ratios[n][2]:.2f}" for n in names)

    weak = [n for n in NOT_EXTRAPOLATING if n in ratios]
    if weak:
        degraded = [n for n in weak if ratios[n][2] > DEGRADED]
        verdict = "shown" if len(degraded) == len(weak) else (
            f"partly: only {', '.join(degraded)} above x{DEGRADED}" if degraded
            else f"not shown at this scale (none above x{DEGRADED})"
        )  # fmt: skip
        found.append(
            {"claim": "NoPE and RoPE degrade sharply beyond the training length", "source": "FIRE, APE",
             "measured": f"perplexity at the longest length / in distribution: {fmt(weak)}", "verdict": verdict}
        )  # fmt: skip
    strong = [n for n in EXTRAPOLATING if n in ratios]
    if strong:
        close = [n for n in strong if ratios[n][2] <= CLOSE]
        verdict = "shown" if len(close) == len(strong) else (
            f"partly: {', '.join(close) or 'none'} within x{CLOSE}" if close else f"not shown (none within x{CLOSE})"
        )  # fmt: skip
        found.append(
            {"claim": "ALiBi, Kerple, FIRE and APE stay close to their in-distribution perplexity",
             "source": "FIRE, APE", "measured": fmt(strong), "verdict": verdict}
        )  # fmt: skip
    if weak and strong:
        worst_strong = max(ratios[n][2] for n in strong)
        best_weak = min(ratios[n][2] for n in weak)
        found.append(
            {"claim": "the gap: every decaying or learned-bias encoding extrapolates clearly better than NoPE and RoPE",
             "source": "FIRE, APE",
             "measured": f"worst of {', '.join(strong)} x{worst_strong:.2f}; best of {', '.join(weak)} x{best_weak:.2f}",
             "verdict": "shown" if worst_strong * GAP < best_weak else f"not shown (needs a margin of x{GAP})"}
        )  # fmt: skip
    if "fire" in ppl and len(ppl) > 1:
        longest = max(ppl["fire"])
        ranking = sorted((values[longest], name) for name, values in ppl.items() if longest in values)
        rank = [name for _, name in ranking].index("fire") + 1
        found.append(
            {"claim": "FIRE has the lowest perplexity far beyond the training length", "source": "FIRE",
             "measured": f"at {longest}: FIRE {ppl['fire'][longest]:.2f}, rank {rank} of {len(ranking)} "
                         f"(best: {ranking[0][1]} {ranking[0][0]:.2f})",
             "verdict": "shown" if rank == 1 else "not shown"}
        )  # fmt: skip
    if "ape" in entropy and "rope" in entropy:

        def growth(name):
            values = entropy[name]
            return values[max(values)] - values[ratios[name][0]]

        found.append(
            {"claim": "APE's attention entropy stays bounded as the context grows, RoPE's keeps growing",
             "source": "APE",
             "measured": f"entropy growth from in distribution to the longest length: APE {growth('ape'):+.2f} nats, "
                         f"RoPE {growth('rope'):+.2f} nats",
             "verdict": "shown" if growth("ape") < 0.5 * growth("rope") else (
                 "partly (less growth, but more than half of RoPE's)" if growth("ape") < growth("rope") else "not shown")}
        )  # fmt: skip
    return found


def _table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def _num(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:,.{digits}f}"


def render_markdown(settings: dict[str, Any], runs: dict[str, dict[str, Any]], rows) -> str:
    train_length = settings["train_length"]
    lengths = sorted({row["eval_length"] for row in rows})
    ppl = _by_length(rows, "perplexity")
    entropy = _by_length(rows, "attention_entropy")
    memory = _by_length(rows, "peak_memory_mib")
    ratios = degradation(rows, train_length)
    parts = [
        f"# Length extrapolation of position encodings (trained at {train_length} tokens)",
        "",
        "Every encoding was trained with the same seed, data order and budget, then evaluated on "
        "exact-length sequences. Settings:",
        "",
        _table(["setting", "value"], [[key, f"`{value}`"] for key, value in settings.items()]),
        "",
        "## Perplexity by evaluation length",
        "",
        _table(
            ["encoding", *map(str, lengths), f"ratio longest / {train_length}"],
            [[name, *(_num(ppl[name].get(L)) for L in lengths), _num(ratios[name][2])] for name in ppl],
        ),
        "",
        "![perplexity vs length](ppl_vs_length.png)",
        "",
        "## Attention entropy (nats, mean over layers and heads)",
        "",
        _table(
            ["encoding", *map(str, lengths)],
            [[n, *(_num(entropy[n].get(L)) for L in lengths)] for n in entropy],
        ),
        "",
        "![attention entropy vs length](entropy_vs_length.png)",
        "",
        "## Loss by position at the longest length",
        "",
        "![loss vs position](loss_vs_position.png)",
        "",
    ]
    facts = _facts_table(runs)
    if facts:
        parts += [
            "## Long-range facts: loss on a fact's later uses by distance to its first mention",
            "",
            facts,
            "",
        ]
    nope_speed = runs.get("nope", {}).get("train", {}).get("tokens_per_s")
    speed_rows = []
    for name, run in runs.items():
        speed = run["train"].get("tokens_per_s")
        ratio = _num(speed / nope_speed) if speed and nope_speed else "-"
        speed_rows.append(
            [name, _num(speed, 0), ratio, *(_num(memory.get(name, {}).get(L), 0) for L in lengths)]
        )
    parts += [
        "## Speed and memory",
        "",
        "Training tokens/s (median over logging windows) and its ratio to NoPE; evaluation peak memory in MiB "
        "per length (CUDA: peak allocated; CPU: peak resident memory above the start of that length's evaluation). "
        "Runs trained at different times, or side by side with --workers, may have shared the machine with other "
        "work: for speed ratios, run benchmarks/training.py.",
        "",
        _table(["encoding", "train tokens/s", "vs NoPE", *(f"mem@{L}" for L in lengths)], speed_rows),
        "",
        "## The papers' claims beside what was measured",
        "",
        f"Ratios are perplexity at the longest length over perplexity at the longest in-distribution length "
        f"(<= {train_length}). A claim is marked shown only when this run's numbers show it.",
        "",
        _table(
            ["claim", "paper", "measured here", "verdict"],
            [[c["claim"], c["source"], c["measured"], c["verdict"]] for c in claims(rows, train_length)],
        ),
        "",
        "Scale matters: the papers train models of 30M-350M parameters for thousands of steps; a small, briefly "
        "trained model may not have learned to use positions the way a large one does, so a claim not shown here "
        "is a statement about this scale, not a refutation.",
        "",
    ]
    return "\n".join(parts)


def _facts_table(runs) -> str:
    table: dict[str, dict[str, float]] = {}
    bins: dict[str, int] = {}
    for name, run in runs.items():
        measured = [r for r in run["eval"]["results"] if r.get("facts")]
        if not measured:
            continue
        for entry in measured[-1]["facts"]:
            hi = entry["distance_hi"]
            label = f"{entry['distance_lo']}-{hi - 1 if hi else 'inf'}"
            bins[label] = entry["distance_lo"]
            table.setdefault(name, {})[label] = entry["loss"]
    if not table:
        return ""
    labels = sorted(bins, key=bins.get)
    return "Mean loss (nats) at the longest length; columns are distances in tokens.\n\n" + _table(
        ["encoding", *labels],
        [[name, *(_num(values.get(b)) for b in labels)] for name, values in table.items()],
    )


def write_report(out_dir, settings: dict[str, Any], runs: dict[str, dict[str, Any]]) -> list[Path]:
    """Write results.csv, the three plots and report.md into ``out_dir``; return their paths."""
    out_dir = Path(out_dir)
    rows = result_rows(runs)
    train_length = settings["train_length"]
    paths = [out_dir / name for name in ("results.csv", "ppl_vs_length.png", "entropy_vs_length.png",
                                          "loss_vs_position.png", "report.md")]  # fmt: skip
    write_csv(paths[0], rows)
    plot_vs_length(paths[1], rows, "perplexity", "perplexity", train_length, log_y=True)
    plot_vs_length(paths[2], rows, "attention_entropy", "attention entropy (nats)", train_length, log_y=False)
    plot_loss_vs_position(paths[3], runs, train_length)
    with atomic_path(paths[4]) as tmp:
        tmp.write_text(render_markdown(settings, runs, rows), encoding="utf-8")
    return paths
