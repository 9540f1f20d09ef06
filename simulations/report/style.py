"""One figure style for every figure the project draws: a run's ``plots/``, a report's ``report/`` and a
sweep's ``sweep.png``.

- ``METRICS``: the one table of readable metric names and units, keyed by the names a figure draws
  (``metrics.jsonl`` and ``summary.json`` keys, the sweep's metrics, the report's attacks). A key the
  table does not know is drawn under its own name with the underscores spaced out.
- ``RC``: matplotlib settings applied when this module is imported: no offset notation (``1e6`` above a
  byte axis, ``+1.135e3`` above a flat ε), plain numbers up to 10^7.
- ``run_identity``: what a figure needs to be read alone: name, strategy, M, seed, epochs, the strategy's
  numeric options, the defenses with their options and the label ε, seeded (not private) noise. Every
  figure's title carries it.
- ``steady``: a metric that is constant (to float precision) gets a y range around its value instead of
  matplotlib's autoscale of rounding noise.
- ``save``: PNG + the same figure as PDF beside it (vector, for a paper).
"""

from __future__ import annotations

import math
import os
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RC: dict[str, Any] = {"axes.formatter.useoffset": False, "axes.formatter.limits": (-5, 7), "axes.grid": False,
      "legend.fontsize": 8, "axes.titlesize": 9, "axes.labelsize": 9, "xtick.labelsize": 8, "ytick.labelsize": 8}
matplotlib.rcParams.update(RC)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Metric:
    """A readable name, the unit drawn on the axis and the factor from the stored value to that unit."""

    name: str
    unit: str = ""
    scale: float = 1.0

    def axis(self) -> str:
        """``test accuracy (fraction)``: a y-axis label."""
        return f"{self.name} ({self.unit})" if self.unit else self.name


_FRACTION, _MB, _S = "fraction", "MB", "s"
METRICS: dict[str, Metric] = {
    # per-epoch rows (metrics.jsonl; docs/reference.md)
    "train_acc": Metric("training accuracy", _FRACTION), "test_acc": Metric("test accuracy", _FRACTION),
    "train_loss": Metric("training loss"), "test_loss": Metric("test loss"),
    "train_auc": Metric("training ROC AUC"), "test_auc": Metric("test ROC AUC"),
    "test_auprc": Metric("test area under the PR curve"),
    "train_rmse": Metric("training RMSE", "target units"), "test_rmse": Metric("test RMSE", "target units"),
    "test_f1": Metric("test F1"), "test_mcc": Metric("test MCC"),
    "train_ppl": Metric("training perplexity"), "test_ppl": Metric("test perplexity"),
    "rouge_l": Metric("ROUGE-L F of generated answers", _FRACTION),
    "n_trees": Metric("trees in the ensemble", "trees"), "s_per_tree": Metric("time per tree", _S),
    "epsilon": Metric("ε (accountant, upper bound)"), "epsilon_label": Metric("label ε"),
    "cum_bytes_up": Metric("cumulative bytes up", _MB, 1e-6), "cum_bytes_down": Metric("cumulative bytes down", _MB, 1e-6),
    "bytes_up": Metric("bytes up per epoch", _MB, 1e-6), "bytes_down": Metric("bytes down per epoch", _MB, 1e-6),
    "parties_active": Metric("parties in the epoch", "parties"),
    "train_s": Metric("training time of the epoch", _S), "epoch_s": Metric("time of the epoch", _S),
    # summaries (summary.json) and the sweep's default metrics
    "total_bytes_up": Metric("bytes up, whole run", _MB, 1e-6),
    "total_bytes_down": Metric("bytes down, whole run", _MB, 1e-6),
    "payload_bytes_up": Metric("payload bytes up, whole run", _MB, 1e-6),
    "payload_bytes_down": Metric("payload bytes down, whole run", _MB, 1e-6),
    "total_bytes": Metric("bytes up + down, whole run", _MB, 1e-6),
    "wall_s": Metric("wall time of the run", _S), "train_wall_s": Metric("training wall time", _S),
    "best_test_acc": Metric("best test accuracy (any epoch)", _FRACTION),
    # the report's attacks (simulations/report/*_attacks.py; docs/attacks.md)
    "label_inference": Metric("label leak", "AUC or accuracy"),
    "feature_reconstruction": Metric("feature MSE", "feature units²"),
    "dlg_label": Metric("label accuracy", _FRACTION), "idlg_label": Metric("label accuracy", _FRACTION),
    "dlg_input": Metric("head-input MSE", "embedding units²"),
    "membership_loss": Metric("membership ROC AUC"), "membership_label_only": Metric("membership ROC AUC"),
    "extraction": Metric("neurons recovered", _FRACTION),
    "backdoor": Metric("attack success rate", _FRACTION),
    "passive_model_completion": Metric("label accuracy", _FRACTION),
    "active_model_completion": Metric("label accuracy", _FRACTION),
    "grn_feature_inference": Metric("feature MSE", "feature units²"),
    "noisy_samples": Metric("test accuracy drop", _FRACTION), "missing_features": Metric("test accuracy drop", _FRACTION),
    "audit": Metric("empirical ε lower bound"),
    "label_leak_server": Metric("label leak", "AUC or accuracy"),
    "embedding_inversion": Metric("tokens recovered", _FRACTION), "learned_inversion": Metric("tokens recovered", _FRACTION),
    "attribute_inference": Metric("attribute accuracy", _FRACTION),
    "ushape_label_gradient": Metric("response tokens named", _FRACTION),
    "ushape_label_update": Metric("response tokens named", _FRACTION),
    "ushape_tokens_nearest": Metric("tokens named", _FRACTION),
}


