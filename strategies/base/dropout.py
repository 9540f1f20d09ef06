"""Dropouts inside a round (``train.on_dropout``): the driver-side watch over a vertical run.

The pipelined training loop registers every hop it submits (``hop``) and calls ``sync`` every few
steps. A party whose host died, or that has not answered a hop within ``transport.round_timeout_s``
(its host is then killed), is a dropout. With ``fail`` that is a PartyFailure naming it and the
round (the engine decides what next). With ``skip-party`` the driver finds the hop it missed,
removes its host, tells the server, hands the survivors' messages of that hop to the server and
drives the rest of the round synchronously (secure aggregation: the unmask/recovery messages)
until the server answers with the gradient; then the pipelined loop resumes without the party.
Every dropout is recorded (party, epoch, step, cause, contributors, recovery bytes; ``skipped``
when SecAgg mode announced left the round closed); the number of parties summed per epoch feeds the
privacy accounting.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from flwr.common import Message

from parties.secagg import wire as sw
from parties.vertical import wire as vw
from parties.vertical.wire import SERVER_ID
from vfl.core.errors import PartyFailure, VFLError
from vfl.engine.schema import RunConfig
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import Wire, round_tag
from vfl.runtime.node import PARTY
from vfl.runtime.transport.base import Outcome


class Hop(NamedTuple):
    """One pipelined delivery: the step it belongs to and its handles per host (a tuple: two are made a step)."""

    step: int
    handles: dict[str, Any]


class Dropouts:
    """Dropout policy and the dropouts of one run (lives on the driver-side strategy object)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.policy = cfg.train.on_dropout
        self.timeout = float(cfg.transport.round_timeout_s)
        self.active = cfg.num_parties
        self.dropped: list[dict[str, Any]] = []  # one entry per dropout (summary key "dropouts")
        self.summed: dict[int, int] = {}  # epoch -> fewest parties summed in one of its rounds
        self._window: list[Hop] = []
        self._grid: Grid | None = None
        self._epoch = 0
        self._pending: list[tuple[str, str]] = []
        self._fetched: dict[int, tuple[Any, Outcome]] = {}

    # ---- the pipelined training loop ------------------------------------------------------------
    def start_epoch(self, grid: Grid, epoch: int) -> None:
        self._grid, self._epoch, self._window = grid, epoch, []
        self.summed[epoch] = min(self.summed.get(epoch, self.active), self.active)

    def hop(self, step: int, handles: dict[str, Any]) -> dict[str, Any]:
        """Register a submitted hop; returns its handles unchanged."""
        self._window.append(Hop(step, handles))
        return handles

    def sync(self, ups: dict[str, Any], *, step: int) -> tuple[int, dict[str, Any], list[Wire]]:
        """Wait for the chain up to ``step``. Returns (last completed step, handles to continue
        from, wires left over); after a dropout the completed step may be earlier than ``step``."""
        grid = self._require_grid()
        failure: PartyFailure | None = None
        if grid.transport.ready(ups, timeout=self.timeout) == set(ups):
            try:
                left = grid.collect(ups, round=round_tag(self._epoch, step))
                self._synced()
                return step, ups, left
            except PartyFailure as exc:
                failure = exc  # find the round it happened in
        found = self._first_failure()
        if found is None:  # a slow window, but every hop answered in time
            if failure is not None:
                raise failure
            left = grid.collect(ups, round=round_tag(self._epoch, step))
            self._synced()
            return step, ups, left
        index, dead, late = found
        hop = self._window[index]
        self._check_policy(hop, dead, late, failure)
        live = self._drop(index, dead | late, cause={**{g: "died" for g in dead}, **{g: "timeout" for g in late}})
        resume = self.converse(grid, live, epoch=self._epoch, step=hop.step, phase="train",
                               stop=lambda w: w.kind == vw.Kind.TRAIN_FORWARD and w.src == SERVER_ID)
        if not resume:  # the parties were applying the last gradient: no round was missed
            return hop.step - 1, {}, []
        return hop.step, self.hop(hop.step + 1, grid.submit([resume], to=grid.party_groups)), []

    def finish_epoch(self) -> dict[str, float]:
        """Train metrics of the epoch: the parties still in the run."""
        return {"parties_active": float(self.active)}

    # ---- synchronous conversations (recovery, evaluation) ---------------------------------------
    def converse(self, grid: Grid, items: Sequence[Message | Wire], *, epoch: int, step: int, phase: str,
                 stop: Callable[[Wire], bool] | None = None) -> list[Wire]:
        """Route messages to their hosts and the replies on, hop by hop, until nobody answers (or a
        reply satisfies ``stop``: those replies are returned undelivered). A party host that dies
        or times out on the way is dropped (or fails the run with on_dropout=fail); dropouts of
        the round are recorded with its recovery bytes."""
        self._grid, self._epoch = grid, epoch
        before = grid.ledger.totals(sw.Phase.RECOVERY)
        pending = [self._counted(grid, m) for m in items]
        out: list[Wire] = []
        while pending:
            targets = sorted({g for w in pending for g in self._targets(grid, w)})
            handles = grid.submit([pending], to=targets)
            self._window = [Hop(step, handles)]
            found = self._first_failure()
            live_groups = set(handles)
            if found is not None:
                _, dead, late = found
                self._check_policy(self._window[0], dead, late, None)
                self._drop(0, dead | late, cause={**{g: "died" for g in dead}, **{g: "timeout" for g in late}})
                live_groups -= dead | late
            if self.policy == "skip-party":
                grid.drain()
            out = [w for g in grid.groups if g.name in live_groups
                   for w in self._outcome(handles[g.name]).wires]
            if stop is not None and any(stop(w) for w in out):
                break
            pending, out = out, []
        self._window, self._fetched = [], {}
        if self._pending:
            grid.drain()
            self._record(grid, step, before, phase)
        return out

    @staticmethod
    def _counted(grid: Grid, item: Message | Wire) -> Wire:
        if isinstance(item, Wire):
            return item  # produced by a host: counted when its outbox is drained
        return grid.emit(item)  # counted, and signed by its src node's host when authenticated

    # ---- the dropouts ----------------------------------------------------------------------------
    def parties_summed(self, epoch: int, default: int) -> int:
        """The fewest parties whose inputs were summed in one round of ``epoch`` (privacy events); for an
        epoch not started yet, the parties still in the run (the write-ahead record precedes ``start_epoch``)."""
        return self.summed.get(epoch, min(default, self.active))

    def summary(self, grid: Grid) -> dict[str, Any]:
        setup = sum(row["bytes"] for kind, row in grid.ledger.by_kind.items() if kind in sw.SETUP_KINDS)
        rec = grid.ledger.totals(sw.Phase.RECOVERY)
        return {"secagg_setup_bytes": setup, "recovery_bytes": rec["bytes_up"] + rec["bytes_down"],
                "dropouts": list(self.dropped)}

    # ---- internals -------------------------------------------------------------------------------
    def _require_grid(self) -> Grid:
        if self._grid is None:
            raise VFLError("Dropouts.start_epoch was not called")
        return self._grid

    def _outcome(self, handle: Any) -> Outcome:
        """Fetch a finished delivery once per window (Ray: one ray.get per handle)."""
        hit = self._fetched.get(id(handle))
        if hit is None or hit[0] is not handle:
            hit = (handle, self._require_grid().transport.outcome(handle))
            self._fetched[id(handle)] = hit
        return hit[1]

    def _targets(self, grid: Grid, w: Wire) -> list[str]:
        if w.dst == wire.BROADCAST:
            return list(grid.party_groups)
        return [grid.group_of[w.dst]] if w.dst in grid.group_of else []

    def _synced(self) -> None:
        if self.policy == "skip-party":
            self._require_grid().drain()  # a host that dies later must not take uncounted bytes with it
        self._window, self._fetched = [], {}

    def _first_failure(self) -> tuple[int, set[str], set[str]] | None:
        """(index of the first hop that failed or stalled, its dead hosts, its late hosts).

        Only party hosts can drop out: the server failing or stalling fails the run."""
        grid = self._require_grid()
        transport, server = grid.transport, grid.group_of[SERVER_ID]
        for index, hop in enumerate(self._window):
            done = transport.ready(hop.handles, timeout=self.timeout)
            late = set(hop.handles) - done
            failed = {g: o.error for g in sorted(done) if (o := self._outcome(hop.handles[g])).state == "failed"}
            if not late and not failed:
                continue
            if server in late:
                raise PartyFailure("server", round_tag(self._epoch, hop.step),
                                   f"no answer within transport.round_timeout_s={self.timeout:g}")
            dead = set()
            for g, error in failed.items():
                alive = transport.alive(g)
                if g == server or alive:  # a dead server, or a node that raised (a bug or a protocol violation)
                    if isinstance(error, VFLError):
                        raise error
                    why = "its Ray actor died" if not alive else f"{type(error).__name__}: {error}"
                    raise PartyFailure(", ".join(self._names(grid, g)), round_tag(self._epoch, hop.step), why)
                dead.add(g)
            return index, dead, late
        return None

    def _check_policy(self, hop: Hop, dead: set[str], late: set[str], failure: PartyFailure | None) -> None:
        """With on_dropout=fail: PartyFailure naming the parties and the round they missed."""
        if self.policy == "skip-party":
            return
        grid = self._require_grid()
        names = ", ".join(n for g in sorted(dead | late) for n in self._names(grid, g))
        cause = f"no answer within transport.round_timeout_s={self.timeout:g}" if late else "its host died"
        raise PartyFailure(names, round_tag(self._epoch, hop.step), cause) from failure

    def _drop(self, index: int, groups: set[str], *, cause: dict[str, str]) -> list[Wire]:
        """Remove dead/late hosts, count what they produced before, tell the server; return the
        live hosts' output of hop ``index``."""
        grid = self._require_grid()
        transport = grid.transport
        for hop in self._window[:index]:  # their outboxes died with them: count from the handles
            for g in groups & set(hop.handles):
                for w in self._outcome(hop.handles[g]).wires:
                    grid.count(w)
        names = {g: self._names(grid, g) for g in groups}
        for g in sorted(groups):
            transport.remove(g)
        ids = grid.remove_groups(sorted(groups))
        if not grid.party_groups:
            raise PartyFailure(", ".join(n for ns in names.values() for n in ns),
                               round_tag(self._epoch, self._window[index].step), "no party is left")
        self.active -= len(ids)
        self._notify(grid, ids)
        hop = self._window[index]
        self._pending += [(n, cause[g]) for g in sorted(groups) for n in names[g]]
        return [w for g in grid.groups if g.name in hop.handles and g.name not in groups
                for w in self._outcome(hop.handles[g.name]).wires]

    def _notify(self, grid: Grid, ids: list[int]) -> None:
        """Tell the server node that parties ``ids`` left the run."""
        notice = wire.make(vw.Kind.DROP, src=SERVER_ID, dst=SERVER_ID, round=round_tag(self._epoch, 0, "control"),
                           content=wire.records(**{vw.Record.DROP: wire.config(**{vw.Key.PARTIES: ids})}))
        grid.send([notice])

    def renotify(self, grid: Grid) -> None:
        """After a restart (rebuilt nodes): the server node again learns every party dropped so far; they stay
        out of the run (their hosts were removed, not restarted)."""
        gone = sorted(n for n, s in grid.specs.items() if s.role == PARTY and n not in grid.group_of)
        if gone:
            self._notify(grid, gone)

    @staticmethod
    def _names(grid: Grid, group: str) -> list[str]:
        return [grid.specs[n].name for n, g in sorted(grid.group_of.items()) if g == group]

    def _record(self, grid: Grid, step: int, before: dict[str, int], phase: str) -> None:
        after = grid.ledger.totals(sw.Phase.RECOVERY)
        spent = sum(after[k] - before[k] for k in ("bytes_up", "bytes_down"))
        summed = grid.transport.call(grid.group_of[SERVER_ID], SERVER_ID, "contributors")
        contributed = [grid.specs[p].name for p in summed]
        # secagg announced skips the round (nothing summed): its survivors' releases count as in a recovered round
        skipped = {"skipped": True} if not summed else {}
        if phase == "train":  # the privacy accountant needs the fewest parties summed in the epoch
            self.summed[self._epoch] = min(self.summed.get(self._epoch, self.active), len(summed) or self.active,
                                           self.active)
        for name, cause in self._pending:
            self.dropped.append({"party": name, "epoch": self._epoch, "step": step, "phase": phase,
                                 "cause": cause, "contributed": contributed, "recovery_bytes": spent, **skipped})
        self._pending = []
