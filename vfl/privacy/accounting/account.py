"""``vfl.account``: the privacy report of a mechanism, or the β/σ that reaches a target ε.

The one implementation behind both ``vfl account`` (CLI) and ``vfl.account(...)`` (Python).
"""

from __future__ import annotations

import math
from typing import Any

from vfl.core.errors import ConfigError
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS
from vfl.privacy.accounting.calibrate import calibrate_ldp_sigma, calibrate_pbm_beta
from vfl.privacy.accounting.report import account_report


def account(*, mechanism: str, b: int, parties: int, beta: float | None = None, alpha: float | None = None,
            target_epsilon: float | None = None, epochs: int | None = None, batch: int | None = None,
            dataset_size: int | None = None, dim: int | None = None, delta: float | None = None,
            c: float = 1.0, c0: float | None = None) -> dict[str, Any]:
    """Report of ``mechanism`` (``pbm`` or ``ldp``) at (b, beta, parties, alpha), composed over
    ``epochs`` releases of ``dim`` coordinates when given; with ``target_epsilon`` instead, the
    calibrated beta (pbm, at fixed b) or sigma (ldp). Without ``alpha`` the accountant picks the
    Rényi order that minimizes epsilon (needs epochs, dim, delta); ``warnings`` says when that order
    is at the edge of the grid. Errors name the CLI flag (``--beta``...)."""
    if target_epsilon is not None:
        return _target(mechanism=mechanism, b=b, parties=parties, beta=beta, target_epsilon=target_epsilon,
                       epochs=epochs, dim=dim, delta=delta, c=c)
    if beta is None:
        raise ConfigError("--beta", "required (or give --target-epsilon to calibrate)")
    _check_paper_shape(mechanism=mechanism, batch=batch, dataset_size=dataset_size, c0=c0)
    kw: dict[str, Any] = dict(mechanism=mechanism, b=b, beta=beta, parties=parties, epochs=epochs, batch=batch,
                              dataset_size=dataset_size, dim=dim, delta=delta, c=c, c0=c0)
    chosen = alpha is None
    if alpha is None:
        if epochs is None or dim is None or delta is None:
            raise ConfigError("--alpha", "required unless --epochs, --dim and --delta are given (then the "
                              "accountant picks the order that minimizes epsilon)")
        alpha = float(account_report(**kw, alpha=2.0)["order"])  # any valid order: the grid search is the same
    report = account_report(**kw, alpha=alpha)
    report["params"]["alpha_source"] = "accountant (order minimizing epsilon)" if chosen else "given"
    warning = edge_warning(report.get("order"))
    if warning:
        report["warnings"] = [warning]
    return report


def _check_paper_shape(*, mechanism: str, batch: int | None, dataset_size: int | None, c0: float | None) -> None:
    """--batch/--dataset-size only set the paper's T = epochs·N/B (Theorem 6.1 with --c0): refuse them
    elsewhere instead of silently ignoring them (the epsilon has no sampling amplification in VFL)."""
    flag = "--batch" if batch is not None else "--dataset-size" if dataset_size is not None else None
    if flag and (c0 is None or mechanism != "pbm"):
        raise ConfigError(flag, "only used with --mechanism pbm --c0 (the paper's Theorem 6.1 over T = epochs·N/B "
                          "iterations); the epsilon does not depend on it: every sample is used once per epoch "
                          "and VFL has no sampling amplification")


def edge_warning(order: float | None, orders: tuple[float, ...] = DEFAULT_ORDERS) -> str | None:
    """A note when the best Rényi order is the smallest or largest of the grid: the minimum over
    the orders may lie outside it, so epsilon may be loose (an upper bound still holds)."""
    if order is None or min(orders) < order < max(orders):
        return None
    side = "smallest" if order <= min(orders) else "largest"
    hint = ("epsilon is large: the privacy noise is weak for this many releases" if side == "smallest"
            else "epsilon is tiny: a larger order could tighten it")
    return (f"the best Renyi order {order:g} is the {side} of the accountant's grid "
            f"[{min(orders):g}, {max(orders):g}]: the epsilon is an upper bound but may be loose ({hint})")


def _target(*, mechanism: str, b: int, parties: int, beta: float | None, target_epsilon: float,
            epochs: int | None, dim: int | None, delta: float | None, c: float) -> dict[str, Any]:
    if epochs is None or dim is None or delta is None:
        flag = "epochs" if epochs is None else "dim" if dim is None else "delta"
        raise ConfigError(f"--{flag}", "required with --target-epsilon (epsilon composes epochs releases "
                          "of dim coordinates and is reported at delta)")
    if beta is not None and mechanism == "pbm":
        raise ConfigError("--beta", "--target-epsilon chooses beta; do not give both")
    out: dict[str, Any] = {"mechanism": mechanism, "target_epsilon": target_epsilon, "delta": delta,
                           "epochs": epochs, "dim": dim, "parties": parties, "b": b, "c": c}
    if mechanism == "pbm":
        beta_, eps = calibrate_pbm_beta(target_epsilon=target_epsilon, delta=delta, b=b, num_parties=parties,
                                        dim=dim, epochs=epochs, key="--target-epsilon")
        out.update(beta=beta_, epsilon=eps, note="largest beta in (0, 1/4] at this b whose epsilon <= target "
                                                 "(SecAgg sum over the parties)")
    else:
        sens = 2.0 * c * math.sqrt(dim)
        sigma, eps = calibrate_ldp_sigma(target_epsilon=target_epsilon, delta=delta, sensitivity=sens,
                                         epochs=epochs, key="--target-epsilon")
        out.update(sigma=sigma, epsilon=eps, sensitivity=sens,
                   note="smallest sigma (per coordinate, per party) whose epsilon <= target")
    return out
