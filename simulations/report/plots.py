"""Curves of a run, PNG + PDF: accuracy, loss, cumulative bytes and ε per epoch, and whatever else of
``style.METRICS`` the run logs (ROC AUC, RMSE, trees and seconds per tree of a tree ensemble; a causal LM's perplexity and
ROUGE-L, and no empty accuracy panel), in the one
figure style of ``simulations/report/style.py`` (names, units and the run's identity from there). The x
axis is the epoch counted 1..N as the run prints it (``epoch 3/10``; metrics.jsonl's ``epoch`` is
0-based); split-LLM runs draw their loss per training step (``step_loss``, the mean of every
``train.log_every_steps`` steps). The report (``figures.py``) and the sweep (``sweep_figure``) draw with
the same helpers."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from simulations.report.style import (
    RunIdentity,
    loss_kind,
    metric,
    run_identity,
    save,
    short_title,
    steady,
)

__all__ = ["UP_DOWN", "curves_figure", "epoch_axis", "log_or_linear", "loss_figure", "plot_run", "run_title",
           "save_png_pdf", "short_title", "step_loss", "sweep_figure"]

UP_DOWN = (("cum_bytes_up", "up (party→server)", {"ls": "-", "marker": "o", "zorder": 3}),
           ("cum_bytes_down", "down (server→party)", {"ls": "--", "marker": "s", "mfc": "none", "ms": 6, "zorder": 2}))
# up drawn on top with filled dots, down dashed with hollow squares: equal totals still show both
TEST_LABEL = "test (held-out rows, after the epoch)"


def _series(history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(epochs 1..N, values) of ``key`` (metrics.jsonl's ``epoch`` + 1, as the run prints it)."""
    xs, ys = [], []
    for r in history:
        if r.get(key) is not None:
            xs.append(int(r["epoch"]) + 1)
            ys.append(float(r[key]))
    return xs, ys


def run_title(cfg: Any, summary: dict[str, Any] | None = None) -> str:
    """The run's identity as one line (``style.run_identity``): name, strategy, M, seed, epochs, options, defenses."""
    return run_identity(cfg, summary).title


