"""A generic release audit: what the server OBSERVED against what the accountant CHARGED.

Play the server: it holds every message its node received. A noisy release it observes is

- with secure aggregation: a sum it decoded (``ActiveServer.fuse`` on an unmasked round: the
  summed parties' binomials are the noise);
- without it (``ldp``, ``pbm`` with ``secagg: false``): every party's embedding that arrived at the
  server node, decoded or not (each is noised on its own).

Each observation is turned into the privacy event of ONE release of the samples of its batch at
its noise (the parties actually summed, less the colluders), summed per (epoch, step, party) over
every process of the run (failed attempts, restarts, resumes), and composed as the accountant
would for the most-released sample: per epoch the largest curve of a batch, at every Rényi order.
The invariant: that curve never exceeds the accountant's, at any order (so neither does its ε).

``OneShotFaults`` makes ``VFL_FAULT_INJECT`` faults fire once each (the redone attempt after a
restart would otherwise die at the same round again).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from parties.vertical import wire as vw
from parties.vertical.party import ActiveServer
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, epsilon_from_rdp, event_rdp
from vfl.privacy.accounting.events import GaussianEvent, PBMEvent
from vfl.runtime import faults
from vfl.runtime.message import parse_round


@dataclass
class ReleaseAudit:
    """Taps the server node class (patch before the engine builds its nodes) and keeps what it observed."""

    # (phase, epoch, step, parties summed, digest of the decoded sum)
    decodes: list[tuple[str, int, int, tuple[int, ...], str]] = field(default_factory=list)
    arrivals: list[tuple[str, int, int, int, str]] = field(default_factory=list)  # (phase, epoch, step, src, digest)
    sums: dict[tuple[str, int, int, tuple[int, ...]], list[np.ndarray]] = field(default_factory=dict)  # the decoded values

    def attach(self, mp: Any) -> ReleaseAudit:
        real_fuse, real_handle = ActiveServer.fuse, ActiveServer.handle

        def fuse(node: Any, messages: list[Any]) -> Any:
            out = real_fuse(node, messages)
            phase, epoch, step = parse_round(messages[0].metadata.group_id)
            digest = hashlib.sha256(out.detach().cpu().numpy().tobytes()).hexdigest()
            self.decodes.append((phase, epoch, step, tuple(node.last_summed), digest))
            self.sums.setdefault((phase, epoch, step, tuple(node.last_summed)), []).append(
                out.detach().cpu().numpy().astype(np.float64))
            return out

        def handle(node: Any, messages: list[Any]) -> Any:
            for m in messages:  # an embedding arrived at the server node (masked or not)
                md = m.metadata
                if md.message_type in (vw.Kind.TRAIN_FORWARD, vw.Kind.EVAL_FORWARD) and \
                        vw.Record.EMB in m.content.array_records:
                    phase, epoch, step = parse_round(md.group_id)
                    rec = m.content.array_records[vw.Record.EMB]
                    digest = hashlib.sha256(b"".join(bytes(a.data) for a in rec.values())).hexdigest()
                    self.arrivals.append((phase, epoch, step, md.src_node_id, digest))
            return real_handle(node, messages)

        mp.setattr(ActiveServer, "fuse", fuse)
        mp.setattr(ActiveServer, "handle", handle)
        return self

    # ---- what was observed ----------------------------------------------------------------------
    def observed(self, strategy: Any, *, phase: str = "train") -> dict[tuple[int, int, int], list[Any]]:
        """(epoch, step, party or 0 for a sum) -> the events of the releases the server observed; a release
        received again bit for bit (seeded noise replayed on the same state) reveals nothing new: once."""
        out: dict[tuple[int, int, int], list[Any]] = defaultdict(list)
        if getattr(strategy, "uses_secagg", False):
            for ph, epoch, step, summed, _ in sorted(set(self.decodes)):
                if ph == phase:
                    out[(epoch, step, 0)].append(release_event(strategy, epoch=epoch, summed=len(summed)))
        else:
            for ph, epoch, step, src, _ in sorted(set(self.arrivals)):
                if ph == phase:
                    out[(epoch, step, src)].append(release_event(strategy, epoch=epoch, summed=1))
        return out

    def worst_rdp(self, strategy: Any, *, phase: str = "train", orders: Any = DEFAULT_ORDERS) -> np.ndarray:
        """RDP of the most-released sample: per epoch, the pointwise max over its batches (and
        parties) of the batch's summed curve; summed over epochs (each sample is in one batch an epoch)."""
        per_epoch: dict[int, np.ndarray] = {}
        for (epoch, _, _), events in self.observed(strategy, phase=phase).items():
            curve = sum((event_rdp(e, orders) for e in events), np.zeros(len(orders)))
            per_epoch[epoch] = np.maximum(per_epoch.get(epoch, curve), curve)
        return sum(per_epoch.values(), np.zeros(len(orders)))

    def decoded_count(self, *, phase: str = "train") -> int:
        """Decodes of the most-decoded sample (per epoch its most-decoded batch): each training decode is
        answered with one gradient of the batch's labels (what label DP is charged for)."""
        per_step: dict[tuple[int, int], int] = defaultdict(int)
        for ph, epoch, step, _, _ in self.decodes:
            if ph == phase:
                per_step[(epoch, step)] += 1
        per_epoch: dict[int, int] = {}
        for (epoch, _), n in per_step.items():
            per_epoch[epoch] = max(per_epoch.get(epoch, 0), n)
        return sum(per_epoch.values())

    def sample_releases(self, schedule: Any, sample: int) -> int:
        """Distinct training releases whose batch held ``sample`` (exact, whatever epochs and steps were asked)."""
        rounds = {(e, s, d) for ph, e, s, _, d in self.decodes if ph == "train"}
        return sum(sample in schedule.train_ids(e, s) for e, s, _ in rounds)

    def sample_rdp(self, strategy: Any, schedule: Any, sample: int, *, orders: Any = DEFAULT_ORDERS) -> np.ndarray:
        """RDP of ``sample`` alone: every observed training release whose batch held it, composed (per party
        without SecAgg, where each party's release is its own: the worst party)."""
        per_src: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(len(orders)))
        for (epoch, step, src), events in self.observed(strategy).items():
            if sample in schedule.train_ids(epoch, step):
                per_src[src] = per_src[src] + sum(event_rdp(e, orders) for e in events)
        return np.max(list(per_src.values()), axis=0) if per_src else np.zeros(len(orders))

    def worst_count(self, strategy: Any, *, phase: str = "train") -> int:
        """Releases of the most-released sample (count only, whatever their noise)."""
        per_epoch: dict[int, int] = {}
        for (epoch, _, _), events in self.observed(strategy, phase=phase).items():
            per_epoch[epoch] = max(per_epoch.get(epoch, 0), len(events))
        return sum(per_epoch.values())


