"""Self-healing runs: when a host dies mid-epoch, bring every node back to the last checkpoint.

``train.on_failure: restart`` (the default over Ray) rebuilds the dead host actor with the same
builder, rebuilds the nodes of the live ones (dropping what the failed round left behind), loads
the last checkpoint into all of them, re-runs the strategy's set-up (fresh SecAgg keys) and
redoes the epoch from its start - at most ``train.max_restarts`` times per run. With seeded
privacy noise the finished run equals an uninterrupted one. Bytes of the failed attempt and of
the repeated set-up are counted as replay, not in the run's totals. ``fail`` (the default
in-process, where a failure is a bug, not a flaky worker) stops at the first failure.

The releases of the failed attempt stay charged: the accountant after a restore is the
snapshot's plus every release the write-ahead ledger (``vfl/privacy/accounting/wal.py``) holds after it;
each restart, and each resume (``note_resume``), says how many it charged (``releases_charged``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vfl.core.errors import PartyFailure

if TYPE_CHECKING:
    from vfl.config.run_config import RunConfig


def on_failure_mode(cfg: RunConfig) -> str:
    """``train.on_failure``, defaulting to ``restart`` over Ray and ``fail`` in-process."""
    return cfg.train.on_failure or ("restart" if cfg.transport.kind == "ray" else "fail")


@dataclass(frozen=True)
class Snapshot:
    """What a restart returns to: the state after ``epoch`` (-1: after set-up, before epoch 0)."""

    epoch: int
    nodes: dict[int, bytes]
    ledger: dict[str, Any]
    accountant: str | None
    covered: int = 0  # the newest write-ahead release ``accountant`` already charges


def _traffic(ledger_state: dict[str, Any]) -> dict[str, int]:
    """Bytes/messages up and down over every phase of a ledger state (control excluded)."""
    out = {"bytes_up": 0, "bytes_down": 0, "messages": 0}
    for key, c in ledger_state["keys"].items():
        direction = key.split("|")[1]
        if direction in ("up", "down"):
            out[f"bytes_{direction}"] += int(c["bytes"])
            out["messages"] += int(c["messages"])
    return out


def epoch_or_none(epoch: int) -> int | None:
    """A snapshot's epoch for records: None for the state after set-up (no epoch committed)."""
    return epoch if epoch >= 0 else None


class Recovery:
    """The restart policy of one run and its record (``restarts``, replayed bytes)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.mode = on_failure_mode(cfg)
        self.max_restarts = cfg.train.max_restarts
        self.restarts: list[dict[str, Any]] = []  # every restart of the run (kept across resumes)
        self.resumes: list[dict[str, Any]] = []  # every `vfl run --resume` (kept in checkpoints)
        self.session = 0  # restarts in this process: the budget (a resume by hand starts afresh)
        self.replay = {"bytes_up": 0, "bytes_down": 0, "messages": 0}

    @property
    def enabled(self) -> bool:
        return self.mode == "restart"

    def admit(self, exc: PartyFailure, *, epoch: int) -> None:
        """Record the failure as a restart, or re-raise it (policy ``fail``, or budget spent)."""
        if not self.enabled:
            raise exc
        if self.session >= self.max_restarts:
            raise PartyFailure(exc.party, exc.round, f"{exc.cause}; gave up after {self.session} "
                               f"restart(s) (train.max_restarts={self.max_restarts})") from exc
        self.session += 1
        self.restarts.append({"party": exc.party, "round": exc.round, "cause": exc.cause, "epoch": epoch,
                              "attempt": len(self.restarts) + 1, "releases_charged": 0})

    def note_restore(self, *, before: dict[str, Any], after: dict[str, Any], charged: list[Any]) -> None:
        """Record a restore to a snapshot: the traffic between the snapshot's ledger ``before`` and
        the ledger ``after`` the failed attempt and the repeated set-up is replay; the releases
        ``charged`` again go to the last restart (``Engine.restore_snapshot`` does the restoring)."""
        now, then = _traffic(after), _traffic(before)
        for k in self.replay:
            self.replay[k] += now[k] - then[k]
        if self.restarts:
            self.restarts[-1]["releases_charged"] += len(charged)
            self.restarts[-1]["charged_epochs"] = self.restarts[-1].get("charged_epochs", []) + [
                r.epoch for r in charged]

    def note_resume(self, *, checkpoint_epoch: int | None, charged: list[Any], time: str) -> dict[str, Any]:
        """Record a resume (``resumes``): when, from which checkpoint, the releases it charged."""
        entry = {"time": time, "checkpoint_epoch": checkpoint_epoch, "releases_charged": len(charged),
                 "charged_epochs": [r.epoch for r in charged]}
        self.resumes.append(entry)
        return entry

    # ---- persistence and reporting ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"restarts": list(self.restarts), "resumes": list(self.resumes), "replay": dict(self.replay)}

    def load_state(self, state: dict[str, Any] | None) -> None:
        if state:
            self.restarts = list(state.get("restarts", []))
            self.resumes = list(state.get("resumes", []))
            self.replay = {k: int(state.get("replay", {}).get(k, 0)) for k in self.replay}

    def summary(self) -> dict[str, Any]:
        return {"on_failure": self.mode, "restarts": list(self.restarts), "resumes": list(self.resumes),
                "replay_bytes": self.replay["bytes_up"] + self.replay["bytes_down"],
                "replay_bytes_up": self.replay["bytes_up"], "replay_bytes_down": self.replay["bytes_down"],
                "replay_messages": self.replay["messages"]}
