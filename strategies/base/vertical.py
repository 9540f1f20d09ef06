"""The vertical-FL template shared by NPQ, PBM and LDP: server node 0, parties 1..M.

Per step the driver makes the hops of ``round_plan()`` (``parties/vertical/round_plan.py``): the parties'
embeddings go to the server (+ one exchange per secure-aggregation request), and the server's
broadcast (gradient of step t + "forward step t+1") goes to every party. Subclasses change the
party mods, the server's aggregation (decode) and, with SecAgg, the plan's exchanges.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

import torch

from parties.attacks.nodes import arm_active_completion, arm_backdoor, planted_mods
from parties.defenses import arm_forward  # importing registers the built-in defenses
from parties.vertical import wire as vw
from parties.vertical.models import BOTTOMS, HEADS
from parties.vertical.party import (
    ActiveServer,
    Aggregator,
    PassiveParty,
    Schedule,
    concat_aggregator,
    step_config,
    sum_aggregator,
)
from parties.vertical.release_guard import guard_for, party_reports
from parties.vertical.round_plan import RoundPlan, round_plan
from parties.vertical.wire import SERVER_ID, party_node_id
from strategies.base.dropout import Dropouts
from strategies.base.psi import build_aligned_node, run_alignment
from strategies.base.round_loop import task_step
from strategies.base.socket_epoch import plane_summary, socket_chain, train_epoch_chained
from vfl.core.errors import ConfigError, ProtocolError
from vfl.core.rng import NoiseSource
from vfl.data import psi
from vfl.data.dataset import DataSource, KeyedDataSource, LabelShard, PartyShard
from vfl.data.sampling import derive_seed, num_batches
from vfl.engine.strategy import Progress, Strategy
from vfl.privacy.defenses import check_labels, make_defenses, wrap_head
from vfl.runtime import message as wire
from vfl.runtime.costs import FLOAT_BITS, information_bound, paper_formula_bytes
from vfl.runtime.grid import Grid
from vfl.runtime.message import BROADCAST, round_tag
from vfl.runtime.mods import Mod
from vfl.runtime.node import Node, NodeSpec
from vfl.runtime.optim import make_optimizer


class VerticalStrategy(Strategy):
    """Template round of vertical FL with a fusion head on the server."""

    SYNC = 16  # steps between driver syncs in the pipelined training loop
    bottom_dp_refusal: ClassVar[str | None] = ("it releases each sample's embedding without DP noise, so no end-to-end epsilon "
                         "exists (DP-SGD protects the model, not what the server sees); use pbm or ldp")
    reads_party_files: ClassVar[bool] = True  # strategies/base/psi.py builds its nodes over their own tables
    supports_local_steps = True  # train.local_steps (FedBCD): see parties/vertical/local_updates.py
    defense_sites = ("labels", "gradient", "forward", "head")  # `defenses:` the server / parties apply (vfl/privacy/defenses.py)

    @cached_property
    def dropouts(self) -> Dropouts:
        """Driver-side dropout policy and records (train.on_dropout)."""
        return Dropouts(self.cfg)

    def setup(self, grid: Grid) -> None:
        """After a restart rebuilt the server node it expects every party: tell it again which left (skip-party)."""
        self.dropouts.renotify(grid)

    def round_plan(self, phase: str = "train") -> RoundPlan:
        """The hops of one step (``parties/vertical/round_plan.py``): what the task loop, the socket chain
        and the SecAgg server follow. Plain vertical FL: embeddings up, gradient down."""
        return round_plan(phase=phase)

    @property
    def unmask_hops(self) -> int:
        """Extra server -> parties -> server hops per step (secure aggregation: 1, malicious: 2)."""
        return self.round_plan().unmask_hops

    # ---- topology ---------------------------------------------------------------------------
    def layout(self) -> list[NodeSpec]:
        specs = [NodeSpec(SERVER_ID, "server", "server", "server")]
        specs += [NodeSpec(party_node_id(m), "party", f"party{m}", "parties") for m in range(self.cfg.num_parties)]
        return specs

    def schedule(self, num_train: int, num_test: int) -> Schedule:
        """The batch schedule; one object per size, so the nodes a host builds share it (the party batch path
        reads a step's batch ids once for parties with the same schedule: ``parties/vertical/party_batch.py``)."""
        t = self.cfg.train
        sched = Schedule(seed=self.cfg.seed, num_train=num_train, num_test=num_test, batch_size=t.batch_size,
                         eval_batch_size=max(t.batch_size, t.eval_batch_size))
        return self.__dict__.setdefault("_schedules", {}).setdefault(sched, sched)  # type: ignore[no-any-return]

    def party_mods(self, index: int) -> list[Mod]:
        """Transforms of each outgoing embedding (identity for NPQ)."""
        return []

    def server_aggregator(self) -> Aggregator:
        """Turns the M received messages into the head's input."""
        return sum_aggregator if self.cfg.model.fusion == "sum" else concat_aggregator

    def _seeded(self, what: str, node_id: int, build: Any) -> Any:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(what, self.cfg.seed, node_id) & 0x7FFF_FFFF_FFFF_FFFF)
            return build()

    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        if isinstance(data, KeyedDataSource):  # per-party files: rows aligned by PSI in `align`
            return build_aligned_node(self, spec, data)
        shards, labels = data.partition()
        sched = self.schedule(len(labels.y_train), len(labels.y_test))
        if spec.is_server:
            return self.server_node(spec, labels, sched)
        return self.party_node(spec, shards[spec.node_id - 1], sched, labels=labels)

    def server_node(self, spec: NodeSpec, labels: LabelShard, sched: Schedule) -> Node:
        cfg, m, t = self.cfg, self.cfg.model, self.cfg.train
        in_dim = m.embed_dim if m.fusion == "sum" else m.embed_dim * cfg.num_parties
        head = self._seeded("head", spec.node_id, lambda: wrap_head(HEADS.get(m.head, "model.head")(
            in_dim=in_dim, num_classes=labels.num_classes, hidden=m.head_hidden), make_defenses(cfg.defenses),
            in_dim=in_dim, parts=1 if m.fusion == "sum" else cfg.num_parties))  # e.g. mid: a bottleneck before it
        opt = make_optimizer(head.parameters(), name=t.optimizer, lr=t.lr, momentum=t.momentum,
                             weight_decay=t.weight_decay)
        return self.make_server(spec, labels=labels, head=head, optimizer=opt, schedule=sched,
                                party_ids=[party_node_id(i) for i in range(cfg.num_parties)],
                                fusion=m.fusion, device=t.device, local_steps=t.local_steps,
                                defenses=make_defenses(cfg.defenses), noise_rng=cfg.privacy.noise_rng)

    def party_node(self, spec: NodeSpec, shard: PartyShard, sched: Schedule, *,
                   labels: LabelShard | None = None) -> Node:
        """A passive party; ``labels`` only arm an evaluation backdoor (its declared auxiliary knowledge)."""
        cfg, m, t = self.cfg, self.cfg.model, self.cfg.train
        index = spec.node_id - 1
        bottom = self._seeded("bottom", spec.node_id, lambda: BOTTOMS.get(m.bottom, "model.bottom")(
            input_shape=shard.input_shape, embed_dim=m.embed_dim, tanh_c=m.tanh_c, hidden=m.bottom_hidden))
        opt = make_optimizer(bottom.parameters(), name=t.optimizer, lr=t.lr, momentum=t.momentum,
                             weight_decay=t.weight_decay)
        if (dp := cfg.privacy.bottom_dp) is not None:  # DP-SGD through Opacus, noise from the node's source
            from parties.vertical.dp_bottom import wrap_bottom  # imports Opacus only when asked for

            bottom, opt = wrap_bottom(bottom, opt, name=m.bottom, noise_multiplier=dp.noise_multiplier,
                                      max_grad_norm=dp.max_grad_norm, batch_size=t.batch_size,
                                      noise_rng=cfg.privacy.noise_rng, seed=cfg.seed, node_id=spec.node_id)
        party = self.make_party(spec, index=index, num_parties=cfg.num_parties, shard=shard, bottom=bottom,
                                optimizer=opt, schedule=sched, mods=[*planted_mods(cfg, index, sched),
                                                                     *self.party_mods(index)],
                                device=t.device, noise_rng=cfg.privacy.noise_rng, local_steps=t.local_steps)
        party = arm_forward(party, make_defenses(cfg.defenses))  # e.g. dcor: a penalty in the bottom objective
        if cfg.attack.backdoor_party == index:  # evaluation only: a malicious passive party
            if labels is None:
                raise ConfigError("attack.backdoor_party", "the backdoor needs a packaged dataset (its known "
                                  "target samples come from the labels); not available with data.parties")
            party = arm_backdoor(party, cfg, labels)
        if cfg.attack.amc_party == index:  # evaluation only: Fu et al.'s malicious local optimizer
            party = arm_active_completion(party, cfg)
        party.release_guard = guard_for(self, party)  # its own cap on each training sample's noised releases
        return party

    def release(self, embeddings: list[torch.Tensor], *, noise: NoiseSource) -> torch.Tensor:
        """What the server's head sees for these party embeddings (attacks and post-hoc evaluation):
        the plain sum (or concat); PBM and LDP override it with their mechanism."""
        if self.cfg.model.fusion == "sum":
            return torch.stack(embeddings).sum(0)
        return torch.cat(embeddings, dim=1)

    def make_server(self, spec: NodeSpec, **kwargs: Any) -> Node:
        """The active party node (override to add protocol handlers, e.g. secure aggregation)."""
        return ActiveServer(spec, aggregate=self.server_aggregator(), **kwargs)

    def make_party(self, spec: NodeSpec, **kwargs: Any) -> PassiveParty:
        """A passive party node."""
        return PassiveParty(spec, **kwargs)

    # ---- driver-side round ------------------------------------------------------------------
    def steps_per_epoch(self) -> int:
        return num_batches(num_samples=self._num_train, batch_size=self.cfg.train.batch_size)

    def prepare(self, data: DataSource) -> None:
        """The driver learns the split sizes (not the data) to drive the schedule; with per-party
        files it loads nothing and learns them from the alignment (``align``)."""
        self._psi: dict[str, Any] = {}
        if self.cfg.train.on_dropout == "skip-party" and self.cfg.model.fusion != "sum":
            raise ConfigError("train.on_dropout", "skip-party needs model.fusion: sum (a concatenated head "
                              "input cannot lose a party); use fail")
        self._keyed = isinstance(data, KeyedDataSource)
        if self._keyed:
            psi.require()  # the optional 'psi' extra, checked on the driver before any actor starts
            return
        shards, labels = data.partition()
        self._num_train, self._num_test = len(labels.y_train), len(labels.y_test)
        check_labels(self.cfg.defenses, num_classes=labels.num_classes)  # e.g. marvell: binary labels only
        if self.cfg.privacy.bottom_dp is not None:  # refuse a bottom Opacus cannot clip before actors start
            from parties.vertical.dp_bottom import check_bottoms

            check_bottoms(self.cfg.model, [s.input_shape for s in shards])

    def align(self, grid: Grid) -> None:
        if getattr(self, "_keyed", False):
            self._psi = run_alignment(grid, server_id=SERVER_ID, num_parties=self.cfg.num_parties)
            self._num_train, self._num_test = self._psi["psi_num_train"], self._psi["psi_num_test"]

    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, float]:
        """Pipelined: the driver chains the hops (parties -> server -> parties ...) without waiting
        for each; with Ray the wires travel actor to actor. It syncs every ``SYNC`` steps (progress,
        errors) and counts every wire from the hosts' outboxes at the end of the epoch."""
        steps = self.steps_per_epoch()
        start = grid.emit(wire.make(vw.Kind.TRAIN_FORWARD, src=SERVER_ID, dst=BROADCAST, round=round_tag(epoch, 0),
                                    content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=0, forward=True)})))
        server, guard = [grid.group_of[SERVER_ID]], self.dropouts
        guard.start_epoch(grid, epoch)
        plan = self.round_plan()
        chain = socket_chain(grid, self.cfg, server=server[0], plan=plan)
        if chain is not None:  # transport.data_plane: socket: one frame per edge and step (same wires)
            train_epoch_chained(grid, chain, start=start, epoch=epoch, steps=steps, sync_every=self.SYNC,
                                timeout_s=guard.timeout, progress=progress)
            return guard.finish_epoch()
        ups = guard.hop(0, grid.submit([[start]], to=grid.party_groups))
        done, step = 0, 0
        while step < steps:  # the hops of one step: ``self.round_plan()`` (parties/vertical/round_plan.py)
            ups = task_step(grid, guard, list(ups.values()), step=step, plan=plan, server=server[0])
            if (step + 1) % self.SYNC == 0 or step == steps - 1:
                step, ups, left = guard.sync(ups, step=step)  # a dropout: back to the step it completed
                progress(step + 1 - done)
                done = step + 1
            step += 1
        grid.drain()
        if left:
            raise ProtocolError(f"parties sent {len(left)} messages after the last step of epoch {epoch}")
        return guard.finish_epoch()

    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        sched = self.schedule(self._num_train, self._num_test)
        for step in range(sched.eval_steps):
            req = wire.make(vw.Kind.EVAL_FORWARD, src=SERVER_ID, dst=BROADCAST, round=round_tag(epoch, step, "eval"),
                            content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=step, forward=True)}))
            self.dropouts.converse(grid, [req], epoch=epoch, step=step, phase="eval")
        grid.drain()
        return {}

    def bits_per_element(self) -> int:
        """Bits per embedding element a party puts on the wire (32 for float32 embeddings)."""
        return FLOAT_BITS

    def pbm_trials(self) -> int | None:
        """``b`` for the paper's cost formula (None for float embeddings)."""
        return None

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        cfg = self.cfg
        epochs = cfg.train.epochs  # the summary is written when the run is complete
        n, bsz = self._num_train, cfg.train.batch_size
        per_epoch = [min(bsz, n - i) for i in range(0, n, bsz)]
        bits = self.bits_per_element()
        dim = cfg.model.embed_dim
        bound = information_bound(batch_sizes=per_epoch * epochs, parties=cfg.num_parties, dim=dim, bits=bits,
                                  broadcast=cfg.model.fusion == "sum")
        return {
            **self.dropouts.summary(grid),
            "bits_per_element": bits,
            "formula_bytes": paper_formula_bytes(iterations=len(per_epoch) * epochs, batch=bsz,
                                                 parties=cfg.num_parties, dim=dim, b=self.pbm_trials()),
            "information_bound_bytes": bound["total"],
            "information_bound_bytes_up": bound["up"],
            "information_bound_bytes_down": bound["down"],
            **getattr(self, "_psi", {}),
            **plane_summary(cfg),
            **party_reports(grid),  # what each party guarantees on its own (parties/vertical/release_guard.py)
        }

    def epoch_metrics(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        """Train and test metrics accumulated by the server since the last read."""
        q = wire.make(vw.Kind.METRICS, src=SERVER_ID, dst=SERVER_ID, round=round_tag(epoch, 0, "control"))
        (rep,) = grid.send([q])
        return wire.read_metrics(rep.open())
