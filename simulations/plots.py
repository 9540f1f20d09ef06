"""PNG curves of a run: accuracy and cumulative bytes per epoch (matplotlib, no display needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _series(history: Sequence[dict[str, Any]], key: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for r in history:
        if r.get(key) is not None:
            xs.append(int(r["epoch"]) + 1)
            ys.append(float(r[key]))
    return xs, ys


def plot_run(history: Sequence[dict[str, Any]], out_dir: str | Path, title: str = "") -> list[Path]:
    """Write ``accuracy.png`` and ``bytes.png`` (and ``epsilon.png`` when accounted) into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, label in (("train_acc", "train"), ("test_acc", "test")):
        xs, ys = _series(history, key)
        if xs:
            ax.plot(xs, ys, marker="o", ms=3, label=label)
    ax.set(xlabel="epoch", ylabel="accuracy", title=title or "accuracy")
    ax.grid(alpha=0.3)
    if ax.lines:  # an empty run (stopped before its first epoch) has no curves
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "accuracy.png", dpi=110)
    plt.close(fig)
    written.append(out / "accuracy.png")

    fig, ax = plt.subplots(figsize=(5, 3.5))
    for key, label in (("cum_bytes_up", "up (party→server)"), ("cum_bytes_down", "down (server→party)")):
        xs, ys = _series(history, key)
        if xs:
            ax.plot(xs, [y / 1e6 for y in ys], marker="o", ms=3, label=label)
    ax.set(xlabel="epoch", ylabel="cumulative MB (measured wire bytes)", title=title or "communication")
    ax.grid(alpha=0.3)
    if ax.lines:  # an empty run (stopped before its first epoch) has no curves
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "bytes.png", dpi=110)
    plt.close(fig)
    written.append(out / "bytes.png")

    xs, ys = _series(history, "epsilon")
    if xs:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ax.plot(xs, ys, marker="o", ms=3)
        ax.set(xlabel="epoch", ylabel="epsilon (accountant)", title=title or "privacy")
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(out / "epsilon.png", dpi=110)
        plt.close(fig)
        written.append(out / "epsilon.png")
    return written
