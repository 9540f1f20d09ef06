"""The engine: starts the hosts, runs the strategy epoch by epoch, accounts, checkpoints, resumes.

It knows no algorithm: it asks the strategy for the layout and the per-epoch logic, counts bytes
through the grid, turns privacy events into (epsilon, delta) with the accountant, and leaves a
checkpoint and a metrics line after every epoch (and with ``train.checkpoint_every_steps`` a checkpoint
after every N steps inside one, ``vfl/engine/step_checkpoint.py``). A dead host is restarted from the last
checkpoint when ``train.on_failure`` is ``restart`` (``vfl/engine/recovery.py``). Before an epoch's first
message leaves, its privacy events are made durable in the write-ahead ledger
(``vfl/privacy/accounting/wal.py``), so a restart or resume charges the releases of a failed attempt.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tqdm.auto import tqdm

from vfl.core.errors import PartyFailure
from vfl.data.dataset import DataSource
from vfl.engine.progress import Phase, StepLines
from vfl.engine.recovery import MidEpoch, Recovery, Snapshot, epoch_or_none
from vfl.engine.rundir import RunDir
from vfl.engine.schema import RunConfig
from vfl.engine.step_checkpoint import save_mid_epoch
from vfl.engine.strategy import STRATEGIES, Strategy
from vfl.engine.summary import label_charge, run_summary
from vfl.privacy.accounting.budget import stop_after, stop_before
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger, restore_accountant
from vfl.privacy.defenses import label_dp
from vfl.runtime.grid import Grid
from vfl.runtime.ledger import CommLedger
from vfl.runtime.node_factory import NodeFactory
from vfl.runtime.transport.base import Transport
from vfl.runtime.transport.placement import place
from vfl.runtime.views import mark_replaced, save_run_views

EpochCallback = Callable[[int, dict[str, Any], "Engine"], None]
StepCallback = Callable[[int, int, "Engine"], None]  # (epoch, steps done in this attempt, engine)
StartCallback = Callable[["Engine"], None]


@dataclass
class EngineResult:
    summary: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)


class Engine:
    """Runs one configured experiment over a transport."""

    def __init__(self, cfg: RunConfig, transport: Transport, data: DataSource, *, run_dir: RunDir | None = None,
                 progress: bool | None = None, on_epoch_end: EpochCallback | None = None,
                 on_step: StepCallback | None = None, on_started: StartCallback | None = None) -> None:
        self.cfg = cfg
        self.transport = transport
        self.data = data
        self.run_dir = run_dir
        self.progress = progress
        self.on_epoch_end = on_epoch_end
        self.on_step = on_step
        self.on_started = on_started  # after the hosts are up and the checkpoint is loaded
        self.strategy: Strategy = STRATEGIES.get(cfg.strategy, "strategy")(cfg)
        self.ledger = CommLedger()
        self.accountant: Any = None
        self.grid: Grid | None = None
        self.groups: list[Any] = []
        # write-ahead privacy ledger: durable in the run directory, in memory without one
        self.releases = (ReleaseLedger(run_dir.path / LEDGER_FILE, repair=True, warn=run_dir.checkpoints.warn)
                         if run_dir is not None else ReleaseLedger())  # the writer: a torn tail is cut here
        self.recovery = Recovery(cfg, self.releases)  # its restarts and resumes are the ledger's records
        self.snapshot: Snapshot | None = None  # what a restart returns to
        self.mid: MidEpoch | None = None  # where the next epoch starts when a checkpoint left it mid-way
        self._last_record: dict[str, Any] | None = None  # the last committed epoch's metrics row
        self.stopped: dict[str, Any] | None = None  # why the run ended early (privacy.epsilon_budget)
        self.extras: dict[str, Any] | None = None  # the strategy's end-of-run extras, asked once (``_party_reports``)

    # ---- lifecycle --------------------------------------------------------------------------
    def start(self) -> Grid:
        """Place the strategy's nodes into hosts (``vfl.runtime.transport.placement``), start them and run
        the protocol set-up; returns the grid that reaches them."""
        self.strategy.prepare(self.data)
        self.groups = place(self.strategy.layout(), self.cfg.transport,
                            server_profile=self.strategy.server_profile)  # the runtime packs nodes into actors
        factory = NodeFactory(type(self.strategy), self.cfg, self.data)
        with Phase(f"starting {sum(len(g.specs) for g in self.groups)} nodes in {len(self.groups)} host(s)"):
            while True:
                try:
                    self.transport.start(self.groups, factory,
                                         threads=torch_threads(self.cfg.train, self.transport.kind))
                    break
                except PartyFailure as exc:  # a host died while starting: start again (train.on_failure, its budget)
                    self.recovery.admit(exc, epoch=-1)
                    self.releases.note_restore(reason="restart", checkpoint_epoch=None, charged=[],
                                               failure=self.recovery.failure)
        self.grid = Grid(self.transport, self.groups, self.ledger)
        while True:
            try:
                self.protocol_setup(self.grid)
                return self.grid
            except PartyFailure as exc:  # a host died in key set-up or PSI: restart it like a training failure
                self.recovery.admit(exc, epoch=-1)  # re-raises unless train.on_failure restarts (budget left)
                self.releases.note_restore(reason="restart", checkpoint_epoch=None, charged=[],
                                           failure=self.recovery.failure)  # nothing released yet: nothing charged
                timeout = float(self.cfg.transport.round_timeout_s)
                self.grid.count_rows(self.transport.restart({}, timeout_s=timeout))  # fresh nodes, no state yet

    def protocol_setup(self, grid: Grid) -> None:
        """What fresh nodes need before training (at start and after a restart rebuilt them)."""
        if self.cfg.auth:
            grid.authenticate()  # node keys made in the hosts; roster fixed before any protocol message
        self.strategy.align(grid)  # PSI when the parties bring their own files
        self.strategy.setup(grid)  # e.g. fresh secure-aggregation keys

    def _new_accountant(self) -> Any:
        from vfl.privacy import Accountant

        return Accountant()

    def _restore(self, resume: bool) -> tuple[int, list[dict[str, Any]], float]:
        """On resume: load the newest intact checkpoint into the hosts and align metrics.jsonl with
        it. Returns (first epoch to run, kept rows, wall seconds already spent)."""
        if not resume or self.run_dir is None:
            return 0, [], 0.0
        ckpt = self.run_dir.load_checkpoint()
        history = self.run_dir.reconcile_metrics(ckpt)
        state = ckpt.engine if ckpt is not None else {}
        if ckpt is not None:
            self.transport.set_state(ckpt.nodes)
            self.ledger.load_state(state["ledger"])
            self.recovery.load_state(state.get("recovery"))
        # the checkpoint's accountant plus every release made after it (the failed attempt's)
        self.accountant, charged = restore_accountant(
            saved=state.get("accountant"), covered=int(state.get("privacy_ledger_seq", 0)), ledger=self.releases,
            warn=self.run_dir.checkpoints.warn)
        epoch = ckpt.epoch if ckpt is not None else None
        self.releases.note_restore(reason="resume", checkpoint_epoch=epoch, charged=charged)  # `resumes`
        if ckpt is None:
            return 0, history, 0.0
        self.strategy.load_driver_state(state.get("driver") or {})
        self._last_record = history[-1] if history else None
        self.mid = MidEpoch.of(ckpt.epoch + 1, ckpt.step, state)
        self.snapshot = Snapshot(ckpt.epoch, ckpt.nodes, state["ledger"], self._accountant_json(),
                                 covered=self.releases.last_seq, mid=self.mid, driver=state.get("driver") or {})
        return ckpt.epoch + 1, history, float(state.get("wall_s", 0.0))

    def restore_snapshot(self, snapshot: Snapshot) -> None:
        """Every host back to ``snapshot`` (a restart): restart dead actors, load states, redo the
        set-up; the accountant is the snapshot's plus the releases made since (the failed attempt's included)."""
        grid = self.grid
        if grid is None:
            raise RuntimeError("Engine.restore_snapshot before Engine.start")
        # charged and recorded (`restarts`) first: a restore that fails, or a process that gives up, is in the ledger
        self.accountant, charged = restore_accountant(saved=snapshot.accountant, covered=snapshot.covered,
                                                      ledger=self.releases)
        self.releases.note_restore(reason="restart", checkpoint_epoch=epoch_or_none(snapshot.epoch), charged=charged,
                                   failure=self.recovery.failure)
        # a later restore to the same snapshot starts from what is charged now (nothing twice)
        self.snapshot = replace(snapshot, accountant=self._accountant_json(), covered=self.releases.last_seq)
        self.mid = snapshot.mid  # a snapshot taken inside an epoch: the redo starts after its steps
        self.strategy.load_driver_state(snapshot.driver)
        timeout = float(self.cfg.transport.round_timeout_s)  # a hung host: dead after this, not a fixed 120 s
        grid.count_rows(self.transport.restart(snapshot.nodes, timeout_s=timeout))  # what live hosts sent before dying
        self.protocol_setup(grid)  # fresh signing keys, alignment and SecAgg keys for the rebuilt nodes
        after = _copy(self.ledger.state())  # the failed attempt and the repeated set-up, counted below as replay
        self.ledger.load_state(snapshot.ledger)
        self.recovery.note_restore(before=snapshot.ledger, after=after)

    def _accountant_json(self) -> str | None:
        return self.accountant.to_json() if self.accountant is not None else None

    def run(self, *, resume: bool = False) -> EngineResult:
        """Start the hosts, set the protocol up and train epoch by epoch.

        Args:
            resume: continue from the newest intact checkpoint of ``run_dir``.

        Returns:
            The summary (``summary.json``) and one metrics row per epoch run.

        Raises:
            PartyFailure: a host failed and ``train.on_failure`` does not restart (or restarts ran out).
        """
        cfg = self.cfg
        grid = self.start()
        epoch, history, wall_offset = self._restore(resume)
        if resume:  # views written before a kill, of epochs the resume redoes: an aborted attempt's
            self._save_views(replaced_after=epoch - 1, reason="resume")
        if self.snapshot is None and self.recovery.enabled:  # a failure in epoch 0 restarts from here
            self.snapshot = Snapshot(-1, self.transport.get_state(), _copy(self.ledger.state()),
                                     self._accountant_json(), covered=self.releases.last_seq,
                                     driver=self.strategy.driver_state())
        if self.on_started is not None:
            self.on_started(self)
        t_run = time.perf_counter() - wall_offset
        steps = self.strategy.steps_per_epoch()
        outer = tqdm(total=cfg.train.epochs, initial=epoch, desc=f"{cfg.name} epochs", unit="epoch",
                     disable=self._no_bar())
        failed: PartyFailure | None = None
        try:
            while epoch < cfg.train.epochs:
                try:
                    if failed is not None and self.snapshot is not None:
                        self.restore_snapshot(self.snapshot)
                        # what live hosts recorded of the aborted attempt (dead ones lost theirs)
                        self._save_views(replaced_after=self.snapshot.epoch, reason="restart")
                        failed = None
                    self.stopped = stop_before(budget=cfg.privacy.epsilon_budget, accountant=self.accountant,
                                               events=self.strategy.privacy_events(epoch=epoch),
                                               delta=cfg.privacy.delta, epoch=epoch)
                    if self.stopped is not None:
                        break
                    record = self._run_epoch(grid, epoch, steps, t_run)
                    self._commit(epoch, record, history)
                except PartyFailure as exc:
                    self.recovery.admit(exc, epoch=epoch)  # re-raises unless a restart is allowed
                    failed = exc
                    continue
                history.append(record)
                self._last_record = record
                outer.update(1)
                outer.set_postfix({k: f"{record[k]:.3f}" for k in ("train_loss", "test_acc")
                                   if record.get(k) is not None})
                if self.on_epoch_end is not None:
                    self.on_epoch_end(epoch, record, self)
                self.stopped = stop_after(budget=cfg.privacy.epsilon_budget, epsilon=record.get("epsilon"),
                                          epoch=epoch)
                if self.stopped is not None:
                    break
                epoch += 1
        finally:
            outer.close()
        self._save_views()
        self.extras = self._party_reports()
        return EngineResult(self.summary(history), history)

    def _save_views(self, *, replaced_after: int | None = None, reason: str = "") -> None:
        """Append what the hosts recorded since the last call to ``views/`` (with every checkpoint,
        so a kill loses at most one epoch); ``replaced_after``: flag the entries of later epochs as
        an aborted attempt's (a restart or resume redoes them)."""
        if self.run_dir is None or not self.cfg.privacy.record_views:
            return
        save_run_views(self.run_dir.path, self.transport, self.groups, self.cfg.privacy)
        if replaced_after is not None:
            mark_replaced(self.run_dir.path / "views", after_epoch=replaced_after, reason=reason)

    def _commit(self, epoch: int, record: dict[str, Any], history: list[dict[str, Any]]) -> None:
        """Checkpoint first (it carries the metrics row and every row before it), then the row: a run killed
        in between, or a metrics.jsonl lost, is rebuilt on resume from the checkpoint: no row duplicated or lost."""
        if self.run_dir is None and not self.recovery.enabled:
            return
        nodes = self.transport.get_state()
        ledger = _copy(self.ledger.state())
        accountant = self._accountant_json()
        covered = self.releases.last_seq  # every release so far is committed (this epoch) or charged
        driver = self.strategy.driver_state()
        if self.run_dir is not None:
            self._save_views()  # before the checkpoint: a kill in between leaves views a resume flags
            self.run_dir.save_checkpoint(epoch, nodes, {
                "epoch": epoch, "ledger": ledger, "wall_s": record["wall_s"], "accountant": accountant,
                "privacy_ledger_seq": covered, "recovery": self.recovery.state(), "record": record,
                "history": [*history, record], "driver": driver})
            self.run_dir.append_metrics(record)
        if self.recovery.enabled:
            self.snapshot = Snapshot(epoch, nodes, ledger, accountant, covered=covered, driver=driver)

    def _no_bar(self) -> bool | None:
        return None if self.progress is None else not self.progress  # None: auto (only on a terminal)

    def _run_epoch(self, grid: Grid, epoch: int, steps: int, t_run: float) -> dict[str, Any]:
        cfg = self.cfg
        mid, self.mid = (self.mid, None) if self.mid is not None and self.mid.epoch == epoch else (None, self.mid)
        if mid is None:
            self.ledger.start_epoch()
        else:  # after a mid-epoch checkpoint: its steps are done, their bytes and seconds counted
            mid.restore(self.ledger)
            self.strategy.start_at(epoch, mid.step)
        t0 = time.perf_counter() - (mid.train_s if mid is not None else 0.0)
        every = cfg.train.checkpoint_every_steps if self.strategy.step_checkpoints else 0
        saving = every and (self.run_dir is not None or self.recovery.enabled)
        with tqdm(total=steps or None, initial=mid.step if mid else 0, desc=f"epoch {epoch}", unit="batch",
                  leave=False, disable=self._no_bar()) as bar:
            done = mid.step if mid is not None else 0
            covered = self.releases.last_seq  # a mid-epoch checkpoint charges none of this epoch's releases
            seq = self._write_ahead(epoch)
            lines = StepLines(epoch, cfg.train.epochs, steps, first=done)  # in a log: a line every 20 s

            def progress(n: int = 1) -> None:
                nonlocal done
                bar.update(n)
                done += n
                if seq:  # a dropout may have lowered the parties summed: the cost of what left grew
                    self.releases.amend(seq, self.strategy.privacy_events(epoch=epoch))
                if saving and done % every == 0 and done < steps:
                    save_mid_epoch(self, epoch, done, covered=covered, train_s=time.perf_counter() - t0,
                                   wall_s=time.perf_counter() - t_run)
                if self.on_step is not None:
                    self.on_step(epoch, done, self)
                lines(done)

            train = self.strategy.train_epoch(grid, epoch=epoch, progress=progress)
        train_s = time.perf_counter() - t0
        record: dict[str, Any] = {"epoch": epoch}
        record.update(train)
        last = epoch == cfg.train.epochs - 1
        if last or (epoch + 1) % cfg.train.eval_every == 0:
            with Phase(f"epoch {epoch + 1}/{cfg.train.epochs}: evaluation"):
                record.update(self.strategy.evaluate(grid, epoch=epoch))
        with Phase(f"epoch {epoch + 1}/{cfg.train.epochs}: end-of-epoch metrics ({self.strategy.name})"):
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
        if seq:  # the release on disk holds exactly what the accountant charges (`vfl verify` recomputes from it)
            self.releases.amend(seq, events)
        if events:
            if self.accountant is None:
                self.accountant = self._new_accountant()
            for ev_ in events:
                self.accountant.record(ev_)
        if self.accountant is not None:
            eps, order = self.accountant.epsilon(cfg.privacy.delta)
            record.update({"epsilon": eps, "delta": cfg.privacy.delta, "rdp_order": order,
                           "epsilon_scope": self.accountant.scope(), "noise_rng": cfg.privacy.noise_rng})
            if self.accountant.labels_only():  # the strategy's own mechanism protects labels (trees' label DP)
                record["epsilon_label"] = eps
        label = label_dp(cfg.defenses, epochs=epoch + 1, delta=cfg.privacy.delta) if cfg.defenses else None
        if label is not None:  # the label defenses' ε so far (summary.json's also charges redone attempts)
            record["epsilon_label"] = label[0]
        record["train_s"] = train_s
        record["epoch_s"] = time.perf_counter() - t0
        record["wall_s"] = time.perf_counter() - t_run
        return record

    def _write_ahead(self, epoch: int) -> int:
        """Make this attempt's privacy events durable before its first message leaves (0: none). With a
        label-DP defense an attempt is recorded even without events: the label ε counts the attempts."""
        events = self.strategy.privacy_events(epoch=epoch)
        if not events and label_dp(self.cfg.defenses, epochs=1, delta=self.cfg.privacy.delta) is None:
            return 0
        fresh = self.cfg.privacy.noise_rng != "seeded" or not self.strategy.replayable()
        return self.releases.begin(epoch=epoch, events=events, fresh=fresh)

    def summary(self, history: list[dict[str, Any]]) -> dict[str, Any]:
        """summary.json's dict (``vfl/engine/summary.py``)."""
        return run_summary(self, history)

    def _label_privacy(self) -> dict[str, Any]:
        """The defenses and the label ε over every epoch attempt (``vfl/engine/summary.py``)."""
        return label_charge(self)

    def _party_reports(self) -> dict[str, Any]:
        """The strategy's end-of-run extras (each party's own report); a host that died after the last checkpoint
        is restarted from it as in training (``train.on_failure``), so its report is not lost."""
        while True:
            try:
                return self.strategy.summary_extra(self.grid) if self.grid is not None else {}
            except PartyFailure as exc:
                self.recovery.admit(exc, epoch=self.cfg.train.epochs)  # re-raises unless a restart is allowed
                if self.snapshot is None:
                    raise
                self.restore_snapshot(self.snapshot)


def torch_threads(train: Any, kind: str) -> int:
    """Intra-op threads of each host: ``train.driver_threads`` (else ``threads_per_actor``) for the
    in-process transport, whose hosts all compute in the driver; ``threads_per_actor`` in actors."""
    if kind == "inprocess" and getattr(train, "driver_threads", None):
        return int(train.driver_threads)
    return int(train.threads_per_actor)


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    """A detached copy of a JSON-able state (the ledger keeps mutating its own dicts)."""
    return json.loads(json.dumps(state))  # type: ignore[no-any-return]
