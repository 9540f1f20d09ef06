"""Split finding by XGBoost's rule on exact integer histograms (the label holder's side).

A node's histogram of one owner's columns holds, per feature, the (G, H) sums of every bin and of the
missing rows, as fixed-point integers (``scale`` = 2^frac), so the plaintext and the encrypted paths
see the same numbers. The candidates are XGBoost's (``hist/evaluate_splits.h``): a forward scan
(bins 0..i left, missing right) and, when the node has missing rows, a backward scan (bins i..B-1
right, missing left); the gain is ``CalcSplitGain − root_gain`` in XGBoost's float32/float64 steps,
invalid below ``min_child_weight``; ties go to the lower feature, then to the earlier candidate.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RT_EPS = 1e-6  # XGBoost's kRtEps: a split must gain more than this


@dataclass(frozen=True)
class GainParams:
    reg_lambda: float = 1.0
    min_child_weight: float = 1.0
    gamma: float = 0.0


@dataclass(frozen=True)
class Candidate:
    """The best split of one node over one owner's columns (``bin``: "v < cuts[bin]" goes left;
    -1 = only the missing rows go left)."""

    feature: int
    bin: int
    default_left: bool
    loss_chg: float
    left: tuple[int, int]  # (G, H) fixed-point sums of the left child
    right: tuple[int, int]


def _weight(g: np.ndarray, h: np.ndarray, lam: float) -> np.ndarray:
    """XGBoost's ``CalcWeight`` (double) returned into a float."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(h <= 0.0, 0.0, -g / (h + lam))
    return w.astype(np.float32)


def _gain_given_weight(g: np.ndarray, h: np.ndarray, w: np.ndarray, lam: float) -> np.ndarray:
    wd = w.astype(np.float64)
    return -(2.0 * g * wd + (h + lam) * wd * wd)


def root_gain(g: float, h: float, lam: float) -> np.float32:
    """XGBoost's ``CalcGain`` of a node's own sums, stored as a float."""
    return np.float32(0.0 if h <= 0.0 else g * g / (h + lam))


def split_loss(gl: np.ndarray, hl: np.ndarray, gr: np.ndarray, hr: np.ndarray, parent: np.float32,
               p: GainParams) -> np.ndarray:
    """``loss_chg`` (float32) of each candidate (left, right sums as floats); -inf where invalid."""
    lam = float(p.reg_lambda)
    gain = (_gain_given_weight(gl, hl, _weight(gl, hl, lam), lam)
            + _gain_given_weight(gr, hr, _weight(gr, hr, lam), lam)).astype(np.float32)
    loss = (gain - parent).astype(np.float32)
    valid = (hl > 0.0) & (hr > 0.0) & (hl >= p.min_child_weight) & (hr >= p.min_child_weight)
    return np.where(valid, loss, np.float32(-np.inf))


def best_split(hist: np.ndarray, missing: np.ndarray, ptrs: np.ndarray, total: tuple[int, int], *,
               scale: float, params: GainParams) -> Candidate | None:
    """The best candidate of a node over one owner's features, or None (none gains more than 0).

    Args:
        hist: (sum of bins, 2) int64 (G, H) per bin, features concatenated (``ptrs``).
        missing: (F, 2) int64 sums of the node's missing rows per feature.
        total: the node's (G, H).
        scale: 2^frac of the fixed point.
    """
    nf = len(ptrs) - 1
    if nf == 0 or len(hist) == 0:
        return None
    counts = np.diff(ptrs)
    seg = np.repeat(np.arange(nf), counts)
    cs = np.cumsum(hist, axis=0)
    starts = ptrs[:-1]
    base = np.zeros((nf, 2), dtype=np.int64)
    base[starts > 0] = cs[starts[starts > 0] - 1]
    left_f = cs - base[seg]  # bins <= i of the feature
    tot = np.asarray(total, dtype=np.int64)
    right_f = tot - left_f
    featsum = left_f[ptrs[1:] - 1]
    right_b = featsum[seg] - (left_f - hist)  # bins >= i
    left_b = tot - right_b
    has_missing = np.any(missing != 0, axis=1)
    parent = root_gain(total[0] / scale, total[1] / scale, float(params.reg_lambda))

    def loss(left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return split_loss(left[:, 0] / scale, left[:, 1] / scale, right[:, 0] / scale, right[:, 1] / scale,
                          parent, params)

    fwd = loss(left_f, right_f)
    bwd = loss(left_b, right_b)
    bwd[~has_missing[seg]] = -np.inf
    pos = np.arange(len(hist)) - starts[seg]  # bin index inside its feature
    # XGBoost's order: per feature, the forward scan (bins up) then the backward scan (bins down)
    loss_all = np.concatenate([fwd, bwd])
    order = np.lexsort((np.concatenate([pos, -pos]), np.repeat([0, 1], len(hist)), np.concatenate([seg, seg])))
    ranked = loss_all[order]
    best = int(np.argmax(ranked))
    if not np.isfinite(ranked[best]) or ranked[best] <= 0.0:
        return None
    k = int(order[best])
    backward = k >= len(hist)
    i = k - len(hist) if backward else k
    f = int(seg[i])
    left = left_b[i] if backward else left_f[i]
    right = right_b[i] if backward else right_f[i]
    return Candidate(feature=f, bin=int(pos[i]) - 1 if backward else int(pos[i]), default_left=backward,
                     loss_chg=float(ranked[best]), left=(int(left[0]), int(left[1])),
                     right=(int(right[0]), int(right[1])))


def leaf_weight(g: float, h: float, *, reg_lambda: float, learning_rate: float) -> float:
    """A leaf's value: XGBoost's float ``CalcWeight`` times the learning rate (float32)."""
    w = np.float32(0.0 if h <= 0.0 else -g / (h + reg_lambda))
    return float(np.float32(w * np.float32(learning_rate)))


def expandable(c: Candidate | None, *, depth: int, max_depth: int, gamma: float) -> bool:
    """XGBoost's ``IsValidExpandEntry``: gains more than kRtEps and gamma, above the depth limit."""
    return (c is not None and c.loss_chg > RT_EPS and c.loss_chg >= gamma
            and not (max_depth > 0 and depth >= max_depth))
