"""RDP accountant: a ledger of privacy events, composed by adding RDP curves
(Mironov, *Rényi Differential Privacy*, IEEE CSF 2017, arXiv:1702.07476, Prop. 1; ``docs/privacy.md``).

PBM curves are the exact numeric ones of ``pbm_rdp``; Gaussian curves and the RDP → (ε, δ)
conversion come from ``dp_accounting`` (never hand-rolled). The ledger serializes to JSON so a
resumed run continues the same budget.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from vfl.core.errors import ConfigError
from vfl.privacy.accounting.events import (
    DPSGDEvent,
    GaussianEvent,
    LabelGaussianEvent,
    PBMEvent,
    PrivacyEvent,
    event_from_dict,
    event_to_dict,
)
from vfl.privacy.accounting.pbm_rdp import check_orders, pbm_rdp
from vfl.privacy.accounting.scope import epsilon_scope

DEFAULT_ORDERS: tuple[float, ...] = (
    1.02, 1.05, 1.1, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 14.0,
    16.0, 20.0, 24.0, 28.0, 32.0, 40.0, 48.0, 64.0, 96.0, 128.0, 256.0, 512.0, 1024.0,
)
_FORMAT = 1


def gaussian_rdp(*, noise_multiplier: float, orders: Sequence[float] | np.ndarray, count: int = 1) -> np.ndarray:
    """RDP count·α/(2·nm²) of ``count`` Gaussian releases, from dp_accounting's public ``RdpAccountant``."""
    a = check_orders(orders)
    import dp_accounting  # here, not at import: ~3 s and ~50 MiB that host actors do not need
    from dp_accounting import rdp as dp_rdp

    acc = dp_rdp.RdpAccountant(list(a))
    acc.compose(dp_accounting.GaussianDpEvent(noise_multiplier), int(count))
    return np.broadcast_to(np.asarray(acc.rdp, dtype=np.float64), a.shape).copy()


def event_rdp(event: PrivacyEvent, orders: Sequence[float] | np.ndarray) -> np.ndarray:
    """RDP curve of a whole event: count × (per-release curve); a PBM release is dim coordinates."""
    a = check_orders(orders)
    if isinstance(event, PBMEvent):
        per_release = event.dim * pbm_rdp(b=event.b, beta=event.beta, num_parties=event.num_parties, orders=a)
    elif isinstance(event, DPSGDEvent):  # Gaussian with sigma = nm*C over sensitivity 2C
        per_release = gaussian_rdp(noise_multiplier=event.sigma / event.sensitivity, orders=a)
    else:
        per_release = gaussian_rdp(noise_multiplier=event.noise_multiplier, orders=a)
    return event.count * per_release


def epsilon_from_rdp(*, orders: Sequence[float] | np.ndarray, rdp: Sequence[float] | np.ndarray,
                     delta: float) -> tuple[float, float]:
    """(ε, best order) for a target δ via ``dp_accounting.rdp.compute_epsilon``."""
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0.0 < delta < 1.0:
        raise ConfigError("delta", f"got {delta!r}; delta must lie in (0, 1)")
    a = check_orders(orders)
    from dp_accounting import rdp as dp_rdp

    eps, order = dp_rdp.compute_epsilon(list(a), list(np.asarray(rdp, dtype=np.float64)), float(delta))
    return float(eps), float(order)


class Accountant:
    """Ledger of privacy events for one run; ``epsilon(delta)`` gives the composed (ε, δ)-DP."""

    def __init__(self, orders: Sequence[float] = DEFAULT_ORDERS) -> None:
        self._orders = check_orders(orders)
        self._orders.setflags(write=False)
        self._ledger: list[PrivacyEvent] = []

    @property
    def orders(self) -> np.ndarray:
        """The Rényi orders every curve is evaluated at (read-only)."""
        return self._orders

    @property
    def events(self) -> tuple[PrivacyEvent, ...]:
        """The ledger; events equal up to ``count`` are merged into one entry (composition commutes)."""
        return tuple(self._ledger)

    def record(self, event: PrivacyEvent) -> None:
        """Add ``event``: its count is merged into the entry with the same parameters, if any."""
        if not isinstance(event, (PBMEvent, GaussianEvent, DPSGDEvent)):
            raise ConfigError("event", f"got {type(event).__name__}; expected PBMEvent, GaussianEvent or DPSGDEvent")
        for i, entry in enumerate(self._ledger):
            if type(entry) is type(event) and dataclasses.replace(entry, count=event.count) == event:
                self._ledger[i] = dataclasses.replace(entry, count=entry.count + event.count)
                return
        self._ledger.append(event)

    def scope(self) -> str:
        """What the composed ε protects, derived from the kinds of events in the ledger."""
        return epsilon_scope(self._ledger)

    def labels_only(self) -> bool:
        """Every event protects labels (``LabelGaussianEvent``): the ε is a label ε (``epsilon_label``)."""
        return bool(self._ledger) and all(isinstance(e, LabelGaussianEvent) for e in self._ledger)

    def rdp(self) -> np.ndarray:
        """Composed RDP curve: the sum of every ledger entry's curve, one value per order."""
        total = np.zeros(self._orders.size)
        for event in self._ledger:
            total = total + event_rdp(event, self._orders)
        return total

    def epsilon(self, delta: float) -> tuple[float, float]:
        """(ε, best order) of the composed ledger for target δ (dp_accounting's conversion)."""
        eps, order = epsilon_from_rdp(orders=self._orders, rdp=self.rdp(), delta=delta)
        return eps, order

    def to_json(self) -> str:
        """The orders and the ledger as a JSON string (for run checkpoints)."""
        return json.dumps({"format": _FORMAT, "orders": [float(x) for x in self._orders],
                           "events": [event_to_dict(e) for e in self._ledger]})

    @classmethod
    def from_json(cls, data: str | dict[str, Any]) -> Accountant:
        """Rebuild an accountant saved by ``to_json`` (a JSON string or its parsed dict)."""
        obj = json.loads(data) if isinstance(data, str) else data
        if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
            raise ConfigError("accountant", f"not an accountant ledger of format {_FORMAT}")
        acc = cls(orders=obj["orders"])
        acc._ledger = [event_from_dict(e) for e in obj["events"]]
        return acc
