"""``vfl account``: the privacy numbers of a (b, β, M) setting as one JSON-able dict.

Accounted numbers (``rdp``, ``epsilon``) are exact RDP composed by the ``Accountant``; the paper's
formulas and the Gaussian-style estimate are shown for comparison and labelled as not bounds.
"""

from __future__ import annotations

import math
from typing import Any

from vfl.core.errors import ConfigError
from vfl.privacy.accounting.accountant import Accountant, gaussian_rdp
from vfl.privacy.accounting.events import GaussianEvent, PBMEvent, PrivacyEvent
from vfl.privacy.accounting.noise_report import epsilon_assumption
from vfl.privacy.accounting.pbm_rdp import pbm_pure_dp, pbm_rdp, pbm_rdp_cap, pbm_rdp_profile
from vfl.privacy.accounting.theorems import (
    gaussian_style_estimate,
    theorem_6_1_final,
    theorem_6_1_per_iteration,
    theorem_6_2_sample,
)
from vfl.privacy.mechanisms.gaussian import ldp_sigma
from vfl.privacy.mechanisms.pbm import validate_pbm

MECHANISMS = ("pbm", "ldp")
_NOT_A_BOUND = "heuristic only, NOT an upper bound on the RDP (it underestimates, e.g. M=10, b=16, beta=.25)"
_PAPER = "paper's asymptotic formula with the given C_0; NOT a guarantee"


def _num(x: float) -> float | str:
    """A float for JSON; non-finite values become the strings 'inf' / 'nan'."""
    return float(x) if math.isfinite(x) else str(float(x))


def _check_alpha(alpha: float) -> None:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not (1 < alpha < math.inf):
        raise ConfigError("alpha", f"got {alpha!r}; the Rényi order must be a finite number > 1")


