"""Write-ahead privacy ledger: a release is on disk before it leaves, so no restore can forget it.

A restart or a resume returns the nodes to a checkpoint and redoes the interrupted epoch. With
fresh noise (``privacy.noise_rng: crypto``) the server then receives a second, independently
noised release of every batch the failed attempt reached: averaging the two halves its error.
The checkpoint's accountant never saw the failed attempt, so the ledger below is what charges it.

``privacy_ledger.jsonl`` in the run directory, one JSON object a line, each append fsynced:

- ``{"record": "release", "seq", "epoch", "time", "fresh", "events"}``: written by the engine
  before the first message of an epoch attempt is sent (every release of the attempt is covered);
- ``{"record": "amend", "seq", "events"[, "fresh"]}``: the attempt's events changed mid-epoch (a dropout
  left fewer parties in the sum, so the per-release cost grew; under seeded noise the attempt is then
  ``fresh``: a redo sums other parties over the same binomials, and the two sums differ by one party's);
- ``{"record": "restore", "reason", "time", "checkpoint_epoch", "charged"[, "party", "round", "cause",
  "epoch"]}``: a restart (with the failure it answers) or a resume, appended before anything is redone,
  charged the releases ``charged`` (their ``seq``) on top of the checkpoint. ``restarts`` and ``resumes``
  in summary.json are these records (``vfl/engine/recovery.py``).

A checkpoint stores the ``seq`` its accountant covers. Restoring it gives the checkpoint's
accountant plus the events of every release after that ``seq`` (``restore_accountant``): the
failed attempt, and an attempt whose newer checkpoint was damaged. Under ``noise_rng: seeded`` a
redone step repeats the same noise on the same state (the same decoded sums): nothing new is
released, so ``fresh`` is false and nothing is charged -- unless the strategy says a redo would not
replay the attempt (``Strategy.replayable``: a SecAgg sum that starts short of parties). A partial last line (the process died
while appending, before the release it announced was sent) is ignored by readers and cut by the writer when it
opens the ledger (``ledger_file.repair``: kept aside, one warning line); an append is whole or raises. The file
is a hash chain (``ledger_file``): a header record first, then every record carries the previous line's digest.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.core.errors import RunDirError
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, Accountant
from vfl.privacy.accounting.events import PrivacyEvent, event_from_dict, event_to_dict
from vfl.privacy.accounting.ledger_file import (
    FORMAT,
    GENESIS,
    HEADER,
    LedgerDamaged,
    Warn,
    append_line,
    line_digest,
    repair,
)

LEDGER_FILE = "privacy_ledger.jsonl"


@dataclass(frozen=True)
class Release:
    """One epoch attempt's releases: each training sample of ``epoch`` released once, at most."""

    seq: int
    epoch: int
    fresh: bool
    events: tuple[PrivacyEvent, ...]


