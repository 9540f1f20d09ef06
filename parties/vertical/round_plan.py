"""The hop plan of one vertical round, declared once: the driver's task loop and the SecAgg server
read it instead of each writing the hop pattern out.

A training step is parties -> server (embeddings), then the protocol's server -> parties -> server
exchanges of a fault-free round (SecAgg's: ``parties.secagg.plan``), then server -> parties (gradient
of step t + forward step t+1).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from parties.vertical import wire as vw

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
        """The kinds the server requests inside a fault-free round (SecAgg's exchanges), in order."""
        return tuple(h.kind for h in self.hops if h.src == SERVER and not h.next_step)

    @property
    def unmask_hops(self) -> int:
        """Extra server -> parties -> server round trips per step (0 without SecAgg)."""
        return len(self.exchanges)

    def targets(self, *, server: str, parties: Sequence[str]) -> list[tuple[str, ...]]:
        """Host names each hop is delivered to, in order (what the socket chain connects)."""
        return [(server,) if h.dst == SERVER else tuple(parties) for h in self.hops]


def round_plan(*, phase: str = "train", exchanges: Sequence[Hop] = ()) -> RoundPlan:
    """The plan of a ``phase`` step: the forward, the protocol's ``exchanges`` (server -> parties ->
    server hops inside the round, e.g. SecAgg's), and in training the gradient + next forward."""
    if phase not in PHASES:
        raise ValueError(f"round phase {phase!r}; allowed: {', '.join(PHASES)}")
    kind = vw.Kind.TRAIN_FORWARD if phase == "train" else vw.Kind.EVAL_FORWARD
    hops = [Hop(kind, PARTIES, SERVER, "embeddings (k-bit masked integers with SecAgg)"), *exchanges]
    if phase == "train":
        hops.append(Hop(kind, SERVER, PARTIES, "gradient of step t + forward step t+1", next_step=True))
    return RoundPlan(phase, tuple(hops))


__all__ = ["PARTIES", "SERVER", "Hop", "RoundPlan", "round_plan"]
