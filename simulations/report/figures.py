"""Figures of a report (matplotlib Agg), each as PNG + PDF (vector, for a paper), in the figure style of
``simulations/report/style.py``: curves of the run, ε(δ) and RDP, attacks, audit, reconstructions. Every
title names the run (``style.run_identity``: defenses and label ε included)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import numpy as np

from simulations.report.plots import log_or_linear, run_figures
from simulations.report.style import RunIdentity, metric, run_identity, save, short_title

FIG_DIR = "report"


def _save(fig: Any, path: Path) -> str:
    """``path`` (PNG, what report.md embeds) and the same figure as PDF beside it; returns the PNG's path."""
    return str(save(fig, path))


def curves(metrics: Sequence[dict[str, Any]], out: Path, identity: RunIdentity | str) -> list[str]:
    """accuracy.png and communication.png (measured wire bytes, cumulative) over epochs 1..N, drawn as
    the run's own plots are (``simulations.report.plots``); loss.png too when the run logged its steps."""
    figs = dict(run_figures(metrics, RunIdentity(identity) if isinstance(identity, str) else identity))
    names = [("accuracy", "accuracy.png"), ("bytes", "communication.png")]
    if any(r.get("step_loss") for r in metrics):
        names.append(("loss", "loss.png"))
    out_paths = [_save(figs.pop(stem), out / name) for stem, name in names if stem in figs]
    for fig in figs.values():
        plt.close(fig)
    return out_paths


def privacy(accountant: Any, delta: float, scope: str, out: Path, identity: RunIdentity | None = None) -> list[str]:
    """epsilon_delta.png (ε as a function of δ, titled with the run and the scope's short name: the whole
    scope is in report.md) and rdp.png (the composed RDP curve of the run); ε on a linear axis where it
    spans less than a decade."""
    from vfl.privacy import epsilon_from_rdp

    run = identity.title if identity is not None else "the run"
    rdp = accountant.rdp()
    deltas = np.logspace(-12, -1, 23)
    eps = [epsilon_from_rdp(orders=accountant.orders, rdp=rdp, delta=float(d))[0] for d in deltas]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.plot(deltas, eps, marker="o", ms=3, label="ε at each δ (accountant)")
    ax.set_xscale("log")
    log_or_linear(ax, eps)
    ax.axvline(delta, color="gray", ls="--", lw=1, label=f"run's δ = {delta:g}")
    ax.set(xlabel="δ", ylabel="ε (accountant, upper bound)")
    ax.set_title(short_title(run, width=70, lines=1) + "\n" + short_title(f"ε(δ): {scope}", width=70, lines=1), fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    a = _save(fig, out / "epsilon_delta.png")
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(accountant.orders, rdp, marker="o", ms=3)
    ax.set_xscale("log")
    log_or_linear(ax, [float(v) for v in rdp])
    ax.set(xlabel="Rényi order α", ylabel="RDP ε(α), composed over the run")
    ax.set_title(short_title(f"RDP curve of {run}", width=62), fontsize=8)
    ax.grid(alpha=0.3, which="both")
    return [a, _save(fig, out / "rdp.png")]


LEAK, NO_LEAK, UNDECIDED = "tab:red", "tab:blue", "tab:olive"  # the attack bar's colour by verdict
ATTACK_COLUMNS = 4  # attacks.png: panels in rows of 4 (12 attacks: 3 rows, not one 2,600-pixel row)
VERDICT = {LEAK: "beats chance", NO_LEAK: "no better than chance", UNDECIDED: "no verdict"}


def attack_bars(results: Sequence[Any]) -> list[dict[str, Any]]:
    """One panel per attack: its value and 95 % interval, the baseline (and what it is), the colour of
    its verdict (red only when it beats chance: a failed attack whose metric is large, e.g. a
    reconstruction error, is not a red bar) and which way leakage points (``up``: larger = more leaked;
    ``down``: smaller)."""
    rows = [r for r in results if r.name != "audit" and math.isfinite(r.value) and math.isfinite(r.baseline)]
    colour = {True: LEAK, False: NO_LEAK, None: UNDECIDED}
    return [{"name": r.name, "value": r.value, "baseline": r.baseline, "colour": colour[r.succeeded],
             "leaks": "up" if r.higher_is_better_attack else "down", "ci": r.ci.to_json() if r.ci else None,
             "baseline_label": r.baseline_label} for r in rows]


def _value_text(v: float) -> str:
    return "0" if v == 0 else f"{v:.3g}"


def attacks(results: Sequence[Any], out: Path, identity: RunIdentity | None = None) -> str | None:
    """attacks.png: every attack's value (its 95 % interval as an error bar) beside its baseline, one panel
    per attack, coloured by verdict; each bar carries its number (a baseline of 0 shows as "0" on a dashed
    line at 0), the panel's title says which way is more leakage and its y axis the metric with its unit
    (``style.METRICS``); the figure's title names the run."""
    bars = attack_bars(results)
    if not bars:
        return None
    ncols = min(ATTACK_COLUMNS, len(bars))
    nrows = math.ceil(len(bars) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.4 * ncols, 2.7 * nrows + 0.5), squeeze=False)
    for ax, b in zip(axes.flat, bars, strict=False):
        ax.bar([0, 1], [b["value"], b["baseline"]], color=[b["colour"], "tab:gray"], width=0.6)
        if b["ci"] is not None:
            lo, hi = b["ci"]
            ax.errorbar([0], [b["value"]], yerr=[[max(b["value"] - lo, 0)], [max(hi - b["value"], 0)]], fmt="none",
                        ecolor="black", capsize=4, lw=1)
        ax.axhline(b["baseline"], color="tab:gray", ls="--", lw=0.9)  # the baseline stays visible at 0
        top = max([b["value"], b["baseline"], *(b["ci"] or [])])
        bottom = min([0.0, b["value"], b["baseline"], *(b["ci"] or [])])
        span = (top - bottom) or 1.0
        ax.set_ylim(bottom, top + 0.22 * span)
        above = max(b["value"], *(b["ci"] or [b["value"]]))  # the number sits above its error bar
        for x, v, y in ((0, b["value"], above), (1, b["baseline"], b["baseline"])):
            ax.annotate(_value_text(v), (x, max(y, bottom)), xytext=(0, 2), textcoords="offset points",
                        ha="center", va="bottom", fontsize=7)
        ax.set_xticks([0, 1], ["attack", short_title(b["baseline_label"], width=14)], fontsize=7)
        arrow = "↑ more = leak" if b["leaks"] == "up" else "↓ less = leak"
        ax.set_title(f"{b['name'].replace('_', ' ')}\n({arrow})", fontsize=8)
        ax.set_ylabel(short_title(metric(b["name"]).axis(), width=26), fontsize=7)
        ax.set_xlabel(VERDICT[b["colour"]] + (" (95 % CI)" if b["ci"] is not None and b["colour"] != UNDECIDED else ""),
                      fontsize=7, color=b["colour"])
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(bars):]:
        ax.set_visible(False)
    fig.suptitle(short_title(f"attacks on {identity.title if identity else 'the run'}", width=30 * ncols, lines=1)
                 + "\nerror bar: the attack's 95 % interval; dashed: its baseline", fontsize=8)
    return _save(fig, out / "attacks.png")


