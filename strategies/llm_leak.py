"""Driver-side label-leakage scoring of what each model server saw (the experimenter's view).

A server's log holds rows it observed — activations it returned and gradient pieces it received —
keyed by (epoch, step, adapter, row). The driver maps keys to sample ids through the shared batch
schedule, looks up the TRUE labels (which the server never has) and scores every stream (server,
source, adapter set) with the windowed spectral/norm/k-means metrics. Per epoch each metric is
the max over streams; the run reports the worst (max) epoch, as P3EFT's Tables do.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vfl.attacks.leakage import METRICS, windowed_leak
from vfl.sampling import Schedule, derive_seed

SOURCES = ("act", "grad")
KEYS = ("leak", *(f"leak_{m}" for m in METRICS), *(f"leak_{s}" for s in SOURCES))


def _max(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    return a if math.isnan(b) else max(a, b)


class LeakTracker:
    """Scores server logs epoch by epoch and keeps the worst value of every metric over training."""

    def __init__(self, *, y_train: np.ndarray, schedule: Schedule, window: int, seed: int) -> None:
        self.y, self.schedule, self.window, self.seed = np.asarray(y_train), schedule, window, seed
        self.epoch_values = dict.fromkeys(KEYS, math.nan)
        self.worst_values = dict.fromkeys(KEYS, math.nan)
        self.streams: dict[str, float] = {}
        self._calls = 0

    def sample_ids(self, keys: np.ndarray) -> np.ndarray:
        """(epoch, step, adapter, row) keys -> training sample ids (via the seeded batch order)."""
        out = np.empty(len(keys), dtype=np.int64)
        for e, s in np.unique(keys[:, :2], axis=0) if len(keys) else []:
            sel = (keys[:, 0] == e) & (keys[:, 1] == s)
            out[sel] = self.schedule.train_ids(int(e), int(s))[keys[sel, 3]]
        return out

    def observe(self, *, server: int, log: Callable[[str], np.ndarray]) -> None:
        """Score one server's drained log (``log(name)`` reads ``{act,grad}_{rows,keys}``)."""
        self._calls += 1
        rng = np.random.default_rng(derive_seed("leak", self.seed, self._calls))
        for source in SOURCES:
            rows, keys = log(f"{source}_rows"), log(f"{source}_keys")
            for adapter in np.unique(keys[:, 2]) if len(keys) else []:
                sel = keys[:, 2] == adapter
                if sel.sum() < 4:
                    continue
                res = windowed_leak(rows[sel], self.y[self.sample_ids(keys[sel])], window=self.window, rng=rng)
                for m in METRICS:
                    self.epoch_values[f"leak_{m}"] = _max(self.epoch_values[f"leak_{m}"], res[m])
                self.epoch_values["leak"] = _max(self.epoch_values["leak"], res["leak"])
                self.epoch_values[f"leak_{source}"] = _max(self.epoch_values[f"leak_{source}"], res["leak"])
                name = f"server{server}/{source}/adapter{int(adapter)}"
                self.streams[name] = _max(self.streams.get(name, math.nan), res["leak"])

    def epoch_summary(self) -> dict[str, float]:
        """This epoch's values (NaN where a server saw nothing) and reset; updates the worst."""
        out = dict(self.epoch_values)
        for k, v in out.items():
            self.worst_values[k] = _max(self.worst_values[k], v)
        self.epoch_values = dict.fromkeys(KEYS, math.nan)
        return out

    def worst(self) -> dict[str, object]:
        """Worst (max over epochs) value of every metric, same keys as the epoch lines, and per stream."""
        return {**self.worst_values, "leak_by_stream": dict(sorted(self.streams.items()))}


def sign_invariant_label_attack(rows: np.ndarray, y: np.ndarray, *, num_classes: int, seed: int) -> float:
    """What a server holding P3EFT's m = B pieces learns about the labels: each piece is one example's
    unit gradient direction times a secret random sign, so the attacker clusters the sign-free
    outer products x xᵀ into ``num_classes`` groups (k-means) and is scored by the best matching of
    groups to labels (accuracy; chance ≈ the largest class share). Binary labels without a
    regularizer give every example the same direction ±(w₁ − w₀): nothing to cluster, chance.
    K > 2 classes give K directions: the labels come out (the case P3EFT's m = B proof excludes)."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.cluster import KMeans

    x = np.asarray(rows, dtype=np.float64)
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
    iu = np.triu_indices(x.shape[1])
    feats = np.einsum("bi,bj->bij", x, x)[:, iu[0], iu[1]]
    groups = KMeans(n_clusters=num_classes, n_init=10, random_state=seed).fit_predict(feats)
    confusion = np.zeros((num_classes, num_classes))
    np.add.at(confusion, (groups, np.asarray(y, dtype=np.int64)), 1)
    r, c = linear_sum_assignment(-confusion)
    return float(confusion[r, c].sum() / len(x))