def utc_now() -> str:
    """The current time, ISO 8601 in UTC to the second (ledger and summary records)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ReleaseLedger:
    """The write-ahead ledger of one run; in memory only when ``path`` is None (no run directory).

    ``repair``: this process writes the run (it holds the run's lock): a torn tail is cut on open, kept
    aside, with one ``warn`` line. Readers (reports) leave the file as it is and ignore a torn tail."""

    def __init__(self, path: str | Path | None = None, *, repair: bool = False, warn: Warn | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._warn = warn
        self._repaired = not repair
        if repair:
            self._repair()
        self._load()

    def _load(self) -> None:
        """The state of the file as it is (empty for a new or in-memory ledger)."""
        self._releases: dict[int, Release] = {}
        self.restores: list[dict[str, Any]] = []
        self.head = GENESIS  # digest of the newest line: the next record's ``prev``
        self.records = 0  # lines in the chain (header included)
        self.chained = True  # False: a ledger written before the hash chain (its records carry no ``prev``)
        if self.path is not None and self.path.is_file():
            for line, record in self._read(self.path):
                self._follow(line, record)
                if record.get("record") != HEADER:
                    self._apply(record)

    @property
    def last_seq(self) -> int:
        """The newest release's ``seq`` (0: none yet)."""
        return max(self._releases, default=0)

    def releases(self) -> list[Release]:
        """Every release, oldest first (amendments applied)."""
        return [self._releases[s] for s in sorted(self._releases)]

    def begin(self, *, epoch: int, events: Sequence[PrivacyEvent], fresh: bool) -> int:
        """Make the coming attempt of ``epoch`` durable BEFORE any of its messages leaves; returns its seq."""
        seq = self.last_seq + 1
        self._write({"record": "release", "seq": seq, "epoch": int(epoch), "time": utc_now(), "fresh": bool(fresh),
                     "events": [event_to_dict(e) for e in events]})
        return seq

    def amend(self, seq: int, events: Sequence[PrivacyEvent]) -> None:
        """Replace the events of release ``seq`` when they changed (durable; no-op otherwise). Changed events
        mean other parties were summed: not a replay a redo could repeat, so the release becomes fresh."""
        if tuple(events) != self._releases[seq].events:
            self._write({"record": "amend", "seq": seq, "events": [event_to_dict(e) for e in events],
                         **({} if self._releases[seq].fresh else {"fresh": True})})

    def note_restore(self, *, reason: str, checkpoint_epoch: int | None, charged: Sequence[Release],
                     failure: dict[str, Any] | None = None) -> dict[str, Any]:
        """Record that a restart (``failure``: the party, round, cause and epoch it answers) or a resume
        charged ``charged``; returns the record (without its tag)."""
        record = {"record": "restore", "reason": reason, "time": utc_now(), "checkpoint_epoch": checkpoint_epoch,
                  "charged": [r.seq for r in charged], **(failure or {})}
        self._write(record)
        return {k: v for k, v in record.items() if k != "record"}

    # ---- internals ----------------------------------------------------------------------------
    def _repair(self) -> None:
        if self.path is not None:
            warn = self._warn or _stderr_warning
            repair(self.path, is_record=_is_record, warn=warn)
        self._repaired = True

    def _follow(self, line: bytes, record: dict[str, Any]) -> None:
        """Move the chain's head past ``line`` (read back or just written)."""
        if self.records == 0:
            self.chained = record.get("record") == HEADER
        self.head = line_digest(line)
        self.records += 1

    def _write(self, record: dict[str, Any]) -> None:
        if self.path is not None and not self._repaired:  # a failed append (or a writer's first): cut torn bytes
            self._repair()
            self._load()
        if self.records == 0 and record.get("record") != HEADER:
            self._write({"record": HEADER, "format": FORMAT, "orders": [float(x) for x in DEFAULT_ORDERS]})
        line = json.dumps({**record, "prev": self.head}).encode()
        if self.path is not None:
            try:
                append_line(self.path, line + b"\n")
            except RunDirError:
                self._repaired = False  # torn bytes may be on disk: cut them before the next append
                raise
        self._follow(line, record)
        if record.get("record") != HEADER:
            self._apply(record)

    def _apply(self, record: dict[str, Any]) -> None:
        kind = record.get("record")
        if kind == "release":
            seq = int(record["seq"])
            self._releases[seq] = Release(seq, int(record["epoch"]), bool(record["fresh"]),
                                          tuple(event_from_dict(e) for e in record["events"]))
        elif kind == "amend":
            seq = int(record["seq"])
            old = self._releases[seq]
            self._releases[seq] = Release(seq, old.epoch, bool(record.get("fresh", old.fresh)),
                                          tuple(event_from_dict(e) for e in record["events"]))
        elif kind == "restore":
            self.restores.append({k: v for k, v in record.items() if k not in ("record", "prev")})
        else:
            raise ValueError(f"unknown record {kind!r}")

    @staticmethod
    def _read(path: Path) -> list[tuple[bytes, dict[str, Any]]]:
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as exc:
            raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
        out: list[tuple[bytes, dict[str, Any]]] = []
        seen: set[int] = set()
        prev: str | None = None  # None: no chain to follow (empty so far, or a ledger from before the chain)
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
                ReleaseLedger._check(record, seen, first=not out)
            except (ValueError, KeyError, TypeError) as exc:
                if i == len(lines) - 1:  # a partial last line: died while appending, before sending
                    break
                raise LedgerDamaged(f"{path} line {i + 1} is not a privacy ledger record ({exc}); the run cannot be "
                                    "resumed (its releases could not be charged): `vfl verify` names what differs, "
                                    "start a new run") from None
            if not out:
                prev = GENESIS if record.get("record") == HEADER else None
            if prev is not None and record.get("prev") != prev:
                raise LedgerDamaged(f"{path} line {i + 1} does not follow the line before it (its hash chain link "
                                    "differs: a record was edited, deleted or reordered); the run cannot be resumed: "
                                    "`vfl verify` names what differs, start a new run")
            if prev is not None:
                prev = line_digest(line)
            out.append((line, record))
        return out

    @staticmethod
    def _check(record: dict[str, Any], seen: set[int], *, first: bool = False) -> None:
        kind = record.get("record")
        if kind in ("release", "amend"):
            seq = int(record["seq"])
            if (kind == "release") == (seq in seen):
                raise ValueError(f"seq {seq} {'repeated' if kind == 'release' else 'amended before release'}")
            for e in record["events"]:
                event_from_dict(e)
            seen.add(seq)
        elif kind == HEADER:
            if not first or record.get("format") != FORMAT:
                raise ValueError(f"a {HEADER} header of format {record.get('format')!r} at a line other than the first")
        elif kind != "restore":
            raise ValueError(f"unknown record {kind!r}")


def _is_record(record: dict[str, Any]) -> bool:
    """Whether ``record`` is whole: a known kind with its fields (the repair's test of a tail)."""
    try:
        kind = record.get("record")
        if kind == "release":
            int(record["seq"]), int(record["epoch"]), bool(record["fresh"])
        if kind in ("release", "amend"):
            int(record["seq"])
            for e in record["events"]:
                event_from_dict(e)
        return kind in ("release", "amend", "restore", HEADER)
    except (ValueError, KeyError, TypeError):
        return False


def _stderr_warning(message: str) -> None:
    from vfl.core.logs import get_logger

    get_logger(__name__).warning("%s", message)


def restore_accountant(*, saved: str | None, covered: int, ledger: ReleaseLedger,
                       warn: Callable[[str], None] | None = None) -> tuple[Accountant | None, list[Release]]:
    """The accountant a restore must continue with: the saved one plus every fresh release after
    ``covered`` (never less than what was released). Returns it and the releases it charged.

    A ledger that ends before ``covered`` (deleted, or a run from before the ledger) cannot say
    what came after: the saved accountant is kept, with one warning line.
    """
    acc = Accountant.from_json(saved) if saved else None
    if ledger.last_seq < covered:
        if warn is not None:
            where = ledger.path if ledger.path is not None else "the privacy ledger"
            warn(f"{where} ends at release {ledger.last_seq} but the checkpoint covers {covered}; "
                 "keeping the checkpoint's accountant (releases after it cannot be charged)")
        return acc, []
    charged = [r for r in ledger.releases() if r.seq > covered and r.fresh and r.events]
    for release in charged:
        if acc is None:
            acc = Accountant()
        for event in release.events:
            acc.record(event)
    return acc, charged
