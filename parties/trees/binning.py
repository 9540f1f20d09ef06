"""Cut points and bins of one party's own columns by XGBoost's ``hist`` rule (computed locally).

XGBoost (``tree_method="hist"``) sketches each feature's values (float32, missing excluded) into a
weighted-quantile summary, prunes it to ``max_bin + 1`` entries (``WQSummary::SetPrune``) and takes
the pruned summary's values after the minimum as cut points, closed by ``max + |max| + 1e-5``
(``AddCutPoint``, xgboost 3.2). Here the summary is exact (every distinct value with its count):
XGBoost's streaming sketch is exact too while a feature has fewer than ~``16 * max_bin`` rows, so
the cuts agree there; beyond it XGBoost's are an approximation of these. A value ``v`` falls in bin
``i`` when ``cuts[i-1] <= v < cuts[i]`` (XGBoost's ``SearchBin``: upper bound, the last bin takes
everything above); a split "``v < cuts[j]``" sends bins ``0..j`` left.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.core.errors import DataError

MISSING = -1  # bin id of a missing (NaN) value


@dataclass(frozen=True)
class Cuts:
    """One party's cut points: ``values[ptrs[f]:ptrs[f+1]]`` are feature ``f``'s (float32)."""

    ptrs: np.ndarray  # (F + 1,) int64
    values: np.ndarray  # float32
    min_values: np.ndarray  # (F,) float32: below every value of the feature (XGBoost's min_vals)

    @property
    def num_features(self) -> int:
        return len(self.ptrs) - 1

    def of(self, feature: int) -> np.ndarray:
        return self.values[self.ptrs[feature]:self.ptrs[feature + 1]]

    def num_bins(self) -> np.ndarray:
        """Bins per feature."""
        return np.diff(self.ptrs)

    def threshold(self, feature: int, bin_: int) -> np.float32:
        """The split value of "bins ``0..bin_`` left": ``cuts[bin_]``, or below the minimum for ``bin_ = -1``."""
        return self.min_values[feature] if bin_ < 0 else self.of(feature)[bin_]


def _prune(values: np.ndarray, weights: np.ndarray, maxsize: int) -> np.ndarray:
    """The values kept by XGBoost's ``WQSummary::SetPrune`` of an exact summary (float32 ranks)."""
    size = len(values)
    if size <= maxsize:
        return values
    f32 = np.float32
    rmax = np.cumsum(weights, dtype=np.float32)
    rmin = (rmax - weights).astype(np.float32)
    begin = rmax[0]
    rng = f32(rmin[-1] - begin)
    n = maxsize - 1
    kept = [0]
    i, last = 1, 0
    for k in range(1, n):
        dx2 = f32(2) * f32(f32(f32(k) * rng) / f32(n) + begin)
        while i < size - 1 and dx2 >= f32(rmax[i + 1] + rmin[i + 1]):
            i += 1
        if i == size - 1:
            break
        # RMinNext(i) + RMaxPrev(i+1) = (rmin + w)[i] + (rmax - w)[i+1]
        if dx2 < f32(f32(rmin[i] + weights[i]) + f32(rmax[i + 1] - weights[i + 1])):
            pick = i
        else:
            pick = i + 1
        if pick != last:
            kept.append(pick)
            last = pick
    if last != size - 1:
        kept.append(size - 1)
    return values[np.asarray(kept)]


def feature_cuts(column: np.ndarray, *, max_bin: int) -> tuple[np.ndarray, np.float32]:
    """Cut points (float32, ascending) and XGBoost's ``min_vals`` of one feature's training values."""
    v = np.asarray(column, dtype=np.float32)
    v = v[~np.isnan(v)]
    if len(v) == 0:  # an empty column: one bin (XGBoost's cut 1e-5, min 1e-5)
        return np.asarray([1e-5], dtype=np.float32), np.float32(1e-5)
    distinct, counts = np.unique(v, return_counts=True)
    kept = _prune(distinct, counts.astype(np.float32), min(len(distinct), max_bin) + 1)
    required = min(len(kept), min(len(distinct), max_bin))
    cuts: list[np.float32] = []
    for j in range(1, required):
        if j == 1 or kept[j] > cuts[-1]:
            cuts.append(kept[j])
    top = kept[-1]
    cuts.append(np.float32(top + np.float32(abs(top) + np.float32(1e-5))))
    lo = kept[0]
    return np.asarray(cuts, dtype=np.float32), np.float32(lo - np.float32(abs(lo)) - np.float32(1e-5))


def compute_cuts(x: np.ndarray, *, max_bin: int) -> Cuts:
    """Every column's cuts from the party's own training rows ``x`` (N, F)."""
    if x.ndim != 2:
        raise DataError(f"trees need a 2-D table of features, got shape {x.shape}")
    if max_bin < 2:
        raise DataError(f"max_bin must be >= 2, got {max_bin}")
    per = [feature_cuts(x[:, f], max_bin=max_bin) for f in range(x.shape[1])]
    ptrs = np.zeros(len(per) + 1, dtype=np.int64)
    ptrs[1:] = np.cumsum([len(c) for c, _ in per])
    values = np.concatenate([c for c, _ in per]) if per else np.zeros(0, dtype=np.float32)
    return Cuts(ptrs=ptrs, values=values.astype(np.float32),
                min_values=np.asarray([m for _, m in per], dtype=np.float32))


def bin_matrix(x: np.ndarray, cuts: Cuts) -> np.ndarray:
    """Bin ids (N, F) int16/int32 of ``x`` under ``cuts`` (``MISSING`` for NaN; above the last cut:
    the last bin, as XGBoost's ``SearchBin``)."""
    n, f = x.shape
    if f != cuts.num_features:
        raise DataError(f"{f} columns but cuts for {cuts.num_features}")
    dtype = np.int16 if int(cuts.num_bins().max(initial=1)) < 2**15 else np.int32
    out = np.empty((n, f), dtype=dtype)
    xf = np.asarray(x, dtype=np.float32)
    for j in range(f):
        c = cuts.of(j)
        col = xf[:, j]
        b = np.searchsorted(c, col, side="right")
        np.minimum(b, len(c) - 1, out=b)
        b[np.isnan(col)] = MISSING
        out[:, j] = b
    return out
