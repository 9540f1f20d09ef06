"""Curves of a run, PNG + PDF: accuracy (or a causal LM's perplexity and ROUGE-L), loss, cumulative bytes and ε per epoch (matplotlib, no display
needed). The x axis is the epoch counted 1..N as the run prints it (``epoch 3/10``; metrics.jsonl's
``epoch`` is 0-based); split-LLM runs draw their loss per training step (``step_loss``, the mean of every
``train.log_every_steps`` steps). The helpers here (epoch axis, titles, log-or-linear scales, the
up/down styles) are shared with the report's figures (``simulations/report/figures.py``)."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

UP_DOWN = (("cum_bytes_up", "up (party→server)", {"ls": "-", "marker": "o", "zorder": 3}),
           ("cum_bytes_down", "down (server→party)", {"ls": "--", "marker": "s", "mfc": "none", "ms": 6, "zorder": 2}))
# up drawn on top with filled dots, down dashed with hollow squares: equal totals still show both


def _series(history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(epochs 1..N, values) of ``key`` (metrics.jsonl's ``epoch`` + 1, as the run prints it)."""
    xs, ys = [], []
    for r in history:
        if r.get(key) is not None:
            xs.append(int(r["epoch"]) + 1)
            ys.append(float(r[key]))
    return xs, ys


def short_title(text: str, *, width: int = 58, lines: int = 2) -> str:
    """``text`` on at most ``lines`` lines of ``width`` characters (cut with … beyond): a title that
    fits its figure instead of being clipped or taking half of it."""
    wrapped = textwrap.wrap(text, width) or [""]
    if len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], textwrap.shorten(" ".join(wrapped[lines - 1:]), width, placeholder=" …")]
    return "\n".join(wrapped)


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


def run_title(cfg: Any) -> str:
    """``name (strategy) M=4 seed=0 b=16 β=0.25``: what a figure in a paper needs to be read alone
    (the strategy's numeric options, whatever the strategy; Greek for beta/sigma/eta). Zeros are left
    out: a 0 option means off or automatic (``threshold: 0`` is ceil(2(M-1)/3)), not a value to read."""
    greek = {"beta": "β", "sigma": "σ", "eta": "η"}
    params = cfg.to_dict().get("params") or {}
    opts = [f"{greek.get(k, k)}={v:g}" for k, v in params.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0][:4]
    return " ".join([f"{cfg.name} ({cfg.strategy})", f"M={cfg.num_parties}", f"seed={cfg.seed}", *opts])


