"""Self-healing runs: when a host dies mid-epoch, bring every node back to the last checkpoint.

``train.on_failure: restart`` (the default over Ray) rebuilds the dead host actor with the same
builder, rebuilds the nodes of the live ones (dropping what the failed round left behind), loads
the last checkpoint into all of them, re-runs the strategy's set-up (fresh SecAgg keys) and
redoes the epoch from its start - at most ``train.max_restarts`` times per run. With seeded
privacy noise the finished run equals an uninterrupted one. Bytes of the failed attempt and of
the repeated set-up are counted as replay, not in the run's totals. ``fail`` (the default
in-process, where a failure is a bug, not a flaky worker) stops at the first failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vfl.errors import PartyFailure

if TYPE_CHECKING:
    from vfl.engine import Engine
    from vfl.schema import RunConfig


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


def _traffic(ledger_state: dict[str, Any]) -> dict[str, int]:
    """Bytes/messages up and down over every phase of a ledger state (control excluded)."""
    out = {"bytes_up": 0, "bytes_down": 0, "messages": 0}
    for key, c in ledger_state["keys"].items():
        direction = key.split("|")[1]
        if direction in ("up", "down"):
            out[f"bytes_{direction}"] += int(c["bytes"])
            out["messages"] += int(c["messages"])
    return out


class Recovery:
    """The restart policy of one run and its record (``restarts``, replayed bytes)."""

    def __init__(self, cfg: RunConfig) -> None:
        self.mode = on_failure_mode(cfg)
        self.max_restarts = cfg.train.max_restarts
        self.restarts: list[dict[str, Any]] = []  # every restart of the run (kept across resumes)
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
                              "attempt": len(self.restarts) + 1})

    def restore(self, engine: Engine, snapshot: Snapshot) -> None:
        """Every host back to ``snapshot``: restart dead actors, load states, redo the set-up."""
        from vfl.privacy import Accountant

        grid = engine.grid
        if grid is None:
            raise RuntimeError("Recovery.restore before Engine.start")
        timeout = float(engine.cfg.transport.round_timeout_s)  # a hung host: dead after this, not a fixed 120 s
        grid.count_rows(engine.transport.restart(snapshot.nodes, timeout_s=timeout))  # what live hosts sent before dying
        engine.protocol_setup(grid)  # fresh signing keys, alignment and SecAgg keys for the rebuilt nodes
        now, then = _traffic(engine.ledger.state()), _traffic(snapshot.ledger)
        for k in self.replay:
            self.replay[k] += now[k] - then[k]
        engine.ledger.load_state(snapshot.ledger)
        engine.accountant = Accountant.from_json(snapshot.accountant) if snapshot.accountant else None

    # ---- persistence and reporting ------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"restarts": list(self.restarts), "replay": dict(self.replay)}

    def load_state(self, state: dict[str, Any] | None) -> None:
        if state:
            self.restarts = list(state.get("restarts", []))
            self.replay = {k: int(state.get("replay", {}).get(k, 0)) for k in self.replay}

    def summary(self) -> dict[str, Any]:
        return {"on_failure": self.mode, "restarts": list(self.restarts),
                "replay_bytes": self.replay["bytes_up"] + self.replay["bytes_down"],
                "replay_bytes_up": self.replay["bytes_up"], "replay_bytes_down": self.replay["bytes_down"],
                "replay_messages": self.replay["messages"]}