def epoch_axis(ax: Any, history: Sequence[dict[str, Any]]) -> None:
    """Epochs 1..N with integer ticks and half an epoch of margin (one epoch: one tick at 1)."""
    n = max((int(r["epoch"]) + 1 for r in history), default=1)
    ax.set_xlim(0.5, n + 0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    ax.set_xlabel("epoch")


def log_or_linear(ax: Any, values: Sequence[float], *, axis: str = "y") -> None:
    """A log scale only where the positive values span at least a decade; a narrow range stays linear
    (a log axis over 65..130 labels its ticks 7×10¹, 8×10¹...)."""
    pos = [v for v in values if v > 0 and math.isfinite(v)]
    wide = len(pos) == len(values) and len(pos) > 1 and max(pos) / min(pos) >= 10
    (ax.set_yscale if axis == "y" else ax.set_xscale)("log" if wide else "linear")


def step_loss(history: Sequence[dict[str, Any]]) -> tuple[list[float], list[float], list[float]]:
    """(steps, mean losses, each epoch's last step) from the rows' ``step_loss`` ([[step, loss], ...])."""
    xs: list[float] = []
    ys: list[float] = []
    ends: list[float] = []
    for r in history:
        pts = r.get("step_loss") or []
        for step, loss in pts:
            xs.append(float(step))
            ys.append(float(loss))
        if pts:
            ends.append(float(pts[-1][0]))
    return xs, ys, ends


def curves_figure(history: Sequence[dict[str, Any]], curves: Sequence[tuple[str, str, dict[str, Any]]], *,
                  ylabel: str, title: str, scale: float = 1.0, from_zero: bool = False, legend: bool = True) -> Any:
    """One figure of per-epoch curves: ``curves`` is (metrics key, legend label, plot style) each; epochs
    1..N; ``from_zero``: the y axis starts at 0 (totals: a 0.5 % gap must not fill the figure). The legend
    says what each curve is measured on; ``legend=False`` where the y label already names the one curve."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    drawn: list[float] = []
    for key, label, style in curves:
        xs, ys = _series(history, key)
        if xs:
            ax.plot(xs, [y * scale for y in ys], **{"marker": "o", "ms": 3, **style}, label=label)
            drawn += [y * scale for y in ys]
    epoch_axis(ax, history)
    if not steady(ax, drawn) and from_zero and ax.lines:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel)
    ax.set_title(short_title(title), fontsize=9)
    ax.grid(alpha=0.3)
    if ax.lines and legend:  # an empty run (stopped at once) has none
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def loss_figure(history: Sequence[dict[str, Any]], *, title: str, train_label: str = "train (the epoch's training batches)"
                ) -> Any:
    """The loss per epoch; with ``step_loss`` (split-LLM runs) the training loss per logged window of
    steps on a step axis, each epoch's end dotted and its test loss a diamond there."""
    ylabel = f"loss ({loss_kind(history)})"
    xs, ys, ends = step_loss(history)
    if not xs:
        return curves_figure(history, (("train_loss", train_label, {}), ("test_loss", TEST_LABEL, {})),
                             ylabel=ylabel, title=title)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    every = int(xs[0])  # the first window closes at step N (train.log_every_steps), unless the epoch is shorter
    ax.plot(xs, ys, marker="o", ms=2.5, lw=1.2, label=f"train (mean of every {every} steps)")
    test = [(end, float(r["test_loss"])) for r, end in zip([r for r in history if r.get("step_loss")], ends, strict=True)
            if r.get("test_loss") is not None]
    if test:
        ax.plot(*zip(*test, strict=True), ls="none", marker="D", ms=5, label="test (held-out rows, end of epoch)")
    for end in ends:
        ax.axvline(end, color="gray", ls=":", lw=0.8)
    ax.set_xlim(0, max(xs) * 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="training step (dotted: end of each epoch)", ylabel=ylabel)
    ax.set_title(short_title(title), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_png_pdf(fig: Any, path: str | Path, *, dpi: int = 110) -> Path:
    """``path`` as PNG and the same figure as PDF beside it (vector, for a paper); closes ``fig``."""
    return save(fig, path, dpi=dpi)


def _pair(history: Sequence[dict[str, Any]], train: str, test: str, ident: RunIdentity, *, unit: str) -> Any:
    """Train and test of one measure (e.g. ``train_auc``/``test_auc``) in one figure: with both, a legend
    says which is which; with one, the y label names it."""
    have = [k for k in (train, test) if _series(history, k)[0]]
    if len(have) == 1:
        m = metric(have[0])
        return curves_figure(history, ((have[0], m.name, {}),), ylabel=m.axis(), title=ident.title, scale=m.scale,
                             legend=False)
    return curves_figure(history, ((train, ident.train_label(), {}), (test, TEST_LABEL, {})),
                         ylabel=unit, title=ident.title)


def run_figures(history: Sequence[dict[str, Any]], ident: RunIdentity) -> list[tuple[str, Any]]:
    """(file stem, figure) of every curve the run logged: accuracy, loss, bytes, ε; AUC, RMSE, trees and
    seconds per tree where logged (a tree ensemble's rows)."""
    def has(*keys: str) -> bool:
        return any(_series(history, k)[0] for k in keys)

    figs: list[tuple[str, Any]] = []
    if has("train_acc", "test_acc") or not history:
        figs.append(("accuracy", _pair(history, "train_acc", "test_acc", ident, unit="accuracy (fraction of rows)")))
    figs.append(("loss", loss_figure(history, title=ident.title, train_label=ident.train_label())))
    if has("train_ppl", "test_ppl"):  # causal-LM runs (ushape-lora/-p3eft)
        fig = _pair(history, "train_ppl", "test_ppl", ident, unit="perplexity (response tokens)")
        log_or_linear(fig.axes[0], [y for k in ("train_ppl", "test_ppl") for y in _series(history, k)[1]])
        figs.append(("perplexity", fig))
    if has("rouge_l"):
        m = metric("rouge_l")
        figs.append(("rouge_l", curves_figure(history, (("rouge_l", "test generations", {}),), ylabel=m.axis(),
                                              title=ident.title, legend=False)))
    figs.append(("bytes", curves_figure(history, UP_DOWN, ylabel="cumulative MB (10⁶ measured wire bytes)",
                                        title=ident.title, scale=1e-6, from_zero=True)))
    if has("epsilon"):
        deltas = {r.get("delta") for r in history if r.get("epsilon") is not None}
        at = f" at δ={deltas.pop():g}" if len(deltas) == 1 and None not in deltas else ""
        figs.append(("epsilon", curves_figure(history, (("epsilon", "ε", {}),), ylabel=f"ε{at} (accountant, upper "
                                              "bound)", title=ident.title, legend=False)))
    if has("train_auc", "test_auc"):
        figs.append(("auc", _pair(history, "train_auc", "test_auc", ident, unit="ROC AUC")))
    if has("train_rmse", "test_rmse"):
        figs.append(("rmse", _pair(history, "train_rmse", "test_rmse", ident, unit="RMSE (target units)")))
    for key, stem in (("n_trees", "trees"), ("s_per_tree", "tree_time")):
        if has(key):
            m = metric(key)
            figs.append((stem, curves_figure(history, ((key, m.name, {}),), ylabel=m.axis(), title=ident.title,
                                             from_zero=True, legend=False)))
    return figs


def plot_run(history: Sequence[dict[str, Any]], out_dir: str | Path, title: str = "", *,
             identity: RunIdentity | None = None) -> list[Path]:
    """Every figure of ``run_figures`` as PNG + PDF in ``out_dir``; ``identity`` (``style.run_identity``)
    titles them and names what the training curve is measured on (``title`` alone: a bare title)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    ident = identity or RunIdentity(title or "run")
    written: list[Path] = []
    for name, fig in run_figures(history, ident):
        png = save(fig, out / f"{name}.png")
        written += [png, png.with_suffix(".pdf")]
    return written


def _labels(rows: Sequence[dict[str, Any]], varied: Sequence[str]) -> list[str]:
    one = len(varied) == 1  # one swept key: its values on the axis, its name below
    return [str(r[varied[0]]) if one else " ".join(f"{k}={r[k]}" for k in varied) or "base" for r in rows]


def sweep_figure(rows: Sequence[dict[str, Any]], keys: Sequence[str], metrics: Sequence[str], path: str | Path, *,
                 identity: str = "", variance: str = "") -> Path | None:
    """``sweep.png`` (+ PDF): one panel per metric (its readable name as the title, its unit on the y axis,
    bytes in MB), mean ± sample std over the seeds of each setting (no bar where one seed gives no std);
    the title names the config (``identity``, without the swept keys), the fixed settings and what the
    ± is over (``variance``). None when no metric has a number."""
    shown = [m for m in metrics if any(r.get(f"{m}_mean") is not None for r in rows)]
    if not shown:
        return None
    varied = [k for k in keys if len({str(r[k]) for r in rows}) > 1]  # a --set with one value names no setting
    fixed = ", ".join(f"{k}={rows[0][k]}" for k in keys if k not in varied)
    labels = _labels(rows, varied)
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.0 * nrows + 0.7), squeeze=False)
    wide = max(map(len, labels)) > 8
    for ax, m in zip(axes.flat, shown, strict=False):
        spec = metric(m)
        xs = list(range(len(rows)))
        pts = [(x, float(r[f"{m}_mean"]), float(r.get(f"{m}_std") or 0.0)) for x, r in zip(xs, rows, strict=True)
               if r.get(f"{m}_mean") is not None]
        means = [p[1] * spec.scale for p in pts]
        ax.errorbar([p[0] for p in pts], means, yerr=[p[2] * spec.scale for p in pts], fmt="o", capsize=4, ms=4)
        steady(ax, [p[1] * spec.scale + s * p[2] * spec.scale for p in pts for s in (-1, 0, 1)])
        ax.set_xticks(xs, labels, fontsize=7, rotation=30 if wide else 0, ha="right" if wide else "center")
        ax.set_xlim(-0.5, len(rows) - 0.5)
        ax.set_title(spec.name, fontsize=9)
        ax.set_ylabel(spec.unit or spec.name, fontsize=8)
        if len(varied) == 1:
            ax.set_xlabel(varied[0], fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3, axis="y")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    n = sorted({int(r.get("n", 0)) for r in rows})
    spread = variance or f"mean ± std over {'/'.join(map(str, n))} seed(s) per setting"
    head = " · ".join(p for p in (identity, f"fixed: {fixed}" if fixed else "") if p)
    fig.suptitle("\n".join([*([short_title(head, width=110, lines=1)] if head else []),
                            short_title(spread, width=120, lines=3)]), fontsize=8)
    return save(fig, path)
