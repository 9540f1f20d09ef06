"""The engine: starts the hosts, runs the strategy epoch by epoch, accounts, checkpoints, resumes.

It knows no algorithm: it asks the strategy for the layout and the per-epoch logic, counts bytes
through the grid, turns privacy events into (epsilon, delta) with the accountant, and leaves a
metrics line and a checkpoint after every epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

from vfl.auth import auth_summary
from vfl.data import DataSource
from vfl.errors import PartyFailure, PrivacyBudgetExceeded
from vfl.grid import Grid
from vfl.ledger import CommLedger, setup_breakdown
from vfl.rundir import RunDir
from vfl.schema import RunConfig
from vfl.strategy import STRATEGIES, NodeFactory, Strategy
from vfl.transport.base import Transport

EpochCallback = Callable[[int, dict[str, Any], "Engine"], None]


@dataclass
class EngineResult:
    summary: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)


class Engine:
    """Runs one configured experiment over a transport."""

    def __init__(self, cfg: RunConfig, transport: Transport, data: DataSource, *, run_dir: RunDir | None = None,
                 progress: bool | None = None, on_epoch_end: EpochCallback | None = None) -> None:
        self.cfg = cfg
        self.transport = transport
        self.data = data
        self.run_dir = run_dir
        self.progress = progress
        self.on_epoch_end = on_epoch_end
        self.strategy: Strategy = STRATEGIES.get(cfg.strategy, "strategy")(cfg)
        self.ledger = CommLedger()
        self.accountant: Any = None
        self.grid: Grid | None = None
        self.groups: list[Any] = []

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> Grid:
        self.strategy.prepare(self.data)
        self.groups = self.strategy.host_groups(self.strategy.layout())
        factory = NodeFactory(type(self.strategy), self.cfg, self.data)
        self.transport.start(self.groups, factory, threads=self.cfg.train.threads_per_actor)
        self.grid = Grid(self.transport, self.groups, self.ledger)
        if self.cfg.auth:
            self.grid.authenticate()  # node keys made in the hosts; roster fixed before any protocol message
        self.strategy.align(self.grid)  # PSI when the parties bring their own files
        self.strategy.setup(self.grid)
        return self.grid

    def _new_accountant(self) -> Any:
        from vfl.privacy import Accountant

        return Accountant()

    def run(self, *, resume: bool = False) -> EngineResult:
        cfg = self.cfg
        history: list[dict[str, Any]] = []
        start_epoch, wall_offset = 0, 0.0
        grid = self.start()
        if resume and self.run_dir is not None:
            ckpt = self.run_dir.latest_checkpoint()
            if ckpt is not None:
                nodes, engine_state = ckpt
                self.transport.set_state(nodes)
                self.ledger.load_state(engine_state["ledger"])
                if engine_state.get("accountant") is not None:
                    from vfl.privacy import Accountant

                    self.accountant = Accountant.from_json(engine_state["accountant"])
                start_epoch = int(engine_state["epoch"]) + 1
                wall_offset = float(engine_state.get("wall_s", 0.0))
                history = self.run_dir.truncate_metrics(start_epoch - 1)
        t_run = time.perf_counter() - wall_offset
        epochs = range(start_epoch, cfg.train.epochs)
        steps = self.strategy.steps_per_epoch()
        outer = tqdm(epochs, desc=f"{cfg.name} epochs", unit="epoch", disable=self._no_bar(), initial=start_epoch,
                     total=cfg.train.epochs)
        for epoch in outer:
            record = self._run_epoch(grid, epoch, steps, t_run)
            history.append(record)
            outer.set_postfix({k: f"{record[k]:.3f}" for k in ("train_loss", "test_acc") if record.get(k) is not None})
            if self.run_dir is not None:
                self.run_dir.append_metrics(record)
                self.run_dir.save_checkpoint(epoch, self.transport.get_state(), {
                    "epoch": epoch, "ledger": self.ledger.state(), "wall_s": record["wall_s"],
                    "accountant": self.accountant.to_json() if self.accountant is not None else None,
                })
            if self.on_epoch_end is not None:
                self.on_epoch_end(epoch, record, self)
            budget = cfg.privacy.epsilon_budget
            if budget is not None and record.get("epsilon") is not None and record["epsilon"] > budget:
                raise PrivacyBudgetExceeded(
                    f"epsilon {record['epsilon']:.4g} > privacy.epsilon_budget {budget} after epoch {epoch}")
        return EngineResult(self.summary(history), history)

    def _no_bar(self) -> bool | None:
        return None if self.progress is None else not self.progress  # None: auto (only on a terminal)

    def _run_epoch(self, grid: Grid, epoch: int, steps: int, t_run: float) -> dict[str, Any]:
        cfg = self.cfg
        self.ledger.start_epoch()
        t0 = time.perf_counter()
        with tqdm(total=steps or None, desc=f"epoch {epoch}", unit="batch", leave=False,
                  disable=self._no_bar()) as bar:
            train = self.strategy.train_epoch(grid, epoch=epoch, progress=bar.update)
        train_s = time.perf_counter() - t0
        record: dict[str, Any] = {"epoch": epoch}
        record.update(train)
        last = epoch == cfg.train.epochs - 1
        if last or (epoch + 1) % cfg.train.eval_every == 0:
            record.update(self.strategy.evaluate(grid, epoch=epoch))
        record.update(self.strategy.epoch_metrics(grid, epoch=epoch))
        for key in ("train_loss", "train_acc", "test_acc"):
            record.setdefault(key, None)
        tot = self.ledger.epoch_totals("train")
        record.update(tot)
        ev = self.ledger.epoch_totals("eval")
        record["eval_bytes_up"], record["eval_bytes_down"] = ev["bytes_up"], ev["bytes_down"]
        cum = self.ledger.totals("train")
        record["cum_bytes_up"], record["cum_bytes_down"] = cum["bytes_up"], cum["bytes_down"]
        events = self.strategy.privacy_events(epoch=epoch)
        if events:
            if self.accountant is None:
                self.accountant = self._new_accountant()
            for ev_ in events:
                self.accountant.record(ev_)
        if self.accountant is not None:
            eps, order = self.accountant.epsilon(cfg.privacy.delta)
            record.update({"epsilon": eps, "delta": cfg.privacy.delta, "rdp_order": order})
        record["train_s"] = train_s
        record["epoch_s"] = time.perf_counter() - t0
        record["wall_s"] = time.perf_counter() - t_run
        return record

    def summary(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        cfg = self.cfg
        last = history[-1] if history else {}
        tot = self.ledger.totals("train")
        setup = self.ledger.totals("setup")
        summary: dict[str, Any] = {
            "name": cfg.name, "strategy": cfg.strategy, "dataset": cfg.dataset, "num_parties": cfg.num_parties,
            "transport": self.transport.kind, "epochs": len(history) and history[-1]["epoch"] + 1,
            "final_train_loss": last.get("train_loss"), "final_train_acc": last.get("train_acc"),
            "final_test_acc": last.get("test_acc"),
            "total_bytes_up": tot["bytes_up"], "total_bytes_down": tot["bytes_down"],
            "payload_bytes_up": tot["payload_up"], "payload_bytes_down": tot["payload_down"],
            "envelope_bytes_up": tot["bytes_up"] - tot["payload_up"],
            "envelope_bytes_down": tot["bytes_down"] - tot["payload_down"],
            "messages_up": tot["messages_up"], "messages_down": tot["messages_down"],
            "envelope_bytes_per_message": (
                (tot["bytes_up"] + tot["bytes_down"] - tot["payload_up"] - tot["payload_down"])
                / max(1, tot["messages_up"] + tot["messages_down"])),
            "setup_bytes": setup["bytes_up"] + setup["bytes_down"],
            **setup_breakdown(self.ledger), **auth_summary(self.ledger, enabled=cfg.auth),
            "eval_bytes": sum(self.ledger.totals("eval")[k] for k in ("bytes_up", "bytes_down")),
            "bytes_per_party": self.ledger.per_party("train"),
            "bytes_by_kind": dict(sorted(self.ledger.by_kind.items())),
            "wall_s": last.get("wall_s"),
        }
        if "test_auprc" in last:
            summary["final_test_auprc"] = last["test_auprc"]
        if self.accountant is not None:
            summary.update({"epsilon": last.get("epsilon"), "delta": cfg.privacy.delta})
        if self.grid is not None:
            summary.update(self.strategy.summary_extra(self.grid))
        return summary

    def fail_context(self, exc: PartyFailure) -> str:
        """Where to look after a failure: the last checkpoint that survived."""
        ckpt = self.run_dir.path / "checkpoints" / "latest" if self.run_dir else None
        return f"{exc}; last checkpoint: {ckpt.read_text().strip() if ckpt and ckpt.exists() else 'none'}"
