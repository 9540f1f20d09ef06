"""Calibrate a mechanism to a target ε (like Opacus' ``make_private_with_epsilon``).

Bisection over the run's own ``Accountant`` (so the calibrated value gives exactly the ε a run
will report): PBM's β at fixed b (ε grows with β; β ∈ (0, 1/4]) and the LDP baseline's σ (ε
falls with σ). The result is the most utility the target allows: the largest β, or the smallest
σ, whose ε after ``epochs`` releases is at most the target. Unreachable targets raise a
``ConfigError`` naming the key and the reachable range.

``extra`` events (the bottom model's DP-SGD with ``privacy.bottom_dp``) are composed with the
releases at every step of the search, so the target bounds the ε the run will report, not the
releases' share of it; a target the extra events alone exceed is refused naming both keys.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from vfl.core.errors import ConfigError
from vfl.privacy.accounting.accountant import Accountant
from vfl.privacy.accounting.events import GaussianEvent, PBMEvent, PrivacyEvent

BETA_MAX = 0.25
BETA_MIN = 1e-6
_STEPS = 60


def _epsilon(event: PrivacyEvent, delta: float, extra: Sequence[PrivacyEvent] = ()) -> float:
    acc = Accountant()
    for e in (event, *extra):
        acc.record(e)
    return acc.epsilon(delta)[0]


def pbm_epsilon(*, b: int, beta: float, num_parties: int, dim: int, epochs: int, delta: float,
                extra: Sequence[PrivacyEvent] = ()) -> float:
    """ε after ``epochs`` releases of one sample's ``dim`` PBM coordinates (sum over ``num_parties``),
    composed with the ``extra`` events."""
    return _epsilon(PBMEvent(b=b, beta=beta, num_parties=num_parties, dim=dim, count=epochs), delta, extra)


def ldp_epsilon(*, sigma: float, sensitivity: float, epochs: int, delta: float,
                extra: Sequence[PrivacyEvent] = ()) -> float:
    """ε after ``epochs`` Gaussian releases with L2 ``sensitivity``, composed with the ``extra`` events."""
    return _epsilon(GaussianEvent(sigma=sigma, sensitivity=sensitivity, count=epochs), delta, extra)


def _check_extra(key: str, target: float, extra: Sequence[PrivacyEvent], delta: float) -> None:
    """Refuse a target that the extra events (bottom-model DP-SGD) alone already reach."""
    if not extra:
        return
    acc = Accountant()
    for e in extra:
        acc.record(e)
    floor = acc.epsilon(delta)[0]
    if target <= floor:
        raise ConfigError(key, f"got {target:g}; privacy.bottom_dp alone already spends epsilon {floor:.4g} "
                          "over the run: raise the target or privacy.bottom_dp.noise_multiplier")


def _check(key: str, target: float, epochs: int) -> None:
    if isinstance(target, bool) or not isinstance(target, int | float) or not (0 < target < math.inf):
        raise ConfigError(key, f"got {target!r}; the target epsilon must be a finite number > 0")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise ConfigError("epochs", f"got {epochs!r}; must be an int >= 1")


def calibrate_pbm_beta(*, target_epsilon: float, delta: float, b: int, num_parties: int, dim: int, epochs: int,
                       key: str = "privacy.target_epsilon",
                       extra: Sequence[PrivacyEvent] = ()) -> tuple[float, float]:
    """(β, ε): the largest β in (0, 1/4] whose ε (composed with ``extra``) is at most ``target_epsilon``."""
    _check(key, target_epsilon, epochs)
    _check_extra(key, target_epsilon, extra, delta)

    def eps(beta: float) -> float:
        return pbm_epsilon(b=b, beta=beta, num_parties=num_parties, dim=dim, epochs=epochs, delta=delta,
                           extra=extra)

    top, bottom = eps(BETA_MAX), eps(BETA_MIN)
    if target_epsilon >= top:
        if math.isclose(target_epsilon, top, rel_tol=1e-9):
            return BETA_MAX, top
        raise ConfigError(key, f"got {target_epsilon:g}; with b={b}, M={num_parties}, P={dim}, {epochs} epochs, "
                          f"delta={delta:g} PBM reaches epsilon in [{bottom:.4g}, {top:.4g}] "
                          f"(beta in [{BETA_MIN:g}, {BETA_MAX}]); raise b for a larger epsilon")
    if target_epsilon < bottom:
        raise ConfigError(key, f"got {target_epsilon:g}; reachable: [{bottom:.4g}, {top:.4g}] "
                          f"(beta in [{BETA_MIN:g}, {BETA_MAX}]); lower b or train fewer epochs")
    # eps(BETA_MIN) <= target < eps(BETA_MAX): the largest beta within the target
    beta = math.exp(_bisect(lambda m: eps(math.exp(m)) <= target_epsilon,
                            good=math.log(BETA_MIN), bad=math.log(BETA_MAX)))
    return beta, eps(beta)


def calibrate_ldp_sigma(*, target_epsilon: float, delta: float, sensitivity: float, epochs: int,
                        key: str = "privacy.target_epsilon",
                        extra: Sequence[PrivacyEvent] = ()) -> tuple[float, float]:
    """(σ, ε): the smallest σ whose ε (composed with ``extra``) is at most ``target_epsilon``."""
    _check(key, target_epsilon, epochs)
    _check_extra(key, target_epsilon, extra, delta)

    def eps(sigma: float) -> float:
        return ldp_epsilon(sigma=sigma, sensitivity=sensitivity, epochs=epochs, delta=delta, extra=extra)

    lo, hi = math.log(sensitivity * 1e-3), math.log(sensitivity)  # want eps(exp(lo)) > target >= eps(exp(hi))
    while eps(math.exp(hi)) > target_epsilon:
        lo, hi = hi, hi + math.log(10.0)
        if hi > math.log(sensitivity * 1e12):
            raise ConfigError(key, f"got {target_epsilon:g}; too small to reach with sigma <= 1e12·sensitivity")
    if eps(math.exp(lo)) <= target_epsilon:
        raise ConfigError(key, f"got {target_epsilon:g}; reachable: epsilon <= {eps(math.exp(lo)):.4g} "
                          f"(sigma >= {math.exp(lo):.4g}) with {epochs} epochs, delta={delta:g}")
    sigma = math.exp(_bisect(lambda m: eps(math.exp(m)) <= target_epsilon, good=hi, bad=lo))
    return sigma, eps(sigma)


def _bisect(ok: Callable[[float], bool], *, good: float, bad: float) -> float:
    """``_STEPS`` halvings of [good, bad] keeping ``ok(good)`` and ``not ok(bad)``; returns ``good``."""
    for _ in range(_STEPS):
        mid = (good + bad) / 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good
