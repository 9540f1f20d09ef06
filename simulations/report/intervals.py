"""95 % intervals behind the report's "beats chance" verdicts (docs/attacks.md, "Reading the verdicts").

Which interval, by what the attack's number is:

- a **count of successes** over n trials against a fixed chance level (DLG/iDLG labels against the
  majority rate, neurons recovered against random directions): the Wilson score interval of k/n
  (``wilson``);
- a **mean over samples** compared with a baseline scored **on the same samples** (reconstruction and
  GRN MSE against the mean guess, model completion against the raw-feature head, an accuracy drop, a
  backdoor's success against the untriggered samples, the label leak of each window against the same
  window with its labels shuffled): the percentile bootstrap of the mean per-sample difference, shifted
  onto the value (``paired``): the attack's interval given its baseline;
- a **ROC AUC** of members against non-members: the percentile bootstrap of the AUC, members and
  non-members resampled separately (``auc``), against 0.5, the AUC of a score that carries nothing.

A verdict is "beats chance" when the whole interval lies beyond the baseline on the side of leakage,
"no better than chance" when it does not, and no verdict without an interval. Resampling is seeded
(the report is the same every time it is built); ``RESAMPLES`` bootstrap draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from vfl.core.rng import seeded_numpy

RESAMPLES = 2000
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Interval:
    """A 95 % interval of an attack's value and how it was obtained (``method``, with its n)."""

    low: float
    high: float
    method: str

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def to_json(self) -> list[float]:
        return [float(self.low), float(self.high)]


def wilson(successes: int, n: int) -> Interval:
    """Wilson score interval of ``successes``/``n`` (binomial, 95 %)."""
    if n <= 0:
        raise ValueError("wilson needs n >= 1")
    p = successes / n
    z2 = Z95 * Z95
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return Interval(max(0.0, centre - half), min(1.0, centre + half), f"Wilson binomial, n={n}")


def _percentile(draws: np.ndarray) -> tuple[float, float]:
    lo, hi = np.nanpercentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def paired(attack: npt.ArrayLike, baseline: npt.ArrayLike, *, seed: str, unit: str = "samples") -> Interval:
    """Interval of mean(``attack``) given mean(``baseline``) on the same samples: the bootstrap interval of
    the mean difference, shifted by the observed baseline mean (it excludes that mean exactly when the
    difference's interval excludes 0)."""
    a, b = np.asarray(attack, np.float64), np.asarray(baseline, np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) == 0:
        raise ValueError(f"paired needs two equal-length 1-d samples; got {a.shape} and {b.shape}")
    diff = a - b
    rng = seeded_numpy("report-interval", seed)
    idx = rng.integers(0, len(diff), size=(RESAMPLES, len(diff)))
    lo, hi = _percentile(diff[idx].mean(axis=1))
    base = float(b.mean())
    return Interval(base + lo, base + hi, f"paired bootstrap of the difference, {len(diff)} {unit}")


def mean(values: npt.ArrayLike, *, seed: str, unit: str = "samples") -> Interval:
    """Bootstrap interval of the mean of ``values`` (against a baseline that is a fixed number)."""
    v = np.asarray(values, np.float64)
    if v.ndim != 1 or len(v) == 0:
        raise ValueError("mean needs a non-empty 1-d sample")
    rng = seeded_numpy("report-interval", seed)
    lo, hi = _percentile(v[rng.integers(0, len(v), size=(RESAMPLES, len(v)))].mean(axis=1))
    return Interval(lo, hi, f"bootstrap of the mean, {len(v)} {unit}")


def auc(member_scores: npt.ArrayLike, nonmember_scores: npt.ArrayLike, *, seed: str) -> Interval:
    """Bootstrap interval of the ROC AUC (members and non-members resampled separately; ties count ½).
    Each resample's AUC is its weighted pair count: multinomial weights of the members and non-members
    around the matrix of pairwise comparisons (one matrix product for all resamples)."""
    m, n = np.asarray(member_scores, np.float64), np.asarray(nonmember_scores, np.float64)
    rng = seeded_numpy("report-interval", seed)
    wins = (m[:, None] > n[None, :]) + 0.5 * (m[:, None] == n[None, :])
    wm = rng.multinomial(len(m), np.full(len(m), 1 / len(m)), size=RESAMPLES).astype(np.float64)
    wn = rng.multinomial(len(n), np.full(len(n), 1 / len(n)), size=RESAMPLES).astype(np.float64)
    draws = ((wm @ wins) * wn).sum(axis=1) / (len(m) * len(n))
    lo, hi = _percentile(draws)
    return Interval(lo, hi, f"bootstrap of the AUC, {len(m)} members and {len(n)} non-members")


def verdict(ci: Interval | None, baseline: float, *, higher_leaks: bool) -> bool | None:
    """True: the whole interval lies beyond ``baseline`` on the side of leakage; False: it does not;
    None: no interval."""
    if ci is None or not (math.isfinite(ci.low) and math.isfinite(ci.high) and math.isfinite(baseline)):
        return None
    return bool(ci.low > baseline) if higher_leaks else bool(ci.high < baseline)