def _check_shape(epochs: int | None, batch: int | None, dataset_size: int | None, dim: int | None,
                 delta: float | None) -> bool:
    """True when the run shape is complete enough for an (ε, δ); partial shapes name what is missing."""
    for key, value in (("epochs", epochs), ("batch", batch), ("dataset_size", dataset_size), ("dim", dim)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ConfigError(key, f"got {value!r}; must be an int >= 1")
    if (batch is None) != (dataset_size is None):
        missing = "batch" if batch is None else "dataset_size"
        raise ConfigError(missing, "batch and dataset_size go together (they only set T = epochs·N/B)")
    needed = {"epochs": epochs, "dim": dim, "delta": delta}
    given = [k for k, v in needed.items() if v is not None]
    if given and len(given) < len(needed):
        missing = next(k for k, v in needed.items() if v is None)
        raise ConfigError(missing, f"an (epsilon, delta) needs epochs, dim and delta; {missing} is missing")
    return len(given) == len(needed)


def _pbm_part(*, b: int, beta: float, parties: int, alpha: float, dim: int | None,
              c0: float | None, epochs: int | None, batch: int | None, dataset_size: int | None) -> dict[str, Any]:
    profile = pbm_rdp_profile(b=b, beta=beta, num_parties=parties, orders=[alpha])[:, 0]
    out: dict[str, Any] = {
        "rdp": _num(pbm_rdp(b=b, beta=beta, num_parties=parties, orders=[alpha])[0]),
        "rdp_units": "one coordinate of one sample, one release (exact worst case, SecAgg sum of M binomials)",
        "worst_case_others_at_plus_c": int(profile.argmax()),
        "rdp_cap": _num(pbm_rdp_cap(b=b, beta=beta, orders=[alpha])[0]),
        "pure_dp_eps": _num(pbm_pure_dp(b=b, beta=beta)),
        "gaussian_style_estimate": {
            "value": gaussian_style_estimate(b=b, beta=beta, num_parties=parties, alpha=alpha),
            "formula": "8*alpha*b*beta^2/M", "is_bound": False, "note": _NOT_A_BOUND},
    }
    if c0 is not None:
        p = dim if dim is not None else 1
        thm: dict[str, Any] = {
            "dim": p, "note": _PAPER,
            "per_iteration": theorem_6_1_per_iteration(c0=c0, dim=p, b=b, beta=beta, num_parties=parties,
                                                       alpha=alpha)}
        if epochs is not None and batch is not None and dataset_size is not None:
            iterations = epochs * dataset_size / batch  # T with T·B/N = epochs uses of each sample
            thm["iterations"] = iterations
            thm["final"] = theorem_6_1_final(c0=c0, iterations=iterations, batch=batch,
                                             dataset_size=dataset_size, dim=p, b=b, beta=beta,
                                             num_parties=parties, alpha=alpha)
        out["theorem_6_1"] = thm
        if parties >= 2:
            out["theorem_6_2"] = {
                "dim": p, "note": _PAPER,
                "sample_per_iteration": theorem_6_2_sample(c0=c0, dim=p, b=b, beta=beta, num_parties=parties,
                                                           alpha=alpha)}
    return out


def account_report(*, mechanism: str, b: int, beta: float, parties: int, alpha: float,
                   epochs: int | None = None, batch: int | None = None, dataset_size: int | None = None,
                   dim: int | None = None, delta: float | None = None, c: float = 1.0,
                   c0: float | None = None) -> dict[str, Any]:
    """Privacy report of PBM (with SecAgg over ``parties``) or the paper's LDP baseline.

    With epochs, dim and delta it also composes epochs releases of dim coordinates per sample
    (no amplification in VFL) and converts to (ε, δ) with dp_accounting.
    """
    if mechanism not in MECHANISMS:
        raise ConfigError("mechanism", f"got {mechanism!r}; expected one of {MECHANISMS}")
    validate_pbm(b=b, beta=beta, c=c)
    if isinstance(parties, bool) or not isinstance(parties, int) or parties < 2:
        raise ConfigError("parties", f"got {parties!r}; must be an int >= 2 (the accounted release is the "
                          "secure-aggregation sum over M parties; one party has nothing to hide in)")
    if delta is not None and (isinstance(delta, bool) or not 0 < delta < 1):
        raise ConfigError("delta", f"got {delta!r}; allowed: a value in (0, 1)")
    _check_alpha(alpha)
    full_shape = _check_shape(epochs, batch, dataset_size, dim, delta)
    report: dict[str, Any] = {"mechanism": mechanism,
                              "params": {"b": b, "beta": beta, "parties": parties, "alpha": alpha, "c": c}}
    event: PrivacyEvent
    if mechanism == "pbm":
        report.update(_pbm_part(b=b, beta=beta, parties=parties, alpha=alpha, dim=dim, c0=c0, epochs=epochs,
                                batch=batch, dataset_size=dataset_size))
        event = PBMEvent(b=b, beta=beta, num_parties=parties, dim=dim or 1, count=epochs or 1)
    else:
        sigma = ldp_sigma(b=b, beta=beta, num_parties=parties, c=c)
        report.update({
            "sigma": sigma,
            "noise": "discrete Gaussian on the grid {c*j/L} (exact in floating point; ldp's default params.noise)",
            "rdp": _num(gaussian_rdp(noise_multiplier=sigma / (2.0 * c), orders=[alpha])[0]),
            "rdp_units": "one coordinate of one sample at one party, one release (Gaussian, sensitivity 2c)",
            "rdp_cap": None, "pure_dp_eps": None})
        event = GaussianEvent(sigma=sigma, sensitivity=2.0 * c * math.sqrt(dim or 1), dim=dim,
                              count=epochs or 1)
    if full_shape and delta is not None:
        acc = Accountant()
        acc.record(event)
        eps, order = acc.epsilon(delta)
        report.update({"epsilon": _num(eps), "delta": delta, "order": order,
                       "epsilon_assumption": (f"{epsilon_assumption(0)}; against the server + c colluding parties "
                                              "give --parties M-c (pbm with SecAgg, c below its Shamir threshold)"),
                       "composition": {"uses_per_sample": epochs, "coordinates_per_use": dim,
                                       "amplification": "none (sample ids are known in VFL)",
                                       "rdp_at_order": _num(float(acc.rdp()[list(acc.orders).index(order)]))}})
    return report