def metric(key: str) -> Metric:
    """The table's entry of ``key``; ``final_X`` is X's with "final"; an unknown key its own name, spaced."""
    if key in METRICS:
        return METRICS[key]
    if key.startswith("final_") and key[6:] in METRICS:
        m = METRICS[key[6:]]
        return Metric(f"final {m.name}", m.unit, m.scale)
    return Metric(key.replace("_", " "))


def loss_kind(history: Sequence[dict[str, Any]]) -> str:
    """What the loss is: squared error for a regression run (it logs an RMSE and no accuracy), else
    cross-entropy (classification, language modelling)."""
    keys = {k for r in history for k in r}
    regression = bool(keys & {"train_rmse", "test_rmse"}) and not keys & {"train_acc", "test_acc"}
    return "squared error" if regression else "cross-entropy"


GREEK = {"beta": "β", "sigma": "σ", "eta": "η", "epsilon": "ε", "noise_multiplier": "σ", "lam": "λ", "alpha": "α"}
LABEL_RANDOMIZING = ("label_rr", "label_rr_prior")  # the head trains on randomized labels: "train" accuracy is on them


def _options(opts: dict[str, Any], *, limit: int) -> list[str]:
    """``b=16 β=0.25``: numeric options (Greek for the usual letters); zeros are off or automatic."""
    return [f"{GREEK.get(k, k)}={v:g}" for k, v in opts.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v != 0][:limit]


@dataclass(frozen=True)
class RunIdentity:
    """A run as every figure of it names it: ``title`` (at most two lines where drawn) and the note the
    training-accuracy curve carries when a defense trains on randomized labels."""

    title: str
    train_note: str = ""

    def train_label(self) -> str:
        return f"train ({self.train_note})" if self.train_note else "train (the epoch's training batches)"


def run_identity(cfg: Any, summary: dict[str, Any] | None = None, *, omit: Iterable[str] = ()) -> RunIdentity:
    """``demo (pbm) M=4 seed=0 20 epochs b=16 β=0.25 + label_rr ε=1``. ``summary`` adds the label ε a
    defense reports; ``omit`` leaves out config keys a sweep varies (``num_parties``, ``seed``,
    ``train.epochs``, ``params.X``): the sweep's axis shows them."""
    skip = set(omit)
    raw = cfg.to_dict()
    params = {k: v for k, v in (raw.get("params") or {}).items() if f"params.{k}" not in skip}
    parts = [f"{cfg.name} ({cfg.strategy})"]
    parts += [] if "num_parties" in skip else [f"M={cfg.num_parties}"]
    parts += [] if "seed" in skip else [f"seed={cfg.seed}"]
    parts += [] if "train.epochs" in skip else [f"{cfg.train.epochs} epochs"]
    parts += _options(params, limit=4)
    defenses = list(raw.get("defenses") or ()) if "defenses" not in skip else []
    for d in defenses:
        parts.append("+ " + " ".join([str(d.get("kind")), *_options({k: v for k, v in d.items() if k != "kind"},
                                                                      limit=2)]))
    s = summary or {}
    kinds = [str(d.get("kind")) for d in defenses]
    if s.get("epsilon_label") is not None and not any(k in LABEL_RANDOMIZING for k in kinds):
        parts.append(f"label ε={s['epsilon_label']:.3g}")  # label_gp: its ε comes from the accountant, not an option
    bottom = (raw.get("privacy") or {}).get("bottom_dp")
    if bottom:
        parts.append(f"+ bottom DP-SGD σ={bottom.get('noise_multiplier', 0):g}")
    if (raw.get("privacy") or {}).get("noise_rng") == "seeded" and "privacy.noise_rng" not in skip:
        parts.append("(seeded noise: not private)")
    randomized = [k for k in kinds if k in LABEL_RANDOMIZING]
    note = f"on the labels {randomized[0]} randomized, not the true ones" if randomized else ""
    return RunIdentity(" ".join(parts), note)


def short_title(text: str, *, width: int = 58, lines: int = 2) -> str:
    """``text`` on at most ``lines`` lines of ``width`` characters (cut with … beyond): a title that
    fits its figure instead of being clipped or taking half of it."""
    wrapped = textwrap.wrap(text, width) or [""]
    if len(wrapped) > lines:
        wrapped = [*wrapped[: lines - 1], textwrap.shorten(" ".join(wrapped[lines - 1:]), width, placeholder=" …")]
    return "\n".join(wrapped)


def steady(ax: Any, values: Sequence[float]) -> bool:
    """A y range of ±5 % (±1 at 0) around a metric that does not move (equal to float precision), so
    the axis shows a flat line at its value instead of autoscaled rounding noise; True when applied."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    if not vals:
        return False
    lo, hi = min(vals), max(vals)
    if hi - lo > 1e-9 * max(abs(lo), abs(hi), 1e-300):
        return False
    pad = 0.05 * abs(hi) or 1.0
    ax.set_ylim(lo - pad, hi + pad)
    return True


def save(fig: Any, path: str | Path, *, dpi: int = 110) -> Path:
    """``path`` as PNG and the same figure as PDF beside it, each whole or not at all (written to a temporary
    file, then renamed: an interrupted report or run leaves the old figure); closes ``fig``; returns the PNG."""
    png = Path(path)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    for target, kwargs in ((png, {"dpi": dpi}), (png.with_suffix(".pdf"), {})):
        tmp = target.with_name(f".{target.name}.tmp")
        fig.savefig(tmp, format=target.suffix[1:], **kwargs)
        os.replace(tmp, target)
    plt.close(fig)
    return png
