"""SecAgg's exchanges inside a vertical round (``parties.vertical.round_plan``): one server -> parties ->
server exchange per request of a fault-free round (malicious: CONSISTENCY first, then UNMASK;
announced: none, the set rides on the forward request). Dropout recovery (``REVEAL_SHARES``,
``Phase.RECOVERY``) is off-plan: it runs through ``Dropouts.converse``.
"""

from __future__ import annotations

from parties.secagg import wire as sw
from parties.vertical.round_plan import PARTIES, SERVER, Hop, RoundPlan, round_plan


def secagg_hops(mode: str = "semi-honest") -> tuple[Hop, ...]:
    """The exchanges of a fault-free round in ``params.secagg_mode`` ``mode``."""
    hops: list[Hop] = []
    if mode == "malicious":
        hops += [Hop(sw.Kind.CONSISTENCY, SERVER, PARTIES, "round, survivors"),
                 Hop(sw.Kind.CONSISTENCY, PARTIES, SERVER, "round, sig (signature on the survivor set)")]
    if mode != "announced":
        hops += [Hop(sw.Kind.UNMASK, SERVER, PARTIES, "round (malicious: + survivors and their signatures)"),
                 Hop(sw.Kind.UNMASK, PARTIES, SERVER, "round, names, self (round self keys)")]
    return tuple(hops)


def secagg_round_plan(*, phase: str = "train", mode: str = "semi-honest") -> RoundPlan:
    """A ``phase`` step under secure aggregation in mode ``mode``."""
    return round_plan(phase=phase, exchanges=secagg_hops(mode))
