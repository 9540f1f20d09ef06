"""What ``vfl verify`` knows of each mechanism: a registry keyed by a privacy event's ``kind``.

An entry turns one recorded event (the JSON dict of the ledger: ``{"kind": ..., ..., "count": n}``) into
either a ``dp_accounting`` event, which dp_accounting's own ``RdpAccountant`` composes, or an RDP curve
computed by the verifier's own formula (PBM: ``vfl/privacy/verify/pbm.py``). Nothing here imports the
training side's accountant. A new mechanism plugs in with one call, e.g. a strategy recording Gaussian
label-DP events per tree::

    from vfl.privacy.verify.mechanisms import register_dp_event

    register_dp_event("gaussian-label", lambda e: gaussian(e["sigma"] / e["sensitivity"], e["count"]),
                      keys={"sigma": "params.noise_multiplier"})

``keys`` name the config key a field comes from (the line a difference prints); ``may_lower`` the
fields a recorded event may hold lower than the config gives (PBM's ``num_parties`` after a dropout or
with declared colluders: fewer binomials in the sum, a larger ε).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vfl.privacy.verify.pbm import pbm_rdp

Event = Mapping[str, Any]


@dataclass(frozen=True)
class Mechanism:
    """How the verifier composes one kind of event; exactly one of ``dp_event`` and ``rdp`` is set."""

    dp_event: Callable[[Event], Any] | None = None  # -> a dp_accounting DpEvent (count included)
    rdp: Callable[[Event, np.ndarray], np.ndarray] | None = None  # -> the whole event's RDP curve at the orders
    keys: Mapping[str, str] = field(default_factory=dict)
    may_lower: tuple[str, ...] = ()
    labels: bool = False  # it protects labels: a ledger of only such events prints its ε as epsilon_label too


MECHANISMS: dict[str, Mechanism] = {}


def _add(kind: str, mechanism: Mechanism) -> None:
    if kind in MECHANISMS:
        raise ValueError(f"a verifier for privacy events of kind {kind!r} is already registered")
    MECHANISMS[kind] = mechanism


def register_dp_event(kind: str, to_dp_event: Callable[[Event], Any], *, keys: Mapping[str, str] | None = None,
                      may_lower: tuple[str, ...] = (), labels: bool = False) -> None:
    """Verify events of ``kind`` as the dp_accounting event ``to_dp_event(event)`` (its count composed in)."""
    _add(kind, Mechanism(dp_event=to_dp_event, keys=dict(keys or {}), may_lower=may_lower, labels=labels))


def register_rdp(kind: str, curve: Callable[[Event, np.ndarray], np.ndarray], *, keys: Mapping[str, str] | None = None,
                 may_lower: tuple[str, ...] = ()) -> None:
    """Verify events of ``kind`` by the RDP curve ``curve(event, orders)`` (its count included)."""
    _add(kind, Mechanism(rdp=curve, keys=dict(keys or {}), may_lower=may_lower))


def gaussian(noise_multiplier: float, count: int) -> Any:
    """``count`` Gaussian mechanisms of noise multiplier σ/Δ, as dp_accounting events."""
    import dp_accounting

    return dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(float(noise_multiplier)), int(count))


def _pbm(e: Event, orders: np.ndarray) -> np.ndarray:
    per_coordinate = pbm_rdp(b=int(e["b"]), beta=float(e["beta"]), parties=int(e["num_parties"]), orders=orders)
    return int(e["count"]) * int(e.get("dim", 1)) * per_coordinate


_DPSGD_KEYS = {"noise_multiplier": "privacy.bottom_dp.noise_multiplier",
               "max_grad_norm": "privacy.bottom_dp.max_grad_norm"}

register_rdp("pbm", _pbm, keys={"b": "params.b", "beta": "params.beta", "dim": "model.embed_dim",
                                "num_parties": "num_parties, privacy.colluders"}, may_lower=("num_parties",))
register_dp_event("gaussian", lambda e: gaussian(float(e["sigma"]) / float(e["sensitivity"]), int(e["count"])),
                  keys={"sigma": "params.sigma (or params.b, params.beta, num_parties)",
                        "sensitivity": "model.tanh_c, model.embed_dim"})
# secureboost's label DP: one round's gradients under the discrete Gaussian (parties/trees/label_dp.py)
register_dp_event("gaussian-label", lambda e: gaussian(float(e["sigma"]) / float(e["sensitivity"]), int(e["count"])),
                  keys={"sigma": "params.label_dp.noise_multiplier", "sensitivity": "params.label_dp.clip, params.objective"},
                  labels=True)
# a DP-SGD step: Gaussian of std nm·C over the replace-one sensitivity 2C, so noise multiplier nm/2
register_dp_event("dpsgd", lambda e: gaussian(float(e["noise_multiplier"]) / 2.0, int(e["count"])), keys=_DPSGD_KEYS)
register_dp_event("dpsgd-lora", lambda e: gaussian(float(e["noise_multiplier"]) / 2.0, int(e["count"])),
                  keys=_DPSGD_KEYS)


def epsilon(events: Sequence[Event], *, orders: np.ndarray, delta: float) -> float:
    """(ε at ``delta``) of every event composed: dp_accounting composes its events, the verifier's curves
    are added to its RDP, and dp_accounting converts the sum. ``KeyError`` names an unknown kind."""
    from dp_accounting import rdp as dp_rdp

    acc = dp_rdp.RdpAccountant(list(orders))
    total = np.zeros(len(orders))
    for e in events:
        mech = MECHANISMS.get(str(e.get("kind")))
        if mech is None:
            raise KeyError(f"no verifier for privacy events of kind {e.get('kind')!r} "
                           f"(known: {', '.join(sorted(MECHANISMS))}; vfl/privacy/verify/mechanisms.py)")
        if mech.dp_event is not None:
            acc.compose(mech.dp_event(e))
        elif mech.rdp is not None:
            total = total + mech.rdp(e, orders)
    total = total + np.asarray(acc.rdp, dtype=np.float64)
    eps, _ = dp_rdp.compute_epsilon(list(orders), list(total), float(delta))
    return float(eps)
