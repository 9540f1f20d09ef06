"""Figures of a report (matplotlib Agg), each as PNG + PDF (vector, for a paper): curves of the run, ε(δ)
and RDP, attacks, audit, reconstructions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from simulations.report.plots import UP_DOWN, curves_figure, log_or_linear, loss_figure, short_title  # noqa: E402

FIG_DIR = "report"


def _save(fig: Any, path: Path) -> str:
    """``path`` (PNG, what report.md embeds) and the same figure as PDF beside it; returns the PNG's path."""
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for target, kwargs in ((path, {"dpi": 110}), (path.with_suffix(".pdf"), {})):
        tmp = target.with_name(f".{target.name}.tmp")  # whole or not at all: an interrupted report leaves the old one
        fig.savefig(tmp, format=target.suffix[1:], **kwargs)
        os.replace(tmp, target)
    plt.close(fig)
    return str(path)


def curves(metrics: Sequence[dict[str, Any]], out: Path, title: str) -> list[str]:
    """accuracy.png and communication.png (measured wire bytes, cumulative) over epochs 1..N, drawn as
    the run's own plots are (``simulations.report.plots``); loss.png too when the run logged its steps."""
    figs = [("accuracy.png", curves_figure(metrics, (("train_acc", "train", {}), ("test_acc", "test", {})),
                                           ylabel="accuracy", title=title)),
            ("communication.png", curves_figure(metrics, UP_DOWN, ylabel="cumulative MB (measured wire bytes)",
                                                title=title, scale=1e-6, from_zero=True))]
    if any(r.get("step_loss") for r in metrics):
        figs.append(("loss.png", loss_figure(metrics, title=title)))
    return [_save(fig, out / name) for name, fig in figs]


def privacy(accountant: Any, delta: float, scope: str, out: Path) -> list[str]:
    """epsilon_delta.png (ε as a function of δ, the scope's short name as its title: the whole scope is in
    report.md) and rdp.png (the composed RDP curve); ε on a linear axis where it spans less than a decade."""
    from vfl.privacy import epsilon_from_rdp

    rdp = accountant.rdp()
    deltas = np.logspace(-12, -1, 23)
    eps = [epsilon_from_rdp(orders=accountant.orders, rdp=rdp, delta=float(d))[0] for d in deltas]
    fig, ax = plt.subplots(figsize=(5.5, 3.5))
    ax.plot(deltas, eps, marker="o", ms=3)
    ax.set_xscale("log")
    log_or_linear(ax, eps)
    ax.axvline(delta, color="gray", ls="--", lw=1, label=f"run's δ = {delta:g}")
    ax.set(xlabel="δ", ylabel="ε (accountant, upper bound)")
    ax.set_title(short_title(f"ε(δ): {scope}", width=60), fontsize=8)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    a = _save(fig, out / "epsilon_delta.png")
    fig, ax = plt.subplots(figsize=(5, 3.3))
    ax.plot(accountant.orders, rdp, marker="o", ms=3)
    ax.set_xscale("log")
    log_or_linear(ax, [float(v) for v in rdp])
    ax.set(xlabel="Rényi order α", ylabel="RDP ε(α), composed", title="RDP curve of the run")
    ax.grid(alpha=0.3, which="both")
    return [a, _save(fig, out / "rdp.png")]


LEAK, NO_LEAK, UNDECIDED = "tab:red", "tab:blue", "tab:olive"  # the attack bar's colour by verdict
ATTACK_COLUMNS = 4  # attacks.png: panels in rows of 4 (12 attacks: 3 rows, not one 2,600-pixel row)
VERDICT = {LEAK: "beats chance", NO_LEAK: "no better than chance", UNDECIDED: "no verdict"}


def attack_bars(results: Sequence[Any]) -> list[dict[str, Any]]:
    """One panel per attack: its value, the chance baseline, the colour of its verdict (red only when
    it beats chance: a failed attack whose metric is large, e.g. a reconstruction error, is not a red
    bar) and which way leakage points (``up``: larger = more leaked; ``down``: smaller)."""
    rows = [r for r in results if r.name != "audit" and math.isfinite(r.value) and math.isfinite(r.baseline)]
    colour = {True: LEAK, False: NO_LEAK, None: UNDECIDED}
    return [{"name": r.name, "value": r.value, "baseline": r.baseline, "colour": colour[r.succeeded],
             "leaks": "up" if r.higher_is_better_attack else "down"} for r in rows]


def attacks(results: Sequence[Any], out: Path) -> str | None:
    """attacks.png: every attack's value beside its chance baseline (one panel per attack), coloured
    by verdict, the panel's title saying which way is more leakage."""
    bars = attack_bars(results)
    if not bars:
        return None
    ncols = min(ATTACK_COLUMNS, len(bars))
    nrows = math.ceil(len(bars) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(2.3 * ncols, 2.6 * nrows), squeeze=False)
    for ax, b in zip(axes.flat, bars, strict=False):
        ax.bar([0, 1], [b["value"], b["baseline"]], color=[b["colour"], "tab:gray"])
        ax.set_xticks([0, 1], ["attack", "chance"], fontsize=7)
        arrow = "↑ more = leak" if b["leaks"] == "up" else "↓ less = leak"
        ax.set_title(f"{b['name'].replace('_', ' ')}\n({arrow})", fontsize=8)
        ax.set_xlabel(VERDICT[b["colour"]], fontsize=7, color=b["colour"])
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(bars):]:
        ax.set_visible(False)
    return _save(fig, out / "attacks.png")


def audit(lower: float, upper: float | None, ceiling: float, out: Path) -> str:
    """audit.png: the audit's empirical lower bound beside the accountant's upper bound."""
    fig, ax = plt.subplots(figsize=(4.5, 3.2))
    names, vals = ["audit ε lower\n(95 %, one run)", "audit ceiling\n(all guesses right)"], [lower, ceiling]
    if upper is not None and math.isfinite(upper):
        names.append("accountant ε\n(upper bound)")
        vals.append(upper)
    ax.bar(range(len(vals)), [max(v, 1e-3) for v in vals], color=["tab:red", "tab:orange", "tab:blue"][: len(vals)])
    ax.set_xticks(range(len(vals)), names, fontsize=7)
    ax.set_yscale("log")
    ax.set(ylabel="ε", title="empirical privacy audit")
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
    return _save(fig, Path(run.path) / FIG_DIR / "reconstruction.png")
