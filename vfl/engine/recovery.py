"""Self-healing runs: when a host dies mid-epoch, bring every node back to the last checkpoint.

``train.on_failure: restart`` (the default over Ray) rebuilds the dead host actor with the same
builder, rebuilds the nodes of the live ones (dropping what the failed round left behind), loads
the last checkpoint into all of them, re-runs the strategy's set-up (fresh SecAgg keys) and
redoes the epoch from its start - at most ``train.max_restarts`` times per run. With seeded
privacy noise the finished run equals an uninterrupted one. Bytes of the failed attempt and of
the repeated set-up are counted as replay, not in the run's totals. ``fail`` (the default
in-process, where a failure is a bug, not a flaky worker) stops at the first failure.

The releases of the failed attempt stay charged: the accountant after a restore is the
snapshot's plus every release the write-ahead ledger (``vfl/privacy/accounting/wal.py``) holds after it.
Each restart and each resume is a record of that ledger, appended before anything is redone, so
``restarts`` and ``resumes`` are read from it: every attempt of every process, also of one that was
killed or gave up before its next checkpoint; each says how many releases it charged (``releases_charged``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vfl.core.errors import PartyFailure
from vfl.privacy.accounting.wal import ReleaseLedger

if TYPE_CHECKING:
    from vfl.config.run_config import RunConfig


def on_failure_mode(cfg: RunConfig) -> str:
    """``train.on_failure``, defaulting to ``restart`` over Ray and ``fail`` in-process."""
    return cfg.train.on_failure or ("restart" if cfg.transport.kind == "ray" else "fail")


@dataclass(frozen=True)
class MidEpoch:
    """Where an epoch stopped: ``step`` steps of ``epoch`` done; ``driver`` the strategy's driver state then,
    ``ledger`` the epoch's byte counters, ``train_s`` its training seconds."""

    epoch: int
    step: int
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def driver(self) -> dict[str, Any]:
        return dict(self.fields.get("driver") or {})

    @property
    def train_s(self) -> float:
        return float(self.fields.get("epoch_train_s") or 0.0)

    def engine_fields(self) -> dict[str, Any]:
        """What ``engine.json`` of the checkpoint adds for the epoch in progress."""
        return {"epoch_ledger": self.fields.get("epoch_ledger", {}), "epoch_train_s": self.train_s}

    @classmethod
    def of(cls, epoch: int, step: int, engine: dict[str, Any]) -> MidEpoch | None:
        """The epoch in progress of a loaded checkpoint's ``engine.json`` (None: an epoch's checkpoint)."""
        if not step:
            return None
        return cls(epoch, step, {"driver": engine.get("driver") or {}, "epoch_ledger": engine.get("epoch_ledger") or {},
                                 "epoch_train_s": engine.get("epoch_train_s") or 0.0})

    def restore(self, ledger: Any) -> None:
        """The epoch's byte counters back into the ledger (the driver's state is loaded with the nodes')."""
        ledger.load_epoch_state(self.fields.get("epoch_ledger") or {})


@dataclass(frozen=True)
class Snapshot:
    """What a restart returns to: the state after ``epoch`` (-1: after set-up, before epoch 0), or with
    ``mid`` after that many steps of the next epoch (``train.checkpoint_every_steps``)."""

    epoch: int
    nodes: dict[int, bytes]
    ledger: dict[str, Any]
    accountant: str | None
    covered: int = 0  # the newest write-ahead release ``accountant`` already charges
    mid: MidEpoch | None = None
    driver: dict[str, Any] = field(default_factory=dict)  # the strategy's driver state then


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
    """The restart policy of one run and its record (``restarts``, ``resumes`` from ``ledger``; replayed bytes)."""

    def __init__(self, cfg: RunConfig, ledger: ReleaseLedger | None = None) -> None:
        self.mode = on_failure_mode(cfg)
        self.max_restarts = cfg.train.max_restarts
        self.ledger = ledger if ledger is not None else ReleaseLedger()  # the run's write-ahead ledger
        self.failure: dict[str, Any] | None = None  # the failure the coming restart answers (its ledger record)
        self.session = 0  # restarts in this process: the budget (a resume by hand starts afresh)
        self.replay = {"bytes_up": 0, "bytes_down": 0, "messages": 0}

    @property
    def enabled(self) -> bool:
        return self.mode == "restart"

    def admit(self, exc: PartyFailure, *, epoch: int) -> None:
        """Take the failure as a restart (``failure``: what its ledger record names), or re-raise it (policy
        ``fail``, or budget spent)."""
        if not self.enabled:
            raise exc
        if self.session >= self.max_restarts:
            raise PartyFailure(exc.party, exc.round, f"{exc.cause}; gave up after {self.session} "
                               f"restart(s) (train.max_restarts={self.max_restarts})") from exc
        self.session += 1
        self.failure = {"party": exc.party, "round": exc.round, "cause": exc.cause, "epoch": epoch}

    def note_restore(self, *, before: dict[str, Any], after: dict[str, Any]) -> None:
        """Count a restore to a snapshot: the traffic between the snapshot's ledger ``before`` and the ledger
        ``after`` the failed attempt and the repeated set-up is replay (``Engine.restore_snapshot`` restores)."""
        now, then = _traffic(after), _traffic(before)
        for k in self.replay:
            self.replay[k] += now[k] - then[k]

    # ---- the record, from the write-ahead ledger ------------------------------------------------
    def _charged(self, record: dict[str, Any]) -> dict[str, Any]:
        epochs = {r.seq: r.epoch for r in self.ledger.releases()}
        seqs = list(record.get("charged", []))
        return {"releases_charged": len(seqs), "charged_epochs": [epochs[s] for s in seqs if s in epochs]}

    @property
    def restarts(self) -> list[dict[str, Any]]:
        """Every restart of the run, oldest first: the failure it answered and the releases it charged."""
        found = [r for r in self.ledger.restores if r.get("reason") == "restart"]
        return [{"party": r.get("party"), "round": r.get("round"), "cause": r.get("cause"), "epoch": r.get("epoch"),
                 "attempt": i + 1, "checkpoint_epoch": r.get("checkpoint_epoch"), **self._charged(r)}
                for i, r in enumerate(found)]

    @property
    def resumes(self) -> list[dict[str, Any]]:
        """Every ``vfl run --resume``, oldest first: when, from which checkpoint, the releases it charged."""
        return [{"time": r.get("time"), "checkpoint_epoch": r.get("checkpoint_epoch"), **self._charged(r)}
                for r in self.ledger.restores if r.get("reason") == "resume"]

    # ---- persistence and reporting ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"replay": dict(self.replay)}

    def load_state(self, state: dict[str, Any] | None) -> None:
        if state:
            self.replay = {k: int(state.get("replay", {}).get(k, 0)) for k in self.replay}

    def summary(self) -> dict[str, Any]:
        return {"on_failure": self.mode, "restarts": self.restarts, "resumes": self.resumes,
                "replay_bytes": self.replay["bytes_up"] + self.replay["bytes_down"],
                "replay_bytes_up": self.replay["bytes_up"], "replay_bytes_down": self.replay["bytes_down"],
                "replay_messages": self.replay["messages"]}