def audit(lower: float, upper: float | None, ceiling: float, out: Path, identity: RunIdentity | None = None) -> str:
    """audit.png: the audit's empirical lower bound beside the accountant's upper bound."""
    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    names, vals = ["audit ε lower\n(95 %, one run)", "audit ceiling\n(all guesses right)"], [lower, ceiling]
    if upper is not None and math.isfinite(upper):
        names.append("accountant ε\n(upper bound)")
        vals.append(upper)
    ax.bar(range(len(vals)), [max(v, 1e-3) for v in vals], color=["tab:red", "tab:orange", "tab:blue"][: len(vals)])
    for x, v in enumerate(vals):
        ax.annotate(_value_text(v), (x, max(v, 1e-3)), xytext=(0, 2), textcoords="offset points", ha="center",
                    fontsize=7)
    ax.set_xticks(range(len(vals)), names, fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ε (log scale)")
    ax.set_title(short_title(f"empirical privacy audit of {identity.title if identity else 'the run'}", width=62),
                 fontsize=8)
    return _save(fig, out / "audit.png")


def reconstruction_figure(run: Any, ids: np.ndarray, recon: Sequence[np.ndarray], n: int = 8) -> str | None:
    """reconstruction.png on image-like data (digits: 8x8 from concatenated parties; quadrants: 2x2)."""
    shards = run.parts[0]
    pick = np.arange(min(n, len(ids)))
    truth = [s.x_train[ids[pick]].reshape(len(pick), -1) for s in shards]
    guess = [r[pick] for r in recon]
    scheme = run.cfg.data.partition
    if scheme == "quadrants":
        shape = shards[0].input_shape[-2:]

        def image(parts: Sequence[np.ndarray], i: int) -> np.ndarray:
            q = [p[i].reshape(-1, *shape)[0] for p in parts]
            return np.block([[q[0], q[1]], [q[2], q[3]]])
    else:
        total = sum(p.shape[1] for p in truth)
        side = int(round(math.sqrt(total)))
        if scheme != "contiguous" or side * side != total:
            return None

        def image(parts: Sequence[np.ndarray], i: int) -> np.ndarray:
            return np.concatenate([p[i] for p in parts]).reshape(side, side)

    fig, axes = plt.subplots(2, len(pick), figsize=(1.1 * len(pick), 2.6), squeeze=False)
    for j in range(len(pick)):
        for row, parts in enumerate((truth, guess)):
            axes[row][j].imshow(image(parts, j), cmap="gray")
            axes[row][j].axis("off")
    axes[0][0].set_title("original", fontsize=7, loc="left")
    axes[1][0].set_title("server's reconstruction", fontsize=7, loc="left")
    fig.suptitle(short_title(f"feature reconstruction, {run_identity(run.cfg, run.summary).title}",
                             width=14 * len(pick)), fontsize=7)
    return _save(fig, Path(run.path) / FIG_DIR / "reconstruction.png")
