"""Marvell (Li et al., "Label Leakage and Protection in Two-party Split Learning", ICLR 2022, §4):
class-dependent Gaussian noise on the gradient rows of a binary-label batch.

Per batch, with ḡ₁, ḡ₀ the class means of the gradient rows, Δ = ḡ₁ − ḡ₀, u and v the isotropic
per-coordinate variances of the negative and positive rows and p the positive fraction, Marvell
draws noise N(0, Σ₀) for negatives and N(0, Σ₁) for positives, with the covariances that minimise
the symmetrised KL divergence between the two perturbed class distributions

    KL(N(ḡ₁, vI + Σ₁) ‖ N(ḡ₀, uI + Σ₀)) + KL(N(ḡ₀, uI + Σ₀) ‖ N(ḡ₁, vI + Σ₁))

under the power constraint  p·tr Σ₁ + (1 − p)·tr Σ₀ ≤ P,  P = strength·‖Δ‖² (the paper's scale s).
The paper shows the optimum has the form Σᵢ = λᵢ⁽¹⁾ ΔΔᵀ/‖Δ‖² + λᵢ⁽²⁾ (I − ΔΔᵀ/‖Δ‖²): four
numbers. Here they are found by a grid search over how the budget splits (orthogonal variance
equalisation vs the Δ direction, and between the classes), the constraint holding exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vfl.core.rng import NoiseSource


@dataclass(frozen=True)
class MarvellNoise:
    """λ⁽¹⁾ (along Δ) and λ⁽²⁾ (orthogonal) noise variances per class, and the unit direction of Δ."""

    along: tuple[float, float]  # (class 0, class 1)
    ortho: tuple[float, float]
    direction: np.ndarray
    objective: float  # symmetrised KL after the noise

    def power(self, *, p: float, dim: int) -> float:
        """p·tr Σ₁ + (1 − p)·tr Σ₀ of this noise."""
        tr = [self.along[i] + (dim - 1) * self.ortho[i] for i in (0, 1)]
        return p * tr[1] + (1 - p) * tr[0]


def sym_kl(*, a0: float | np.ndarray, a1: float | np.ndarray, b0: float, b1: float, delta2: float,
           dim: int) -> float | np.ndarray:
    """Symmetrised KL of N(0, diag(a0, b0·I)) vs N(Δ, diag(a1, b1·I)), Δ along the first axis."""
    along = a1 / a0 + a0 / a1 - 2 + delta2 * (1 / a0 + 1 / a1)
    ortho = (dim - 1) * (b1 / b0 + b0 / b1 - 2)
    return 0.5 * (along + ortho)


def solve(*, delta2: float, u: float, v: float, p: float, dim: int, power: float, grid: int = 201) -> MarvellNoise:
    """The four noise variances minimising the symmetrised KL under ``power`` (see the module doc)."""
    u, v = max(u, 1e-30), max(v, 1e-30)
    best: tuple[float, float, float, float, float] | None = None
    lo, lo_w = (0, 1 - p) if u < v else (1, p)  # the class whose orthogonal variance is smaller
    full_eq = lo_w * (dim - 1) * abs(v - u)  # power that equalises the orthogonal variances
    for r in np.linspace(0.0, 1.0, 41):
        spend = min(full_eq, r * power)
        rest = power - spend
        add = spend / (lo_w * (dim - 1)) if dim > 1 and lo_w > 0 else 0.0
        ortho = [0.0, 0.0]
        ortho[lo] = add
        b0, b1 = u + ortho[0], v + ortho[1]
        t = np.linspace(0.0, 1.0, grid)
        x0 = t * rest / max(1 - p, 1e-12)
        x1 = (1 - t) * rest / max(p, 1e-12)
        kl = np.asarray(sym_kl(a0=u + x0, a1=v + x1, b0=b0, b1=b1, delta2=delta2, dim=dim))
        i = int(np.argmin(kl))
        if best is None or kl[i] < best[0]:
            best = (float(kl[i]), float(x0[i]), float(x1[i]), ortho[0], ortho[1])
        if spend >= full_eq:
            break
    assert best is not None
    obj, x0, x1, o0, o1 = best
    return MarvellNoise(along=(x0, x1), ortho=(o0, o1), direction=np.zeros(dim), objective=obj)


def marvell_perturb(g: np.ndarray, y: np.ndarray, *, strength: float, noise: NoiseSource,
                    fallback: MarvellNoise | None = None) -> tuple[np.ndarray, MarvellNoise | None]:
    """Rows of ``g`` (N, d) with labels ``y`` in {0, 1} plus Marvell's noise; also returns the noise
    used. A batch with one class only reuses ``fallback`` (the previous batch's), or passes unchanged."""
    x = np.asarray(g, dtype=np.float64).reshape(len(g), -1)
    y = np.asarray(y).astype(bool)
    n, d = x.shape
    if y.all() or not y.any():
        sol = fallback
    else:
        m1, m0 = x[y].mean(0), x[~y].mean(0)
        diff = m1 - m0
        delta2 = float(diff @ diff)
        v = float(((x[y] - m1) ** 2).sum(1).mean() / d)
        u = float(((x[~y] - m0) ** 2).sum(1).mean() / d)
        p = float(y.mean())
        sol = solve(delta2=delta2, u=u, v=v, p=p, dim=d, power=strength * delta2)
        unit = diff / np.sqrt(delta2) if delta2 > 0 else np.eye(d)[0]
        sol = MarvellNoise(along=sol.along, ortho=sol.ortho, direction=unit, objective=sol.objective)
    if sol is None:
        return np.asarray(g, dtype=np.float32), None
    z = noise.normal((n, d)).numpy().astype(np.float64)
    w = sol.direction
    along = z @ w  # the component of z along Δ, and the rest
    ortho = z - np.outer(along, w)
    lam1 = np.where(y, sol.along[1], sol.along[0])
    lam2 = np.where(y, sol.ortho[1], sol.ortho[0])
    out = x + np.sqrt(lam1)[:, None] * np.outer(along, w) + np.sqrt(lam2)[:, None] * ortho
    return out.reshape(np.shape(g)).astype(np.float32), sol
