"""``privacy.epsilon_budget``: stop BEFORE an epoch whose releases would take ε past the budget.

The accountant composes deterministic events, so the ε after the next epoch is known before it
runs: add the strategy's events for that epoch to a copy of the ledger and convert. A run stops
cleanly there (its summary.json and plots are still written, with ``stopped`` saying why). If
an epoch still ends past the budget (e.g. a party dropped out during it, so fewer binomials were
summed than predicted), the run stops after it, saying so.
"""

from __future__ import annotations

from typing import Any

from vfl.privacy.accounting.accountant import Accountant


def predict_epsilon(accountant: Accountant | None, events: list[Any], *, delta: float) -> float | None:
    """ε after recording ``events`` on top of ``accountant`` (not modified); None without events."""
    if not events and accountant is None:
        return None
    trial = Accountant.from_json(accountant.to_json()) if accountant is not None else Accountant()
    for ev in events:
        trial.record(ev)
    return trial.epsilon(delta)[0]


def stop_before(*, budget: float | None, accountant: Accountant | None, events: list[Any], delta: float,
                epoch: int) -> dict[str, Any] | None:
    """The ``stopped`` record when running ``epoch`` would exceed ``budget``, else None."""
    if budget is None or not events:
        return None
    eps = predict_epsilon(accountant, events, delta=delta)
    if eps is None or eps <= budget:
        return None
    return {"reason": "epsilon_budget", "before_epoch": epoch, "predicted_epsilon": eps, "budget": budget,
            "message": f"epoch {epoch} would take epsilon to {eps:.4g} > privacy.epsilon_budget {budget}; "
                       f"stopped before it"}


def stop_after(*, budget: float | None, epsilon: float | None, epoch: int) -> dict[str, Any] | None:
    """The ``stopped`` record when the epoch just accounted ended past ``budget``, else None."""
    if budget is None or epsilon is None or epsilon <= budget:
        return None
    return {"reason": "epsilon_budget", "after_epoch": epoch, "epsilon": epsilon, "budget": budget,
            "message": f"epsilon {epsilon:.4g} > privacy.epsilon_budget {budget} after epoch {epoch}"}
