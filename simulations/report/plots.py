"""Curves of a run, PNG + PDF: accuracy, loss, cumulative bytes and ε per epoch (matplotlib, no display
needed). The x axis is metrics.jsonl's 0-based epoch with integer ticks; ε is labelled with its δ."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402


def _series(history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    """(epochs, values) of ``key``; the epoch as in metrics.jsonl (0-based)."""
    xs, ys = [], []
    for r in history:
        if r.get(key) is not None:
            xs.append(int(r["epoch"]))
            ys.append(float(r[key]))
    return xs, ys


def run_title(cfg: Any) -> str:
    """``name (strategy) M=4 seed=0 b=16 β=0.25``: what a figure in a paper needs to be read alone
    (the strategy's numeric options, whatever the strategy; Greek for beta/sigma/eta). Zeros are left
    out: a 0 option means off or automatic (``threshold: 0`` is ceil(2(M-1)/3)), not a value to read."""
    greek = {"beta": "β", "sigma": "σ", "eta": "η"}
    params = cfg.to_dict().get("params") or {}
    opts = [f"{greek.get(k, k)}={v:g}" for k, v in params.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0][:4]
    return " ".join([f"{cfg.name} ({cfg.strategy})", f"M={cfg.num_parties}", f"seed={cfg.seed}", *opts])


def _figure(out: Path, name: str, curves: Sequence[tuple[str, list[int], list[float]]], *, ylabel: str,
            title: str) -> list[Path]:
    """One figure as ``<name>.png`` and ``<name>.pdf`` (vector, for a paper); integer epoch ticks."""
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, xs, ys in curves:
        if xs:
            ax.plot(xs, ys, marker="o", ms=3, label=label)
    ax.set(xlabel="epoch (as in metrics.jsonl)", ylabel=ylabel, title=title)
    ax.title.set_fontsize(9)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.3)
    if len(ax.lines) > 1:  # one curve needs no legend; an empty run (stopped at once) has none
        ax.legend()
    fig.tight_layout()
    paths = [out / f"{name}.png", out / f"{name}.pdf"]
    fig.savefig(paths[0], dpi=110)
    fig.savefig(paths[1])
    plt.close(fig)
    return paths


def save_png_pdf(fig: Any, path: str | Path, *, dpi: int = 110) -> Path:
    """``path`` as PNG and the same figure as PDF beside it (vector, for a paper); closes ``fig``."""
    png = Path(path)
    fig.savefig(png, dpi=dpi)
    fig.savefig(png.with_suffix(".pdf"))
    plt.close(fig)
    return png


def plot_run(history: Sequence[dict[str, Any]], out_dir: str | Path, title: str = "") -> list[Path]:
    """``accuracy``, ``loss``, ``bytes`` (and ``epsilon`` when accounted) as PNG + PDF in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = _figure(out, "accuracy", [(label, *_series(history, key)) for key, label in
                                        (("train_acc", "train"), ("test_acc", "test"))],
                      ylabel="accuracy", title=title or "accuracy")
    written += _figure(out, "loss", [(label, *_series(history, key)) for key, label in
                                     (("train_loss", "train"), ("test_loss", "test"))],
                       ylabel="loss (cross-entropy)", title=title or "loss")
    written += _figure(out, "bytes", [(label, xs, [y / 1e6 for y in ys]) for key, label in
                                      (("cum_bytes_up", "up (party→server)"), ("cum_bytes_down", "down (server→party)"))
                                      for xs, ys in [_series(history, key)]],
                       ylabel="cumulative MB (measured wire bytes)", title=title or "communication")
    xs, ys = _series(history, "epsilon")
    if xs:
        deltas = {r.get("delta") for r in history if r.get("epsilon") is not None}
        at = f" at δ={deltas.pop():g}" if len(deltas) == 1 and None not in deltas else ""
        written += _figure(out, "epsilon", [("ε", xs, ys)], ylabel=f"ε{at} (accountant)", title=title or "privacy")
    return written