def curves_figure(history: Sequence[dict[str, Any]], curves: Sequence[tuple[str, str, dict[str, Any]]], *,
                  ylabel: str, title: str, scale: float = 1.0, from_zero: bool = False) -> Any:
    """One figure of per-epoch curves: ``curves`` is (metrics key, label, plot style) each; epochs 1..N;
    ``from_zero``: the y axis starts at 0 (totals: a 0.5 % gap must not fill the figure)."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, label, style in curves:
        xs, ys = _series(history, key)
        if xs:
            ax.plot(xs, [y * scale for y in ys], **{"marker": "o", "ms": 3, **style}, label=label)
    epoch_axis(ax, history)
    if from_zero and ax.lines:
        ax.set_ylim(bottom=0)
    ax.set_ylabel(ylabel)
    ax.set_title(short_title(title), fontsize=9)
    ax.grid(alpha=0.3)
    if len(ax.lines) > 1:  # one curve needs no legend; an empty run (stopped at once) has none
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def loss_figure(history: Sequence[dict[str, Any]], *, title: str) -> Any:
    """The loss per epoch; with ``step_loss`` (split-LLM runs) the training loss per logged window of
    steps on a step axis, each epoch's end dotted and its test loss a diamond there."""
    xs, ys, ends = step_loss(history)
    if not xs:
        return curves_figure(history, (("train_loss", "train", {}), ("test_loss", "test", {})),
                             ylabel="loss (cross-entropy)", title=title)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    every = int(xs[0])  # the first window closes at step N (train.log_every_steps), unless the epoch is shorter
    ax.plot(xs, ys, marker="o", ms=2.5, lw=1.2, label=f"train (mean of every {every} steps)")
    test = [(end, float(r["test_loss"])) for r, end in zip([r for r in history if r.get("step_loss")], ends, strict=True)
            if r.get("test_loss") is not None]
    if test:
        ax.plot(*zip(*test, strict=True), ls="none", marker="D", ms=5, label="test (end of epoch)")
    for end in ends:
        ax.axvline(end, color="gray", ls=":", lw=0.8)
    ax.set_xlim(0, max(xs) * 1.02)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(xlabel="training step (dotted: end of each epoch)", ylabel="loss (cross-entropy)")
    ax.set_title(short_title(title), fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def save_png_pdf(fig: Any, path: str | Path, *, dpi: int = 110) -> Path:
    """``path`` as PNG and the same figure as PDF beside it (vector, for a paper); closes ``fig``."""
    png = Path(path)
    fig.savefig(png, dpi=dpi)
    fig.savefig(png.with_suffix(".pdf"))
    plt.close(fig)
    return png


def plot_run(history: Sequence[dict[str, Any]], out_dir: str | Path, title: str = "") -> list[Path]:
    """``accuracy`` (where the run has one), ``loss``, ``perplexity`` and ``rouge_l`` (causal-LM runs),
    ``bytes`` (and ``epsilon`` when accounted) as PNG + PDF in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figs = []
    if any(_series(history, k)[0] for k in ("train_acc", "test_acc")):  # a causal LM has none: no empty panel
        figs.append(("accuracy", curves_figure(history, (("train_acc", "train", {}), ("test_acc", "test", {})),
                                               ylabel="accuracy", title=title or "accuracy")))
    figs.append(("loss", loss_figure(history, title=title or "loss")))
    if any(_series(history, k)[0] for k in ("train_ppl", "test_ppl")):  # causal-LM runs (ushape-lora/-p3eft)
        fig = curves_figure(history, (("train_ppl", "train", {}), ("test_ppl", "test", {})),
                            ylabel="perplexity (response tokens)", title=title or "perplexity")
        log_or_linear(fig.axes[0], [y for k in ("train_ppl", "test_ppl") for y in _series(history, k)[1]])
        figs.append(("perplexity", fig))
    if _series(history, "rouge_l")[0]:
        figs.append(("rouge_l", curves_figure(history, (("rouge_l", "test generations", {}),),
                                              ylabel="ROUGE-L (greedy answers vs references)", title=title or "ROUGE-L")))
    figs.append(("bytes", curves_figure(history, UP_DOWN, ylabel="cumulative MB (measured wire bytes)",
                                        title=title or "communication", scale=1e-6, from_zero=True)))
    if _series(history, "epsilon")[0]:
        deltas = {r.get("delta") for r in history if r.get("epsilon") is not None}
        at = f" at δ={deltas.pop():g}" if len(deltas) == 1 and None not in deltas else ""
        figs.append(("epsilon", curves_figure(history, (("epsilon", "ε", {}),), ylabel=f"ε{at} (accountant)",
                                              title=title or "privacy")))
    written: list[Path] = []
    for name, fig in figs:
        png = save_png_pdf(fig, out / f"{name}.png")
        written += [png, png.with_suffix(".pdf")]
    return written


def sweep_figure(rows: Sequence[dict[str, Any]], keys: Sequence[str], metrics: Sequence[str], path: str | Path
                 ) -> Path | None:
    """``sweep.png`` (+ PDF): one panel per metric, mean ± sample std over the seeds of each setting
    (no bar where one seed gives no std); None when no metric has a number."""
    shown = [m for m in metrics if any(r.get(f"{m}_mean") is not None for r in rows)]
    if not shown:
        return None
    varied = [k for k in keys if len({str(r[k]) for r in rows}) > 1]  # a --set with one value names no setting
    fixed = ", ".join(f"{k}={rows[0][k]}" for k in keys if k not in varied)
    one = len(varied) == 1  # one swept key: its values on the axis, its name below
    labels = [str(r[varied[0]]) if one else " ".join(f"{k}={r[k]}" for k in varied) or "base" for r in rows]
    ncols = min(3, len(shown))
    nrows = math.ceil(len(shown) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.9 * nrows), squeeze=False)
    for ax, m in zip(axes.flat, shown, strict=False):
        xs = list(range(len(rows)))
        means = [r.get(f"{m}_mean") for r in rows]
        stds = [r.get(f"{m}_std") or 0.0 for r in rows]
        pts = [(x, mu, sd) for x, mu, sd in zip(xs, means, stds, strict=True) if mu is not None]
        ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], fmt="o", capsize=4, ms=4)
        ax.set_xticks(xs, labels, fontsize=7, rotation=30 if max(map(len, labels)) > 8 else 0, ha="right"
                      if max(map(len, labels)) > 8 else "center")
        ax.set_xlim(-0.5, len(rows) - 0.5)
        ax.set_title(m, fontsize=9)
        if one:
            ax.set_xlabel(varied[0], fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3, axis="y")
    for ax in list(axes.flat)[len(shown):]:
        ax.set_visible(False)
    n = sorted({int(r.get("n", 0)) for r in rows})
    seeds = f"mean ± std over {'/'.join(map(str, n))} seed(s) per setting" + (f" ({fixed})" if fixed else "")
    fig.suptitle(short_title(seeds, width=100), fontsize=9)
    fig.tight_layout()
    return save_png_pdf(fig, path)
