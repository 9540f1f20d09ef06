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
while appending, before the release it announced was sent) is ignored.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.core.errors import RunDirError
from vfl.privacy.accounting.accountant import Accountant
from vfl.privacy.accounting.events import PrivacyEvent, event_from_dict, event_to_dict

LEDGER_FILE = "privacy_ledger.jsonl"


@dataclass(frozen=True)
class Release:
    """One epoch attempt's releases: each training sample of ``epoch`` released once, at most."""

    seq: int
    epoch: int
    fresh: bool
    events: tuple[PrivacyEvent, ...]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def utc_now() -> str:
    """The current time, ISO 8601 in UTC to the second (ledger and summary records)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ReleaseLedger:
    """The write-ahead ledger of one run; in memory only when ``path`` is None (no run directory)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._releases: dict[int, Release] = {}
        self.restores: list[dict[str, Any]] = []
        if self.path is not None and self.path.is_file():
            for record in self._read(self.path):
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
    def _write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            new = not self.path.exists()
            line = (json.dumps(record) + "\n").encode()
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    os.write(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if new:
                    _fsync_dir(self.path.parent)  # the file's name is durable too
            except OSError as exc:
                raise RunDirError(f"cannot write {self.path}: {exc.strerror or exc}") from None
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
            self.restores.append({k: v for k, v in record.items() if k != "record"})
        else:
            raise ValueError(f"unknown record {kind!r}")

    @staticmethod
    def _read(path: Path) -> list[dict[str, Any]]:
        try:
            lines = path.read_bytes().split(b"\n")
        except OSError as exc:
            raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
        out: list[dict[str, Any]] = []
        seen: set[int] = set()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                if not isinstance(record, dict):
                    raise ValueError("not an object")
                ReleaseLedger._check(record, seen)
            except (ValueError, KeyError, TypeError) as exc:
                if i == len(lines) - 1:  # a partial last line: died while appending, before sending
                    break
                raise RunDirError(f"{path} line {i + 1} is not a privacy ledger record ({exc})") from None
            out.append(record)
        return out

    @staticmethod
    def _check(record: dict[str, Any], seen: set[int]) -> None:
        kind = record.get("record")
        if kind in ("release", "amend"):
            seq = int(record["seq"])
            if (kind == "release") == (seq in seen):
                raise ValueError(f"seq {seq} {'repeated' if kind == 'release' else 'amended before release'}")
            for e in record["events"]:
                event_from_dict(e)
            seen.add(seq)
        elif kind != "restore":
            raise ValueError(f"unknown record {kind!r}")


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
