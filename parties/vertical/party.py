"""Vertical FL nodes: the passive party (features + bottom net); the active party (labels + head) is
``parties/vertical/server.py``, re-exported here with the step record's helpers.

Both are long-lived: they keep their model, optimizer and data shard for the whole run. The
party computes its embedding for the shared batch ids, passes it through its mods (PBM, LDP,
SecAgg...) and sends it up; the server fuses what it receives, steps its head and sends the
gradient of the fused input back (ONE broadcast tensor for sum fusion).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from flwr.common import ArrayRecord, Message
from torch import nn

from parties.vertical import wire as vw
from parties.vertical.data_guard import STATE_KEY as DATA_KEY
from parties.vertical.data_guard import DataGuard
from parties.vertical.local_updates import party_local_steps
from parties.vertical.nonfinite import check_embedding
from parties.vertical.party_batch import train_together
from parties.vertical.release_guard import ReleaseGuard
from parties.vertical.server import ActiveServer, Aggregator, concat_aggregator, sum_aggregator
from parties.vertical.wire import step_config, step_of
from vfl.core.errors import ProtocolError
from vfl.core.rng import NodeNoise
from vfl.data.dataset import PartyShard
from vfl.data.sampling import Schedule
from vfl.runtime import accel
from vfl.runtime import message as wire
from vfl.runtime.accel import backward, set_mode, step_all, zero_grads
from vfl.runtime.mods import Mod, ModContext, apply_mods
from vfl.runtime.node import Node, NodeSpec, handles

__all__ = ["ActiveServer", "Aggregator", "PassiveParty", "Schedule", "concat_aggregator", "step_config", "step_of",
           "sum_aggregator"]  # the protocol's names: parties.vertical.wire (Kind, Record, Array, Key)


class PassiveParty(Node):
    """A passive party: holds ``X_m`` and the bottom net; never sees labels."""

    release_guard: ReleaseGuard | None = None  # its own cap on each training sample's releases (set by the strategy)

    def __init__(self, spec: NodeSpec, *, index: int, num_parties: int, shard: PartyShard, bottom: nn.Module,
                 optimizer: torch.optim.Optimizer, schedule: Schedule, mods: Sequence[Mod] = (),
                 device: str = "cpu", noise_rng: str = "crypto", local_steps: int = 1) -> None:
        super().__init__(spec)
        self.index = index
        self.local_steps = local_steps  # FedBCD Q: local updates per exchange (parties/vertical/local_updates.py)
        self.num_parties = num_parties
        self.shard = shard
        self.bottom = bottom.to(device)
        self.optimizer = optimizer
        self.schedule = schedule
        self.mods = list(mods)
        self.device = device
        self.node_noise = NodeNoise(noise_rng, seed=schedule.seed, node=spec.node_id)  # built here, never sent
        self.mod_state: dict[str, Any] = {}
        self._pending: tuple[int, int, torch.Tensor] | None = None  # (epoch, step, output with graph)
        self.data_guard = DataGuard(spec.name)  # a resumed party refuses data other than its checkpoint's

    def ctx(self, phase: str, epoch: int, step: int) -> ModContext:
        return ModContext(party=self.index, num_parties=self.num_parties, phase=phase, epoch=epoch, step=step,
                          seed=self.schedule.seed, node_noise=self.node_noise, state=self.mod_state)

    def _inputs(self, x: np.ndarray, ids: np.ndarray) -> torch.Tensor:
        if self.data_guard.expected is not None:  # first step after a restore: same data as the checkpoint?
            self.data_guard.check((self.shard.x_train, self.shard.x_test))
        return torch.as_tensor(np.ascontiguousarray(x[ids]), dtype=torch.float32, device=self.device)

    def _send(self, request: Message, emb: torch.Tensor, phase: str, epoch: int, step: int) -> Message:
        if self.release_guard is not None:  # refuse past its own cap (parties/vertical/release_guard.py)
            ids = self.schedule.train_ids(epoch, step) if phase == "train" else self.schedule.test_ids(step)
            self.release_guard.admit(ids, epoch=epoch, step=step, phase=phase)
        if self.mods:  # encoded or masked, the server cannot tell whose embedding went bad: say it here
            check_embedding(emb, party=self.spec.name, phase=phase, epoch=epoch, step=step)
        md = request.metadata
        out = wire.make(md.message_type, src=self.spec.node_id, dst=md.src_node_id,
                        round=wire.round_tag(epoch, step, phase), reply_to=md.message_id,
                        content=wire.records(**{vw.Record.EMB: wire.arrays(**{vw.Array.FLOAT: (
                            emb.detach().numpy() if self.device == "cpu" else _numpy(emb, self.device))})}))
        # (no STEP record: the round tag above names phase, epoch and step, authenticated with the metadata; #29.2)
        return apply_mods(self.mods, out, self.ctx(phase, epoch, step)) if self.mods else out  # NPQ: no mods

    def apply_gradient(self, grad: np.ndarray, epoch: int, step: int) -> None:
        if self._pending is None or self._pending[:2] != (epoch, step):
            raise ProtocolError(f"{self.spec.name}: gradient for step {epoch}:{step} but pending "
                                f"{self._pending[:2] if self._pending else None}")
        out = self._pending[2]
        g = torch.tensor(grad, dtype=torch.float32, device=self.device).reshape(out.shape)
        zero_grads([self.optimizer])
        backward([out], [g])  # torch's own call would import sympy in each party process (vfl.runtime.fast.torch_light)
        if (begin_step := getattr(self.optimizer, "begin_step", None)) is not None:  # DP-SGD: parties/vertical/dp_bottom.py
            begin_step(epoch=epoch, step=step, batch_size=int(out.shape[0]))
        step_all([self.optimizer])  # plain torch optimizers: without the per-call wrapper (fast_step.py)
        self._pending = None
        party_local_steps(bottom=self.bottom, optimizer=self.optimizer, grad=g, extra=self.local_steps - 1,
                          inputs=lambda: self._inputs(self.shard.x_train, self.schedule.train_ids(epoch, step)))

    @classmethod
    def handle_together(cls, deliveries: Sequence[tuple[Node, list[Message]]]) -> list[list[Message]] | None:
        """The parties of one host take a gradient with one fused backward (parties/vertical/party_batch.py; a
        measured speed-up: ``VFL_PLAIN=party_batch`` turns it off, vfl/runtime/accel.py)."""
        return train_together(PassiveParty, deliveries) if accel.enabled("party_batch") else None

    @handles(vw.Kind.TRAIN_FORWARD)
    def on_train(self, messages: list[Message]) -> list[Message]:
        replies = []
        for m in messages:
            cfg = wire.config_of(m, vw.Record.STEP)
            epoch, step = step_of(m)
            if wire.has_array(m, vw.Record.GRAD):
                self.apply_gradient(self.select_gradient(m), epoch, wire.config_int(cfg, vw.Key.GRAD_STEP))
            if bool(cfg[vw.Key.FORWARD]):
                set_mode(self.bottom, training=True)
                out = self.bottom(self._inputs(self.shard.x_train, self.schedule.train_ids(epoch, step)))
                self._pending = (epoch, step, out)
                replies.append(self._send(m, out, "train", epoch, step))
        return replies

    def select_gradient(self, m: Message) -> np.ndarray:
        """The gradient meant for this party: the broadcast tensor, or this party's slice."""
        rec = wire.record_of(m, vw.Record.GRAD, ArrayRecord)
        if rec is None:
            raise ProtocolError(f"{self.spec.name}: message without a gradient record {vw.Record.GRAD!r}")
        name = vw.Array.GRAD if vw.Array.GRAD in rec else f"{vw.Array.GRAD}{self.index}"
        return wire.from_array(rec[name])

    @handles(vw.Kind.EVAL_FORWARD)
    def on_eval(self, messages: list[Message]) -> list[Message]:
        replies = []
        set_mode(self.bottom, training=False)
        for m in messages:
            epoch, step = step_of(m)
            with torch.no_grad():
                out = self.bottom(self._inputs(self.shard.x_test, self.schedule.test_ids(step)))
            replies.append(self._send(m, out, "eval", epoch, step))
        return replies

    def state(self) -> dict[str, Any]:
        return {"bottom": self.bottom.state_dict(), "optimizer": self.optimizer.state_dict(),
                DATA_KEY: self.data_guard.current((self.shard.x_train, self.shard.x_test)),
                **(self.release_guard.state() if self.release_guard is not None else {})}

    def load_state(self, state: dict[str, Any]) -> None:
        self.bottom.load_state_dict(state["bottom"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.data_guard.expect(state.get(DATA_KEY))
        if self.release_guard is not None:  # the larger of its own counts and the checkpoint's
            self.release_guard.load_state(state)

    def keep_from(self, old: Node) -> None:
        """A restart rebuilds this node: it keeps the release counts of the node it replaces."""
        if self.release_guard is not None and isinstance(old, PassiveParty) and old.release_guard is not None:
            self.release_guard.merge(old.release_guard.counts, old.release_guard.eval_counts)

    def release_report(self) -> dict[str, Any] | None:
        """Control plane: its cap, its most-released sample and its worst-case ε (None without a guard)."""
        return self.release_guard.report() if self.release_guard is not None else None


def _numpy(t: torch.Tensor, device: str) -> np.ndarray:
    """``t.detach().cpu().numpy()`` (on a CPU node without the ``cpu()`` call, which returns ``t`` itself)."""
    return t.detach().numpy() if device == "cpu" else t.detach().cpu().numpy()
