"""The verifier's own reading of ``privacy_ledger.jsonl``: the hash chain, the releases and what is charged.

Written apart from the training side's ``vfl/privacy/accounting/wal.py``: each line is parsed here, each
``prev`` checked against the SHA-256 of the line before it, and the charging rule is stated as a rule on
the ledger rather than replayed from the engine's checkpoints:

    after release s, the accountant composes every release r <= s that has events and is fresh
    (its noise was new) or is the newest release of its epoch up to s (the attempt that committed).

A failed attempt with fresh noise released its batches a second time, so it is charged; a seeded attempt
redone bit for bit released nothing new, so only the attempt that committed counts. A metrics row of
epoch e is the ε after the newest release of epoch e; summary.json's ``epsilon`` the ε after the last.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GENESIS = "0" * 64
HEADER = "ledger"


@dataclass
class Release:
    seq: int
    epoch: int
    fresh: bool
    events: list[dict[str, Any]]


@dataclass
class Ledger:
    """What the chain holds; ``problems`` are lines naming what is wrong (empty: the chain holds)."""

    chained: bool = False
    orders: list[float] = field(default_factory=list)
    head: str | None = None
    lines: int = 0
    releases: dict[int, Release] = field(default_factory=dict)
    restores: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def ordered(self) -> list[Release]:
        return [self.releases[s] for s in sorted(self.releases)]

    def charged(self, upto: int) -> list[Release]:
        """The releases the accountant composes after release ``upto`` (the rule in the module docstring)."""
        newest: dict[int, int] = {}
        for r in self.ordered():
            if r.seq <= upto:
                newest[r.epoch] = r.seq
        return [r for r in self.ordered()
                if r.seq <= upto and r.events and (r.fresh or newest[r.epoch] == r.seq)]

    def newest_of(self, epoch: int) -> Release | None:
        found = [r for r in self.ordered() if r.epoch == epoch]
        return found[-1] if found else None


def _digest(line: bytes) -> str:
    return hashlib.sha256(line).hexdigest()


def read_ledger(data: bytes, name: str = "privacy_ledger.jsonl") -> Ledger:
    """The ledger in ``data``; a ledger without the chain's header is returned with ``chained`` False."""
    out = Ledger()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    elif lines and lines[-1]:
        out.notes.append(f"{name} ends in {len(lines[-1])} byte(s) that are not a whole line (a torn write, never "
                         "sent): not read")
        lines.pop()
    prev = GENESIS
    for i, line in enumerate(lines, start=1):
        where = f"{name} line {i}"
        try:
            record = json.loads(line)
        except ValueError:
            out.problems.append(f"{where} is not JSON: damaged or edited")
            prev = _digest(line)
            continue
        if not isinstance(record, dict):
            out.problems.append(f"{where} is not a ledger record")
            prev = _digest(line)
            continue
        if i == 1:
            out.chained = record.get("record") == HEADER
            if not out.chained:
                return out
            out.orders = [float(x) for x in record.get("orders", [])]
        if record.get("prev") != prev:
            out.problems.append(f"{where} does not follow line {i - 1} (hash chain: its prev is "
                                f"{str(record.get('prev'))[:12]}..., line {i - 1} hashes to {prev[:12]}...): "
                                "a record was edited, deleted or reordered")
        prev = _digest(line)
        out.lines = i
        _apply(out, record, where, first=i == 1)
    out.head = prev if out.lines else None
    return out


def _apply(out: Ledger, record: Mapping[str, Any], where: str, *, first: bool) -> None:
    kind = record.get("record")
    try:
        if kind == "release":
            seq = int(record["seq"])
            if seq in out.releases:
                out.problems.append(f"{where}: release {seq} is recorded twice")
            out.releases[seq] = Release(seq, int(record["epoch"]), bool(record["fresh"]), list(record["events"]))
        elif kind == "amend":
            seq = int(record["seq"])
            if seq not in out.releases:
                out.problems.append(f"{where}: amends release {seq}, which no earlier line records")
                return
            r = out.releases[seq]
            r.events = list(record["events"])
            r.fresh = bool(record.get("fresh", r.fresh))
        elif kind == "restore":
            out.restores.append(dict(record))
        elif kind != HEADER or not first:
            out.problems.append(f"{where}: unexpected record {kind!r}")
    except (KeyError, TypeError, ValueError) as exc:
        out.problems.append(f"{where}: a {kind} record without a valid {exc}")
