"""The tests of a comparison, fixed before any data is seen, and their verdicts.

For each training length T, at the longest evaluation length, on the same-token extrapolation penalty
(``ltsgen.training.extrapolation``) of every evaluation document and seed:

- every encoding against NoPE and against RoPE (``comparisons``);
- the papers' claims listed in ``CLAIMS``, each with its source;

and, where the runs score cued recalls, each encoding's recalls read in their own T-token windows against
their controls (``window_recalls``).

Every test is a paired test, seeds and documents crossed (``ltsgen.training.stats``), and Holm's correction runs across
every test of the report (all training lengths). A verdict is "shown" only when the corrected p-value lies
below 5%, the difference has the claimed sign, every run behind it is trained (``trained_runs``) and it has
at least ``MIN_SEEDS`` seeds; otherwise "reversed" (significant, the other way), "not shown", "undertrained"
or "too few seeds".
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from ltsgen.encodings import rescaled
from ltsgen.training.stats import LEVEL, MIN_SEEDS, Estimate, differences, estimate, holm, paired

#: A run is trained when its windowed loss (T tokens of context, as in training) beats the unigram loss of
#: the same tokens by at least this many nats per token, on average over its evaluation lengths.
TRAINED_MARGIN = 0.5
PENALTY = "extrapolation_penalty"
FINETUNED = "+finetuned"  # the label suffix of RoPE-PI and YaRN fine-tuned at a longer length
WINDOW_METRIC = "cued recall accuracy - its control, each recall in its own T-token window"
ENTROPY = "attention_entropy_last"
APE_FORMULA = (
    "ltsgen's own reading of APE (the paper's code is not available): logit = q^T R(omega * theta, n) k / sqrt(d) "
    "- (a n + b log(1 + n) + c sqrt(n)), n = i - j, with learnable per-head omega, a > 0, b, c >= 0"
)


@dataclass(frozen=True)
class Claim:
    """``subject``'s metric is below ``reference``'s (or below 0 when ``reference`` is None; above with
    ``sign`` +1), at the longest evaluation length; entropy claims use its growth from in distribution."""

    text: str
    source: str
    subject: str
    reference: str | None
    metric: str = PENALTY
    sign: int = -1


CLAIMS = (
    Claim("RoPE's loss on the same tokens rises with context beyond the training length",
          "ALiBi (Press et al., ICLR 2022); FIRE (Li et al., ICLR 2024)", "rope", None, sign=+1),
    Claim("NoPE's loss on the same tokens rises with context beyond the training length",
          "FIRE (Li et al., ICLR 2024)", "nope", None, sign=+1),
    Claim("ALiBi extrapolates better than RoPE", "ALiBi (Press et al., ICLR 2022)", "alibi", "rope"),
    Claim("Kerple (log) extrapolates better than ALiBi", "KERPLE (Chi et al., NeurIPS 2022)", "kerple_log", "alibi"),
    Claim("Sandwich extrapolates better than RoPE", "Sandwich (Chi et al., ACL 2023)", "sandwich", "rope"),
    Claim("FIRE extrapolates better than Kerple (log)", "FIRE (Li et al., ICLR 2024), C4 at 8,192", "fire", "kerple_log"),
    Claim("FIRE extrapolates better than T5's bias", "FIRE (Li et al., ICLR 2024)", "fire", "t5"),
    Claim("YaRN (zero-shot) extrapolates better than RoPE-PI (zero-shot)", "YaRN (Peng et al., ICLR 2024)", "yarn", "rope_pi"),
    *(
        Claim(f"APE's attention entropy grows less than {other}'s as the context grows",
              "APE (Vetcha 2026), in ltsgen's parameterisation", "ape", other, metric=ENTROPY)
        for other in ("rope", "alibi", "kerple_log", "kerple_power", "sandwich", "fire")
    ),
)  # fmt: skip


class PerDocument:
    """Per-document values of every run: ``values(label, T, L, metric)`` -> {seed: [value per document]}."""

    def __init__(self, runs: list[dict[str, Any]]) -> None:
        self.table: dict[tuple[str, int, int], dict[int, dict[str, list[float]]]] = defaultdict(dict)
        for run in runs:
            for result in run["eval"]["results"]:
                key = (run["encoding"], run["train_length"], result["eval_length"])
                self.table[key][run["seed"]] = result["per_document"]

    def values(self, label: str, train_length: int, eval_length: int, metric: str) -> dict[int, list[float]]:
        return {
            seed: docs[metric]
            for seed, docs in self.table.get((label, train_length, eval_length), {}).items()
        }

    def growth(
        self, label: str, train_length: int, inside: int, far: int, metric: str
    ) -> dict[int, list[float]]:
        """Per document: ``metric`` at ``far`` minus at ``inside`` (the same documents at both lengths)."""
        near, late = (
            self.values(label, train_length, inside, metric),
            self.values(label, train_length, far, metric),
        )
        return {s: [b - a for a, b in zip(near[s], late[s], strict=True)] for s in near if s in late}


def trained_runs(runs: list[dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, Any]]:
    """Per (label, T, seed): ``margin`` (unigram minus windowed loss of the same tokens, nats, the mean over
    evaluation lengths) and ``trained`` (margin >= ``TRAINED_MARGIN``). Runs that share a key (RoPE-PI
    fine-tuned at each length beyond T, each evaluated there) count by the least trained of them."""
    grouped: dict[tuple[str, int, int], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        grouped[(run["encoding"], run["train_length"], run["seed"])].append(run)
    out = {}
    for key, members in grouped.items():
        margins = [_margin(run["eval"]["results"]) for run in members]
        results = [r for run in members for r in run["eval"]["results"]]
        out[key] = {
            "margin": min(margins), "trained": min(margins) >= TRAINED_MARGIN,
            "window_loss": sum(r["same_token_loss_window"] for r in results) / len(results),
            "unigram_loss": sum(r["unigram_loss"] for r in results) / len(results),
        }  # fmt: skip
    return out


def _margin(results: list[dict[str, Any]]) -> float:
    """Unigram minus windowed loss of the same tokens, nats, the mean over a run's evaluation lengths."""
    return sum(r["unigram_loss"] - r["same_token_loss_window"] for r in results) / len(results)


