"""Label DP as ``vfl verify`` recomputes it: a registry keyed by the defense's ``kind`` (``defenses:``).

An entry says how one defense's label ε grows: ``per_attempt`` gives the dp_accounting event of one epoch
attempt (``label_gp``: a Gaussian at its noise multiplier, composed over every attempt), ``per_draw`` the
pure ε of one draw of the randomized labels (``label_rr``, ``label_rr_prior``: drawn once, and again after
each restore to a state before any checkpoint). A defense with no entry adds nothing (no label DP). The
rule over a run, as summary.json states it: ``train.epochs`` + the attempts redone (the larger of the
restores and the repeated fresh attempts in the ledger) for ``per_attempt``; ``epsilon_label`` is the sum
over defenses (basic composition), ``delta_label`` the sum of their δ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from vfl.privacy.verify.mechanisms import gaussian


@dataclass(frozen=True)
class LabelMechanism:
    per_attempt: Callable[[Mapping[str, Any], int], Any] | None = None  # (options, attempts) -> dp_accounting event
    per_draw: Callable[[Mapping[str, Any]], float] | None = None  # options -> pure ε of one draw


LABEL_MECHANISMS: dict[str, LabelMechanism] = {
    "label_gp": LabelMechanism(per_attempt=lambda o, n: gaussian(float(o["noise_multiplier"]), n)),
    "label_rr": LabelMechanism(per_draw=lambda o: float(o["epsilon"])),
    "label_rr_prior": LabelMechanism(per_draw=lambda o: float(o["epsilon"])),
}


def register_label(kind: str, mechanism: LabelMechanism) -> None:
    """A defense's label-DP rule for the verifier (refuses a kind already registered)."""
    if kind in LABEL_MECHANISMS:
        raise ValueError(f"a label-DP verifier for defense {kind!r} is already registered")
    LABEL_MECHANISMS[kind] = mechanism


def label_dp(defenses: Sequence[Mapping[str, Any]], *, attempts: int, draws: int, orders: Sequence[float],
             delta: float) -> tuple[float, float] | None:
    """(ε, δ) of the defenses over ``attempts`` epoch attempts and ``draws`` draws of the labels; None when
    no defense has label DP."""
    from dp_accounting import rdp as dp_rdp

    eps = dlt = 0.0
    found = False
    for d in defenses:
        mech = LABEL_MECHANISMS.get(str(d.get("kind")))
        if mech is None:
            continue
        found = True
        if mech.per_attempt is not None:
            acc = dp_rdp.RdpAccountant(list(orders))
            acc.compose(mech.per_attempt(d, attempts))
            e, _ = dp_rdp.compute_epsilon(list(orders), list(np.asarray(acc.rdp, dtype=np.float64)), float(delta))
            eps, dlt = eps + float(e), dlt + float(delta)
        if mech.per_draw is not None:
            eps += draws * mech.per_draw(d)
    return (eps, dlt) if found else None
