"""The hop plan of one vertical round, declared once: the driver's task loop, the compiled graph
and the SecAgg server read it instead of each writing the hop pattern out.

A training step is parties -> server (embeddings, masked with SecAgg), then one server -> parties
-> server exchange per SecAgg request of a fault-free round (malicious: CONSISTENCY first, then
UNMASK; announced: none, the set rides on the forward request), then server -> parties (gradient of
step t + forward step t+1). Dropout recovery
(``REVEAL_SHARES``, ``Phase.RECOVERY``) is off-plan: it runs through ``Dropouts.converse``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parties import secagg_wire as sw
from parties import vertical_wire as vw

PARTIES, SERVER = "parties", "server"  # the two ends of a hop
PHASES = ("train", "eval")


@dataclass(frozen=True)
class Hop:
    """One hop: messages of ``kind`` from ``src`` to ``dst`` carrying ``payload`` (for the docs);
    ``next_step``: it carries step t+1's forward, so the driver files it under step t+1."""

    kind: str
    src: str
    dst: str
    payload: str
    next_step: bool = False


@dataclass(frozen=True)
class RoundPlan:
    """The hops of one step of ``phase`` after the forward request reached the parties."""

    phase: str
    hops: tuple[Hop, ...]

    @property
    def exchanges(self) -> tuple[str, ...]:
        """The SecAgg kinds the server requests in a fault-free round, in order."""
        return tuple(h.kind for h in self.hops if h.src == SERVER and h.kind in sw.ROUND_KINDS)

    @property
    def unmask_hops(self) -> int:
        """Extra server -> parties -> server round trips per step (0 without SecAgg)."""
        return len(self.exchanges)

    def targets(self, *, server: str, parties: Sequence[str]) -> list[tuple[str, ...]]:
        """Host names each hop is delivered to, in order (what the compiled graph compiles)."""
        return [(server,) if h.dst == SERVER else tuple(parties) for h in self.hops]


def round_plan(*, phase: str = "train", secagg: bool = False, mode: str = "semi-honest") -> RoundPlan:
    """The plan of a ``phase`` step: plain, with secure aggregation, or SecAgg in mode malicious (one
    more exchange) or announced (no exchange: the parties mask over the set the forward request named)."""
    if phase not in PHASES:
        raise ValueError(f"round phase {phase!r}; allowed: {', '.join(PHASES)}")
    kind = vw.Kind.TRAIN_FORWARD if phase == "train" else vw.Kind.EVAL_FORWARD
    hops = [Hop(kind, PARTIES, SERVER, "embeddings (k-bit masked integers with SecAgg)")]
    if secagg and mode == "malicious":
        hops += [Hop(sw.Kind.CONSISTENCY, SERVER, PARTIES, "round, survivors"),
                 Hop(sw.Kind.CONSISTENCY, PARTIES, SERVER, "round, sig (signature on the survivor set)")]
    if secagg and mode != "announced":
        hops += [Hop(sw.Kind.UNMASK, SERVER, PARTIES, "round (malicious: + survivors and their signatures)"),
                 Hop(sw.Kind.UNMASK, PARTIES, SERVER, "round, names, self (round self keys)")]
    if phase == "train":
        hops.append(Hop(kind, SERVER, PARTIES, "gradient of step t + forward step t+1", next_step=True))
    return RoundPlan(phase, tuple(hops))


def plan_for_hops(unmask_hops: int) -> RoundPlan:
    """The training plan with this many SecAgg exchanges (0, 1, or 2 = malicious)."""
    if unmask_hops not in (0, 1, 2):
        raise ValueError(f"unmask_hops {unmask_hops}; allowed: 0, 1, 2")
    return round_plan(secagg=unmask_hops > 0, mode="malicious" if unmask_hops == 2 else "semi-honest")


__all__ = ["PARTIES", "SERVER", "Hop", "RoundPlan", "plan_for_hops", "round_plan"]