def comparisons(labels: list[str]) -> list[Claim]:
    """Every encoding against NoPE and against RoPE, on the penalty: "lower than" is the direction stated."""
    out = []
    for reference in ("nope", "rope"):
        if reference in labels:
            out += [Claim(f"{label} extrapolates better than {reference}", "comparison fixed in advance", label, reference)
                    for label in labels if label != reference and not (reference == "rope" and label == "nope")]  # fmt: skip
    return out


def tests(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every test of the report: one row per (training length, comparison, claim or window test), corrected
    by Holm across all rows; the columns of claims.csv (window tests also name their encoding: ``window_of``)."""
    data = PerDocument(runs)
    status = trained_runs(runs)
    rows = []
    for train_length in sorted({run["train_length"] for run in runs}):
        mine = [run for run in runs if run["train_length"] == train_length]
        labels = list(dict.fromkeys(run["encoding"] for run in mine))
        lengths = sorted({r["eval_length"] for run in mine for r in run["eval"]["results"]})
        inside = [n for n in lengths if n <= train_length]
        if lengths and lengths[-1] > train_length:  # else nothing beyond the training length
            rows += _claim_rows(data, status, mine, labels, train_length, inside, lengths[-1])
    for train_length in sorted({run["train_length"] for run in runs}):  # after every claim, in claims.csv too
        rows += _window_rows(
            status, [run for run in runs if run["train_length"] == train_length], train_length
        )
    for row, adjusted in zip(rows, holm([row["p"] for row in rows]), strict=True):
        row["p_holm"] = adjusted
        row["verdict"] = verdict(row)
    return rows


def _claim_rows(
    data, status, mine, labels, train_length: int, inside: list[int], far: int
) -> list[dict[str, Any]]:
    """The comparisons and claims at ``far`` (the longest evaluation length) of the runs ``mine`` of one
    training length (not yet corrected)."""
    rows = []
    seen: set[tuple] = set()
    for claim in [*CLAIMS, *comparisons(labels)]:  # a claim that is also a comparison keeps its source
        key = (claim.subject, claim.reference, claim.metric, claim.sign)
        needed = [claim.subject] + ([claim.reference] if claim.reference else [])
        if key in seen or any(name not in labels for name in needed):
            continue
        if claim.metric == ENTROPY and not inside:
            continue  # the growth of entropy is from a length within the training length
        found = _estimate(data, claim, train_length, inside[-1] if inside else None, far)
        if found is None:
            continue  # a label with no run evaluated where the test reads it (diverged, or not asked)
        seen.add(key)
        # the seeds of every run behind it (a seed whose run of one of them diverged, left out, is not)
        seeds = set.intersection(
            *({run["seed"] for run in mine if run["encoding"] == name} for name in needed)
        )
        untrained = sorted(f"{name} seed {seed}" for name in needed for seed in seeds
                           if not status[(name, train_length, seed)]["trained"])  # fmt: skip
        rows.append({"claim": claim.text, "source": claim.source, "train_length": train_length,
                     "eval_length": far, "metric": _metric_name(claim, inside[-1] if inside else None),
                     "measured": found.mean, "ci_low": found.low, "ci_high": found.high,
                     "p": found.p, "n_seeds": found.seeds, "sign": claim.sign, "untrained": untrained})  # fmt: skip
    return rows


def window_recalls(runs: list[dict[str, Any]], train_length: int) -> dict[str, dict[int, dict[str, Any]]]:
    """Per encoding and seed, the ``recall_window`` of its run at ``train_length`` (eval.json's: each cued
    recall read in its own T-token window, beside its control). RoPE-PI and YaRN zero-shot read such a
    window at factor 1, as RoPE does: one test of the same weights, kept on RoPE's row, or on the first of
    them when RoPE is not compared (not so at another ``--encoding-option`` factor). Fine-tuned variants are
    left out: each seed has one per longer length, and each is evaluated at that length alone."""
    mine = [
        run for run in runs if run["train_length"] == train_length and not run["encoding"].endswith(FINETUNED)
    ]
    per: dict[str, dict[int, dict[str, Any]]] = defaultdict(dict)
    for run in mine:
        window = run["eval"].get("recall_window")
        if window and window["recall_count"]:
            per[run["encoding"]][run["seed"]] = window
    factor_one = {run["encoding"] for run in mine if run["eval"].get("scaling") == "zero-shot"}
    same_as_rope = [label for label in per if label in factor_one and rescaled(label)]
    for label in same_as_rope if "rope" in per else same_as_rope[1:]:
        del per[label]
    return dict(per)


def window_values(seeds: dict[int, dict[str, Any]], metric: str) -> dict[int, list[float]]:
    """{seed: [``metric`` per document]} of ``window_recalls``' seeds (a document without recalls: NaN)."""
    return {s: [math.nan if v is None else v for v in w["per_document"][metric]] for s, w in seeds.items()}


def _window_rows(status, mine, train_length: int) -> list[dict[str, Any]]:
    """Each encoding's cued recalls within its training window against their controls: the gap tested above
    0, paired by seed and document (not yet corrected)."""
    rows = []
    for encoding, seeds in window_recalls(mine, train_length).items():
        gap = paired(window_values(seeds, "recall_accuracy"), window_values(seeds, "recall_accuracy_control"))
        untrained = sorted(f"{encoding} seed {seed}" for seed in seeds
                           if not status[(encoding, train_length, seed)]["trained"])  # fmt: skip
        rows.append({"claim": f"{encoding}'s cued recalls within the training window beat their control",
                     "source": "recall within the window, fixed in advance", "train_length": train_length,
                     "eval_length": train_length, "metric": WINDOW_METRIC, "measured": gap.mean,
                     "ci_low": gap.low, "ci_high": gap.high, "p": gap.p, "n_seeds": gap.seeds, "sign": +1,
                     "untrained": untrained, "window_of": encoding})  # fmt: skip
    return rows


def _estimate(
    data: PerDocument, claim: Claim, train_length: int, inside: int | None, far: int
) -> Estimate | None:
    """The claim's estimate; None when a side has no seed with a value there (both sides, paired)."""
    if claim.metric == ENTROPY:
        subject = data.growth(claim.subject, train_length, inside, far, ENTROPY)
        reference = (
            data.growth(claim.reference, train_length, inside, far, ENTROPY) if claim.reference else None
        )
    else:
        subject = data.values(claim.subject, train_length, far, claim.metric)
        reference = data.values(claim.reference, train_length, far, claim.metric) if claim.reference else None
    if reference is not None:
        subject = differences(subject, reference) if subject.keys() & reference.keys() else {}
    if all(np.isnan(np.asarray(values, dtype=np.float64)).all() for values in subject.values()):
        return None
    return estimate(subject)


def _metric_name(claim: Claim, inside: int | None) -> str:
    what = (
        f"growth of the last-T-queries attention entropy from {inside}"
        if claim.metric == ENTROPY
        else "penalty"
    )
    return what if claim.reference is None else f"{what}: {claim.subject} - {claim.reference}"


def verdict(row: dict[str, Any]) -> str:
    """ "shown", "reversed", "not shown", "undertrained" or "too few seeds" (see the module docstring)."""
    if row["untrained"]:
        return "undertrained"
    if row["n_seeds"] < MIN_SEEDS:
        return "too few seeds"
    if row["p_holm"] is None or row["p_holm"] >= LEVEL:
        return "not shown"
    return "shown" if row["measured"] * row["sign"] > 0 else "reversed"
