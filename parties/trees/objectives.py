"""The boosting objectives by XGBoost's names: gradients, hessians, base scores and metrics.

Computed in float32 as XGBoost 3.2 computes them (``regression_loss.h``, ``multiclass_obj.cu``), so a
federated tree sees the same per-row (g, h) as ``xgboost.train``: ``binary:logistic`` (g = p − y,
h = max(p(1 − p), 1e-16)), ``multi:softmax``/``multi:softprob`` (one tree per class per round,
h = max(2p(1 − p), 1e-16)) and ``reg:squarederror`` (g = ŷ − y, h = 1). Only the label holder runs
this module: labels and margins never leave it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.core.errors import ConfigError

OBJECTIVES = ("binary:logistic", "multi:softmax", "multi:softprob", "reg:squarederror")
_EPS = np.float32(1e-16)


def sigmoid32(x: np.ndarray) -> np.ndarray:
    """XGBoost's float ``Sigmoid`` (clamped exponent, 1e-16 in the denominator)."""
    x = np.minimum(-np.asarray(x, dtype=np.float32), np.float32(88.7))
    return (np.float32(1.0) / (np.exp(x) + np.float32(1.0) + _EPS)).astype(np.float32)


def softmax32(margins: np.ndarray) -> np.ndarray:
    """Row-wise softmax as XGBoost's multiclass gradient computes it (float exp, double sum)."""
    m = np.asarray(margins, dtype=np.float32)
    wmax = np.maximum(m.max(axis=1, keepdims=True), np.float32(np.finfo(np.float32).tiny))
    e = np.exp(m - wmax).astype(np.float32)
    wsum = e.astype(np.float64).sum(axis=1, keepdims=True).astype(np.float32)
    return (e / wsum).astype(np.float32)


@dataclass(frozen=True)
class Objective:
    """One objective: ``name`` and ``num_class`` (1 output for binary and regression)."""

    name: str
    num_class: int = 1

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ConfigError("params.objective", f"got {self.name!r}; allowed: {', '.join(OBJECTIVES)}")

    @property
    def multiclass(self) -> bool:
        return self.name.startswith("multi:")

    @property
    def regression(self) -> bool:
        return self.name == "reg:squarederror"

    @property
    def outputs(self) -> int:
        """Trees per boosting round (one per class for multiclass)."""
        return self.num_class if self.multiclass else 1

    def base_margin(self, y: np.ndarray, base_score: float | None) -> np.ndarray:
        """The starting margin per output: ``base_score`` given (a probability for binary:logistic, a
        margin for the others), or XGBoost 3.2's estimate from the labels (mean; for multiclass
        ln p_k − mean_k ln p_k of the class frequencies)."""
        k = self.outputs
        if self.multiclass:
            if base_score is not None:
                return np.full(k, base_score, dtype=np.float32)
            freq = np.bincount(np.asarray(y, dtype=np.int64), minlength=k).astype(np.float32) / np.float32(len(y))
            logp = np.log(np.maximum(freq, np.float32(1e-6))).astype(np.float32)
            return (logp - np.float32(logp.mean(dtype=np.float32))).astype(np.float32)
        score = np.float32(np.mean(y, dtype=np.float64)) if base_score is None else np.float32(base_score)
        if self.name == "binary:logistic":
            if not 0.0 < float(score) < 1.0:
                raise ConfigError("params.base_score", f"got {float(score)}; binary:logistic needs a probability "
                                  "in (0, 1)")
            return np.asarray([-np.log(np.float32(1.0) / score - np.float32(1.0))], dtype=np.float32)
        return np.asarray([score], dtype=np.float32)

    def gradients(self, margins: np.ndarray, y: np.ndarray, k: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """(g, h) float32 per row for output ``k`` at the current ``margins`` (N, outputs)."""
        if self.multiclass:
            p = softmax32(margins)[:, k]
            h = np.maximum(np.float32(2.0) * p * (np.float32(1.0) - p), _EPS).astype(np.float32)
            g = np.where(np.asarray(y) == k, p - np.float32(1.0), p).astype(np.float32)
            return g, h
        m = margins[:, 0]
        if self.name == "binary:logistic":
            p = sigmoid32(m)
            return (p - y.astype(np.float32)).astype(np.float32), np.maximum(p * (np.float32(1.0) - p), _EPS)
        return (m - y.astype(np.float32)).astype(np.float32), np.ones(len(m), dtype=np.float32)

    def predict(self, margins: np.ndarray) -> np.ndarray:
        """Probabilities (binary: P(y = 1); multiclass: (N, K)) or regression values."""
        if self.multiclass:
            return softmax32(margins)
        if self.name == "binary:logistic":
            return sigmoid32(margins[:, 0])
        return margins[:, 0]

    def metrics(self, margins: np.ndarray, y: np.ndarray, prefix: str) -> dict[str, float]:
        """The loss (logloss, mlogloss or rmse) and the task's metrics (auc and acc for binary, acc for
        multiclass, rmse for regression), keys prefixed with ``prefix`` ("train_"/"test_")."""
        out: dict[str, float] = {}
        if len(y) == 0:
            return out
        p = self.predict(margins).astype(np.float64)
        if self.regression:
            rmse = float(np.sqrt(np.mean((p - np.asarray(y, dtype=np.float64)) ** 2)))
            out[f"{prefix}loss"] = out[f"{prefix}rmse"] = rmse
            return out
        yi = np.asarray(y, dtype=np.int64)
        if self.multiclass:
            pk = np.clip(p[np.arange(len(yi)), yi], 1e-15, 1.0)
            out[f"{prefix}loss"] = float(-np.mean(np.log(pk)))
            out[f"{prefix}acc"] = float(np.mean(p.argmax(axis=1) == yi))
            return out
        q = np.clip(p, 1e-15, 1 - 1e-15)
        out[f"{prefix}loss"] = float(-np.mean(yi * np.log(q) + (1 - yi) * np.log(1 - q)))
        out[f"{prefix}acc"] = float(np.mean((p > 0.5) == (yi == 1)))
        auc = roc_auc(p, yi)
        if auc is not None:
            out[f"{prefix}auc"] = auc
        return out


def roc_auc(score: np.ndarray, y: np.ndarray) -> float | None:
    """Area under the ROC curve (Mann-Whitney, ties counted half); None with a single class."""
    from scipy.stats import rankdata

    yi = np.asarray(y)
    pos, neg = int(np.sum(yi == 1)), int(np.sum(yi == 0))
    if pos == 0 or neg == 0:
        return None
    r = rankdata(np.asarray(score, dtype=np.float64))
    return float((r[yi == 1].sum() - pos * (pos + 1) / 2.0) / (pos * neg))
