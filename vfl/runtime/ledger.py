"""Byte accounting: the serialized size of every message, per party, direction, phase and round.

The ledger is THE communication metric: it counts ``len(bytes)`` of each serialized message once,
where it is produced. ``up`` is party -> server (label holder / vendor / model server), ``down`` is server -> party
(a broadcast counts once, attributed to the party ``"*"``). Payload is array data; envelope is the
rest (metadata, dtype/shape, protobuf framing).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from vfl.data.psi_wire import KIND_PREFIX as PSI_KIND_PREFIX

UP, DOWN, CONTROL = "up", "down", "control"
_NBYTES, _PAYLOAD = itemgetter(4), itemgetter(5)  # of a (phase, direction, party, round, nbytes, payload, kind) row
MIXED = "mixed"  # by_kind direction of a kind sent both ways (e.g. a request down and its reply up)


@dataclass
class Counter:
    bytes: int = 0
    payload: int = 0
    messages: int = 0

    def add(self, nbytes: int, payload: int) -> None:
        self.bytes += nbytes
        self.payload += payload
        self.messages += 1

    @property
    def envelope(self) -> int:
        return self.bytes - self.payload

    def as_dict(self) -> dict[str, int]:
        return {"bytes": self.bytes, "payload": self.payload, "envelope": self.envelope,
                "messages": self.messages}


@dataclass
class CommLedger:
    """Counts bytes; ``epoch_totals`` gives one epoch's numbers, ``totals`` the run's."""

    by_key: dict[tuple[str, str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))
    by_round: dict[str, dict[str, int]] = field(default_factory=dict)
    keep_rounds: bool = True
    by_kind: dict[str, dict[str, Any]] = field(default_factory=dict)  # totals per kind (+ its direction or "mixed")
    by_kind_direction: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # kind -> direction -> counts
    _epoch: dict[tuple[str, str], Counter] = field(default_factory=lambda: defaultdict(Counter))

    def record(self, *, phase: str, direction: str, party: str, round: str, nbytes: int, payload: int,
               kind: str = "") -> None:
        """Count one serialized message.

        Args:
            phase: the round tag's phase (``train``, ``eval``, ``setup``, ``recovery``, ``control``).
            direction: ``UP`` (party -> server), ``DOWN`` (server -> party) or ``CONTROL``.
            party: the party it is attributed to (``"*"`` for a broadcast).
            round: the round tag (per-round rows, this epoch only).
            nbytes: ``len`` of the serialized bytes; payload: its array bytes.
            kind: the message kind (``by_kind``; empty: not kept per kind).
        """
        self.record_rows([(phase, direction, party, round, nbytes, payload, kind)])

    def record_rows(self, rows: Iterable[tuple[str, str, str, str, int, int, str]]) -> None:
        """``record`` of each (phase, direction, party, round, nbytes, payload, kind) row, in order: the
        hosts' rows of a drain in one call. Every view but the per-round bytes is a sum over rows of one
        (phase, direction, party, kind): the rows are gathered by that (in the order first seen, which keeps
        every dict's first-seen order) and each gathering is counted once by its sums."""
        groups: dict[tuple[str, str, str, str], list[tuple[str, str, str, str, int, int, str]]] = {}
        by_round = self.by_round if self.keep_rounds else None
        last_round, here = None, {UP: 0, DOWN: 0}
        for row in rows:
            phase, direction, party, round, nbytes, _, kind = row
            groups.setdefault((phase, direction, party, kind), []).append(row)
            if by_round is not None and direction != CONTROL:  # a step's rows share its round
                if round != last_round:
                    last_round = round
                    found = by_round.get(round)
                    here = by_round[round] = {UP: 0, DOWN: 0} if found is None else found
                here[direction] += nbytes
        by_key = self.by_key
        for (phase, direction, party, kind), got in groups.items():
            n, nbytes, payload = len(got), sum(map(_NBYTES, got)), sum(map(_PAYLOAD, got))
            c = by_key[(phase, direction, party)]
            c.bytes += nbytes
            c.payload += payload
            c.messages += n
            self._record_sums(phase, direction, kind, n, nbytes, payload)

    def _record_sums(self, phase: str, direction: str, kind: str, n: int, nbytes: int, payload: int) -> None:
        """``n`` messages of one phase, direction and kind (``nbytes`` and ``payload`` summed): per kind
        (created on first sight: a setdefault would build its default row on every call) and this epoch."""
        if kind:
            row = self.by_kind.get(kind)
            if row is None:
                row = self.by_kind[kind] = {"direction": direction, "messages": 0, "bytes": 0, "payload": 0}
            elif row["direction"] != direction:
                row["direction"] = MIXED
            ways = self.by_kind_direction.get(kind)
            if ways is None:
                ways = self.by_kind_direction[kind] = {}
            split = ways.get(direction)
            if split is None:
                split = ways[direction] = {"messages": 0, "bytes": 0, "payload": 0}
            for r in (row, split):
                r["messages"] += n
                r["bytes"] += nbytes
                r["payload"] += payload
        c = self._epoch[(phase, direction)]
        c.bytes += nbytes
        c.payload += payload
        c.messages += n

    def start_epoch(self) -> None:
        self._epoch = defaultdict(Counter)
        self.by_round = {}

    def epoch_state(self) -> dict[str, list[int]]:
        """The epoch in progress's counters (a mid-epoch checkpoint keeps them: ``load_epoch_state``)."""
        return {"|".join(k): [c.bytes, c.payload, c.messages] for k, c in self._epoch.items()}

    def load_epoch_state(self, state: dict[str, list[int]]) -> None:
        """Continue an epoch whose first steps a checkpoint counted (``epoch_state``)."""
        self.start_epoch()
        for key, (nbytes, payload, messages) in state.items():
            phase, direction = key.split("|")
            self._epoch[(phase, direction)] = Counter(int(nbytes), int(payload), int(messages))

    def epoch_totals(self, phase: str = "train") -> dict[str, int]:
        up, down = self._epoch[(phase, UP)], self._epoch[(phase, DOWN)]
        return {
            "bytes_up": up.bytes, "bytes_down": down.bytes,
            "payload_up": up.payload, "payload_down": down.payload,
            "messages_up": up.messages, "messages_down": down.messages,
        }

    def totals(self, phase: str = "train") -> dict[str, int]:
        out = {"bytes_up": 0, "bytes_down": 0, "payload_up": 0, "payload_down": 0, "messages_up": 0,
               "messages_down": 0}
        for (ph, direction, _), c in self.by_key.items():
            if ph != phase or direction == CONTROL:
                continue
            out[f"bytes_{direction}"] += c.bytes
            out[f"payload_{direction}"] += c.payload
            out[f"messages_{direction}"] += c.messages
        return out

    def per_party(self, phase: str = "train") -> dict[str, dict[str, dict[str, int]]]:
        out: dict[str, dict[str, dict[str, int]]] = {}
        for (ph, direction, party), c in sorted(self.by_key.items()):
            if ph == phase and direction != CONTROL:
                out.setdefault(party, {})[direction] = c.as_dict()
        return out

    def state(self) -> dict[str, Any]:
        """JSON-able state for checkpoints (cumulative counters only)."""
        return {"keys": {"|".join(k): c.as_dict() for k, c in self.by_key.items()}, "kinds": self.by_kind,
                "kinds_direction": self.by_kind_direction}

    def load_state(self, state: dict[str, Any]) -> None:
        self.by_key = defaultdict(Counter)
        self.by_kind = {k: dict(v) for k, v in state.get("kinds", {}).items()}
        if "kinds_direction" in state:
            self.by_kind_direction = {k: {d: dict(c) for d, c in v.items()} for k, v in state["kinds_direction"].items()}
        else:  # a checkpoint from before the split: each kind under the direction it recorded
            self.by_kind_direction = {k: {v["direction"]: {n: v[n] for n in ("messages", "bytes", "payload")}}
                                      for k, v in self.by_kind.items()}
        for key, c in state["keys"].items():
            phase, direction, party = key.split("|")
            self.by_key[(phase, direction, party)] = Counter(c["bytes"], c["payload"], c["messages"])


def kind_bytes(ledger: CommLedger, prefix: str) -> int:
    """Up/down bytes of every message kind starting with ``prefix`` (control messages excluded)."""
    return sum(int(c["bytes"]) for k, dirs in ledger.by_kind_direction.items() if k.startswith(prefix)
               for d, c in dirs.items() if d != CONTROL)


def setup_breakdown(ledger: CommLedger) -> dict[str, int]:
    """``setup_bytes`` split: private set intersection (``query.psi_*``) and the rest (secure-aggregation keys)."""
    setup = ledger.totals("setup")
    psi = kind_bytes(ledger, PSI_KIND_PREFIX)
    return {"psi_bytes": psi, "secagg_setup_bytes": setup["bytes_up"] + setup["bytes_down"] - psi}