def release_event(strategy: Any, *, epoch: int, summed: int) -> Any:
    """The event of ONE release of a batch at the noise it really had (``summed`` parties' noise)."""
    (event, *_) = [e for e in strategy.privacy_events(epoch=epoch) if isinstance(e, (PBMEvent, GaussianEvent))]
    if isinstance(event, PBMEvent):
        honest = strategy.honest_parties(strategy.cfg, summed) if strategy.params.secagg else 1
        return dataclasses.replace(event, num_parties=honest, count=1)
    return dataclasses.replace(event, count=1)


def charged_rdp(accountant: Any, orders: Any = DEFAULT_ORDERS) -> np.ndarray:
    """The accountant's feature-release curve (its PBM and Gaussian events; DP-SGD left out)."""
    events = [e for e in accountant.events if isinstance(e, (PBMEvent, GaussianEvent))] if accountant else []
    return sum((event_rdp(e, orders) for e in events), np.zeros(len(orders)))


def charged_count(accountant: Any) -> int:
    """Releases per sample the accountant charged (feature-release events)."""
    return sum(e.count for e in accountant.events if isinstance(e, (PBMEvent, GaussianEvent))) if accountant else 0


def check(audit: ReleaseAudit, strategy: Any, accountant: Any, *, delta: float = 1e-5) -> dict[str, float]:
    """Assert observed <= charged at every order; returns the numbers (for messages and reports)."""
    seen, paid = audit.worst_rdp(strategy), charged_rdp(accountant)
    nums = {"observed_releases": audit.worst_count(strategy), "charged_releases": charged_count(accountant)}
    nums["observed_epsilon"] = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=seen, delta=delta)[0] if seen.any() else 0.0
    nums["charged_epsilon"] = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=paid, delta=delta)[0] if paid.any() else 0.0
    assert np.all(seen <= paid * (1 + 1e-12)), f"the server observed more than the accountant charged: {nums}"
    return nums


class OneShotFaults:
    """``VFL_FAULT_INJECT`` faults that fire once each: a fired fault is taken out of the variable."""

    def __init__(self, mp: Any, spec: str) -> None:
        mp.setenv(faults.FAULT_ENV, spec)
        real = faults._die
        self.fired: list[str] = []

        def die(fault: Any, replies: Any, *, in_driver: bool) -> None:
            left = [f for f in os.environ.get(faults.FAULT_ENV, "").split(",") if f and not _same(f, fault)]
            self.fired.append(f"{fault.node}@{fault.round}")
            if left:
                os.environ[faults.FAULT_ENV] = ",".join(left)
            else:
                os.environ.pop(faults.FAULT_ENV, None)
            real(fault, replies, in_driver=in_driver)

        mp.setattr(faults, "_die", die)


def _same(item: str, fault: Any) -> bool:
    (parsed,) = faults.parse_faults(item)
    return parsed == fault
