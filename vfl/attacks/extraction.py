"""Extraction of a ReLU network's first layer from queries — Rolnick & Kording, "Reverse-Engineering
Deep ReLU Networks" (ICML 2020), Algorithm 1.

Threat model: query access to a party's bottom network (inputs of the party's feature space in,
embedding out — e.g. an inference endpoint, or a colluder that can feed chosen features), with
the architecture known (ReLU layers; a final C·tanh is undone by atanh(f/C)). The attacker wants
the weights, up to the scaling and permutation that ReLU networks cannot reveal.

A ReLU network is piecewise linear. Along a random line the output bends exactly where the line
crosses some neuron's boundary {x : pre-activation = 0}. (1) ``PointsOnLine``: boundary points by
bisection on non-linear segments. (2) ``InferHyperplane``: the Jacobian jumps by a rank-1 matrix
u·nᵀ across a boundary; n (top right singular vector of the jump) is the local normal.
(3) ``TestHyperplane``: a first-layer boundary is a global hyperplane, so walking inside it and
probing across it must find the bend again exactly there; deeper boundaries bend and fail.
Accepted hyperplanes are merged; score = share of true first-layer neurons whose normal is
recovered with |cosine| > 0.99 (and the mean best |cosine|).

Bisection assumes the oracle is piecewise linear to the last bit. Where rounding makes it bend
everywhere (an atanh of a nearly saturated tanh, ~1e-10 of noise) every segment looks bent and the
live segments double at each level: one such line asked 578k queries and held 36k "bends", each then
tested as a plane (a report ran past 10 minutes). So a line whose live segments pass ``max_live`` is
dropped as noisy (:class:`NoisyLine`), and :func:`extract` stops at a query budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Oracle = Callable[[np.ndarray], np.ndarray]  # (n, d) float64 -> (n, k), piecewise linear

MAX_LIVE = 4096  # live bisection segments per line; a real line holds ~2 per bend (hundreds at most here)
# atanh(y) amplifies y's rounding by 1/(1 - y^2): at |y| = 1 - 1.5e-7 that is ~1e-10 on the pre-tanh
# value, which bisection (1e-11 relative) reads as bends everywhere. Clamped at 1 - 1e-4 it stays under
# 1e-12; a clamped coordinate is flat, and its kink is a curved level set the hyperplane test rejects.
SATURATION = 1e-4


def untanh(y: np.ndarray, *, c: float, saturation: float = SATURATION) -> np.ndarray:
    """Undo an output ``c·tanh``: atanh(y / c), with |y / c| clamped to 1 - ``saturation``."""
    return np.arctanh(np.clip(np.asarray(y, np.float64) / c, -1 + saturation, 1 - saturation))  # type: ignore[no-any-return]


class NoisyLine(ValueError):
    """The oracle bends almost everywhere along this line: rounding noise, not ReLU boundaries."""


class BudgetSpent(Exception):
    """A :class:`CountingOracle` was asked past its ``limit`` (the call that crossed it is not answered)."""


@dataclass
class CountingOracle:
    """Wraps an oracle and counts the input rows it was asked (the attack's query budget); past ``limit``
    rows it raises :class:`BudgetSpent`."""

    f: Oracle
    queries: int = 0
    limit: int | None = None

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.queries += len(x)
        if self.limit is not None and self.queries > self.limit:
            raise BudgetSpent(f"{self.queries} query rows asked, the budget is {self.limit}")
        return np.asarray(self.f(np.asarray(x, dtype=np.float64)), dtype=np.float64).reshape(len(x), -1)


def points_on_line(f: Oracle, a: np.ndarray, v: np.ndarray, lo: float, hi: float, *, tol: float,
                   segments: int = 64, rel: float = 1e-11, max_live: int | None = MAX_LIVE) -> np.ndarray:
    """Parameters t of the bends of t -> f(a + t v) on [lo, hi] (bisection of non-linear segments).

    Raises :class:`NoisyLine` when more than ``max_live`` segments are bent at once (None: no cap)."""
    edges = np.linspace(lo, hi, segments + 1)
    segs = np.stack([edges[:-1], edges[1:]], axis=1)
    frac = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
    found: list[np.ndarray] = []
    while len(segs):
        ts = segs[:, :1] + (segs[:, 1:] - segs[:, :1]) * frac  # (S, 5)
        out = f(a + ts.reshape(-1, 1) * v).reshape(len(segs), 5, -1)
        line = out[:, :1] + (out[:, 4:] - out[:, :1]) * frac[None, :, None]
        err = np.abs(out - line).max(axis=(1, 2))
        bent = err > rel * (1.0 + np.abs(out).max(axis=(1, 2)))
        narrow = (segs[:, 1] - segs[:, 0]) < tol
        found.append(segs[bent & narrow].mean(axis=1))
        wide = segs[bent & ~narrow]
        mid = wide.mean(axis=1, keepdims=True)
        segs = np.concatenate([np.c_[wide[:, :1], mid], np.c_[mid, wide[:, 1:]]])
        if max_live is not None and len(segs) > max_live:
            raise NoisyLine(f"{len(segs)} bent segments at width {float(segs[0, 1] - segs[0, 0]):.3g}: "
                            f"the oracle is not piecewise linear at this resolution")
    return np.sort(np.concatenate(found)) if found else np.zeros(0)


def jacobian(f: Oracle, x: np.ndarray, h: float) -> np.ndarray:
    """(k, d) forward-difference Jacobian (exact inside a linear region when the steps stay in it)."""
    d = len(x)
    pts = np.vstack([x, x + h * np.eye(d)])
    out = f(pts)
    return ((out[1:] - out[0]) / h).T  # type: ignore[no-any-return]


def infer_hyperplane(f: Oracle, p: np.ndarray, v: np.ndarray, *, step: float) -> tuple[np.ndarray, float] | None:
    """Unit normal n and offset c (boundary n·x + c = 0) at boundary point ``p`` crossed along ``v``."""
    jump = jacobian(f, p + step * v, step * 1e-3) - jacobian(f, p - step * v, step * 1e-3)
    _, s, vt = np.linalg.svd(jump)
    if s[0] <= 1e-9 or (len(s) > 1 and s[1] > 1e-3 * s[0]):
        return None  # no clean rank-1 jump: two boundaries too close, or none
    n = vt[0]
    return n, -float(n @ p)


def test_hyperplane(f: Oracle, n: np.ndarray, c: float, p: np.ndarray, *, radius: float, rng: np.random.Generator,
                    trials: int = 4, need: int = 3) -> bool:
    """Does the boundary continue along the plane far from ``p``? (first layer: yes; deeper: no)."""
    ok = 0
    width = 0.05 * radius
    for _ in range(trials):
        u = rng.normal(size=len(n))
        u -= (u @ n) * n
        u /= np.linalg.norm(u) + 1e-300
        x0 = p + rng.uniform(0.3, 1.0) * radius * rng.choice([-1.0, 1.0]) * u
        x0 -= (n @ x0 + c) * n  # back onto the plane exactly
        # The bend sits at t ~ 0 (off by the normal's estimation error, ~1e-9). A window symmetric about
        # 0 makes 0 an edge of every bisection grid, and a bend at a segment's end is invisible (each
        # side looks linear): the test then saw a true plane only when rounding moved the bend far
        # enough inside a segment -- machine-dependent. A random asymmetric window puts 0 off the grid.
        lo, hi = -width * rng.uniform(0.75, 1.25), width * rng.uniform(0.75, 1.25)
        try:
            ts = points_on_line(f, x0, n, lo, hi, tol=width * 1e-6, segments=8)
        except NoisyLine:
            continue  # no clean bend to find here: this probe does not vouch for the plane
        if len(ts) and np.abs(ts).min() < width * 1e-4:
            t0 = ts[np.abs(ts).argmin()]
            got = infer_hyperplane(f, x0 + t0 * n, n, step=width * 1e-3)
            if got is not None and abs(float(got[0] @ n)) > 0.999:
                ok += 1
    return ok >= need


def _canonical(n: np.ndarray, c: float) -> tuple[np.ndarray, float]:
    s = 1.0 if n[np.abs(n).argmax()] >= 0 else -1.0
    return s * n, s * c


@dataclass(frozen=True)
class Extraction:
    """What :func:`extract` recovered and what it cost."""

    normals: np.ndarray  # (h, d) unit rows
    offsets: np.ndarray  # (h,)
    queries: int  # input rows asked of the oracle
    noisy_lines: int  # lines dropped as NoisyLine
    lines_done: int  # lines fully processed before the budget ran out (== lines when it did not)


def extract(f: Oracle, *, dim: int, radius: float, lines: int, rng: np.random.Generator,
            center: np.ndarray | None = None, max_queries: int | None = None) -> Extraction:
    """Recovered first-layer hyperplanes, deduplicated; stops (keeping what it has) after ``max_queries`` rows."""
    base = np.zeros(dim) if center is None else np.asarray(center, np.float64)
    oracle = CountingOracle(f, limit=max_queries)
    normals: list[np.ndarray] = []
    offsets: list[float] = []
    rejected: list[tuple[np.ndarray, float]] = []
    noisy = done = 0

    def seen(n: np.ndarray, c: float, planes: list[tuple[np.ndarray, float]]) -> bool:
        return any(abs(float(n @ m)) > 0.999 and abs(c - o) < 1e-3 * (1 + abs(o)) for m, o in planes)

    try:
        for _ in range(lines):
            a = base + rng.normal(scale=radius / 4, size=dim)
            v = rng.normal(size=dim)
            v /= np.linalg.norm(v)
            try:
                ts = points_on_line(oracle, a, v, -radius, radius, tol=radius * 1e-7)
            except NoisyLine:
                noisy += 1
                done += 1
                continue
            gaps = np.diff(np.r_[-radius, ts, radius])
            for i, t in enumerate(ts):
                step = min(radius * 1e-4, 0.25 * gaps[i], 0.25 * gaps[i + 1])
                p = a + t * v
                got = infer_hyperplane(oracle, p, v, step=step)
                if got is None:
                    continue
                n, c = _canonical(*got)
                if seen(n, c, list(zip(normals, offsets, strict=True))) or seen(n, c, rejected):
                    continue  # this plane was tested already
                if test_hyperplane(oracle, n, c, p, radius=radius, rng=rng):
                    normals.append(n)
                    offsets.append(c)
                else:
                    rejected.append((n, c))
            done += 1
    except BudgetSpent:
        pass
    return Extraction(normals=np.stack(normals) if normals else np.zeros((0, dim)), offsets=np.asarray(offsets, np.float64),
                      queries=oracle.queries, noisy_lines=noisy, lines_done=done)


def extract_first_layer(f: Oracle, *, dim: int, radius: float, lines: int, rng: np.random.Generator,
                        center: np.ndarray | None = None,
                        max_queries: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Recovered first-layer hyperplanes: (normals (h, d) unit rows, offsets (h,)), deduplicated."""
    got = extract(f, dim=dim, radius=radius, lines=lines, rng=rng, center=center, max_queries=max_queries)
    return got.normals, got.offsets


def match_neurons(weight: np.ndarray, bias: np.ndarray, normals: np.ndarray, offsets: np.ndarray, *,
                  threshold: float = 0.99) -> dict[str, float]:
    """Share of true neurons (rows of ``weight``) recovered with |cos| > threshold; mean best |cos|;
    mean |offset error| of the recovered ones (both sides normalized by ‖w‖)."""
    w = np.asarray(weight, np.float64)
    norms = np.linalg.norm(w, axis=1)
    live = norms > 0
    w_unit, b_unit = w[live] / norms[live, None], np.asarray(bias, np.float64)[live] / norms[live]
    if len(normals) == 0:
        return {"recovered": 0.0, "mean_cosine": 0.0, "precision": float("nan"), "offset_error": float("nan"), "found": 0.0,
                "neurons": float(live.sum())}
    cos = w_unit @ np.asarray(normals).T  # (true, found)
    best = np.abs(cos).argmax(axis=1)
    best_cos = np.abs(cos[np.arange(len(w_unit)), best])
    sign = np.sign(cos[np.arange(len(w_unit)), best])
    off_err = np.abs(b_unit - sign * np.asarray(offsets)[best])
    hit = best_cos > threshold
    precision = float((np.abs(cos).max(axis=0) > threshold).mean())  # found planes that are true neurons
    return {"recovered": float(hit.mean()), "mean_cosine": float(best_cos.mean()), "precision": precision,
            "offset_error": float(off_err[hit].mean()) if hit.any() else float("nan"),
            "found": float(len(normals)), "neurons": float(live.sum())}
