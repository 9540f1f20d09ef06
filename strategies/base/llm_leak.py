"""Driver-side label-leakage scoring of what each model server saw (the experimenter's view).

A server's log holds rows it observed or computed, keyed by (epoch, step, adapter, row): ``act``
the activations it returned, ``grad`` the gradient pieces it received, ``theta`` the g_h rows it
recovered from two successive adapter states (the θ-difference attack,
``parties/llm/p3eft/curious.py``) and ``cat`` the concatenation [h(x, θ_1) … h(x, θ_n)] of every
adapter set it holds (key adapter −1). The driver maps keys to sample ids through the shared batch
schedule, looks up the TRUE labels (which the server never has) and scores every stream (server,
source, adapter set): the windowed spectral/norm/k-means metrics, on gradient-like streams also the
sign-invariant clustering attack (``sign``), and a cross-validated logistic-regression probe
(``probe``, supervised: reported beside ``leak``, not in it). Per epoch each metric is the max over
streams; the run reports the worst (max) epoch, as P3EFT's Tables do. ``leak_{source}`` is the max
over one source's streams (``leak_act``: what the paper reports; ``leak_grad``: the pieces),
``leak`` the max over all sources and unsupervised attacks.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from vfl.attacks.label_probes import probe_accuracy, sign_invariant_accuracy
from vfl.attacks.leakage import METRICS, windowed_leak
from vfl.core.errors import ProtocolError
from vfl.data.sampling import Schedule, derive_seed

SOURCES = ("act", "grad", "theta", "cat")
GRADIENT_LIKE = ("grad", "theta")  # rows known up to a sign per example: the sign-invariant attack applies
EXTRA = ("sign", "probe")
KEYS = ("leak", *(f"leak_{m}" for m in (*METRICS, *EXTRA)), *(f"leak_{s}" for s in SOURCES))


def _max(a: float, b: float) -> float:
    if math.isnan(a):
        return b
    return a if math.isnan(b) else max(a, b)


class LeakTracker:
    """Scores server logs epoch by epoch and keeps the worst value of every metric over training."""

    def __init__(self, *, y_train: np.ndarray, schedule: Schedule, window: int, seed: int, probe: bool = True) -> None:
        self.y, self.schedule, self.window, self.seed = np.asarray(y_train), schedule, window, seed
        self.probe = probe
        self.epoch_values = dict.fromkeys(KEYS, math.nan)
        self.worst_values = dict.fromkeys(KEYS, math.nan)
        self.streams: dict[str, float] = {}
        self.probes: dict[str, float] = {}
        self._calls = 0

    def state(self) -> dict[str, object]:
        """JSON-able: the worst values so far and the per-stream maxima (NaN as None)."""
        def clean(d: dict[str, float]) -> dict[str, float | None]:
            return {k: None if math.isnan(v) else v for k, v in d.items()}

        return {"worst": clean(self.worst_values), "epoch": clean(self.epoch_values), "streams": clean(self.streams),
                "probes": clean(self.probes), "calls": self._calls}

    def load_state(self, state: dict[str, object]) -> None:
        def nan(d: object) -> dict[str, float]:
            return {str(k): math.nan if v is None else float(v) for k, v in dict(d or {}).items()}  # type: ignore[call-overload]

        self.worst_values.update(nan(state.get("worst")))
        self.epoch_values.update(nan(state.get("epoch")))
        self.streams, self.probes = nan(state.get("streams")), nan(state.get("probes"))
        self._calls = int(state.get("calls") or 0)  # type: ignore[call-overload]

    def sample_ids(self, keys: np.ndarray) -> np.ndarray:
        """(epoch, step, adapter, row) keys -> training sample ids (via the seeded batch order)."""
        out = np.empty(len(keys), dtype=np.int64)
        for e, s in np.unique(keys[:, :2], axis=0) if len(keys) else []:
            sel = (keys[:, 0] == e) & (keys[:, 1] == s)
            out[sel] = self.schedule.train_ids(int(e), int(s))[keys[sel, 3]]
        return out

    def _put(self, key: str, value: float) -> None:
        self.epoch_values[key] = _max(self.epoch_values[key], value)

    def observe(self, *, server: int, log: Callable[[str], np.ndarray]) -> None:
        """Score one server's drained log (``log(name)`` reads ``{act,grad,theta,cat}_{rows,keys}``;
        a source missing from the log is skipped)."""
        self._calls += 1
        rng = np.random.default_rng(derive_seed("leak", self.seed, self._calls))
        for source in SOURCES:
            try:
                rows, keys = log(f"{source}_rows"), log(f"{source}_keys")
            except (KeyError, ProtocolError):  # a server without that attack (head-only: no adapters)
                continue
            for adapter in np.unique(keys[:, 2]) if len(keys) else []:
                sel = keys[:, 2] == adapter
                if sel.sum() < 4:
                    continue
                x, y = rows[sel], self.y[self.sample_ids(keys[sel])]
                res = windowed_leak(x, y, window=self.window, rng=rng)
                if source in GRADIENT_LIKE:
                    res["sign"] = sign_invariant_accuracy(x, y, seed=int(rng.integers(2**31 - 1)))
                    res["leak"] = _max(res["leak"], res["sign"])
                for m in (*METRICS, "sign"):
                    self._put(f"leak_{m}", res.get(m, math.nan))
                self._put("leak", res["leak"])
                self._put(f"leak_{source}", res["leak"])
                name = f"server{server}/{source}/adapter{int(adapter)}"
                self.streams[name] = _max(self.streams.get(name, math.nan), res["leak"])
                if self.probe:
                    acc = probe_accuracy(x, y, seed=int(rng.integers(2**31 - 1)))
                    self._put("leak_probe", acc)
                    self.probes[name] = _max(self.probes.get(name, math.nan), acc)

    def epoch_summary(self) -> dict[str, float]:
        """This epoch's values (NaN where a server saw nothing) and reset; updates the worst."""
        out = dict(self.epoch_values)
        for k, v in out.items():
            self.worst_values[k] = _max(self.worst_values[k], v)
        self.epoch_values = dict.fromkeys(KEYS, math.nan)
        return out

    def worst(self) -> dict[str, object]:
        """Worst (max over epochs) value of every metric, same keys as the epoch lines, and per stream."""
        return {**self.worst_values, "leak_by_stream": dict(sorted(self.streams.items())),
                "probe_by_stream": dict(sorted(self.probes.items()))}


def sign_invariant_label_attack(rows: np.ndarray, y: np.ndarray, *, num_classes: int, seed: int) -> float:
    """The sign-invariant clustering attack on m = B pieces (``vfl.attacks.label_probes``); kept under
    this name for the m = B refusal's tests. ``num_classes`` must be the number of label values."""
    if len(np.unique(y)) != num_classes:
        raise ValueError(f"{len(np.unique(y))} label values for num_classes={num_classes}")
    return sign_invariant_accuracy(rows, y, seed=seed)
