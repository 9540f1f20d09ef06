"""LLM model server: a frozen pretrained encoder behind a stateless forward/backprop API.

``train.forward`` / ``evaluate.forward`` return h(x, θ); ``train.backprop`` returns, per received
cotangent piece ĝ, the LoRA gradient (∂h/∂θ)^T ĝ. Every request stands for a whole adapter set θ_i,
sent whole or as the tensors changed since this server last received set i (``theta_cache.py``:
the server keeps its last copy of each set), and applied for that call only: apart from that copy,
nothing about the client is kept between calls except the MESSAGE LOG — an honest-but-curious server's record of what it saw: every received message's kind,
record and array names/shapes (``received``), plus the training activations it returned and
the gradient pieces it received (``observed``), which the driver drains with ``query.log`` to
score label leakage against the true labels. With a ``Curious`` keep (``parties/llm/p3eft/curious.py``)
it also runs, at ``query.log``, the attacks it could run on what it kept: g_h from successive
adapter states (θ-difference) and every adapter set's activations concatenated.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from flwr.common import ArrayRecord, Message, MetricRecord

from parties.llm.common.arch import Arch
from parties.llm.p3eft.adapters import LoraEncoder
from parties.llm.p3eft.curious import Curious
from parties.llm.p3eft.theta_cache import ThetaStore
from parties.llm.p3eft.wire import (
    Kind,
    Record,
    read_inputs,
    read_record,
    read_step,
    read_types,
    respond,
)
from vfl.runtime import message as wire
from vfl.runtime.message import parse_round
from vfl.runtime.node import Node, NodeSpec, handles


@dataclass(frozen=True)
class Received:
    """What one received message exposed: kind, sender, round, config keys, array (name, dtype, shape)."""

    kind: str
    src: int
    round: str
    config: tuple[str, ...]
    arrays: tuple[tuple[str, str, tuple[int, ...]], ...]


@dataclass
class Observed:
    """Rows the server saw in training, keyed by (epoch, step, adapter, row) for the experimenter."""

    rows: list[np.ndarray] = field(default_factory=list)
    keys: list[np.ndarray] = field(default_factory=list)

    def state(self) -> dict[str, list[torch.Tensor]]:
        """What is not drained yet (a mid-epoch checkpoint keeps it: the epoch's leak is scored on all of it)."""
        return {"rows": [torch.from_numpy(r) for r in self.rows], "keys": [torch.from_numpy(k) for k in self.keys]}

    def load(self, state: dict[str, list[torch.Tensor]]) -> None:
        self.rows = [r.numpy() for r in state.get("rows", [])]
        self.keys = [k.numpy() for k in state.get("keys", [])]

    def add(self, rows: np.ndarray, *, epoch: int, step: int, adapter: int, index: np.ndarray) -> None:
        self.rows.append(np.asarray(rows, dtype=np.float32))
        k = np.zeros((len(index), 4), dtype=np.int64)
        k[:, 0], k[:, 1], k[:, 2], k[:, 3] = epoch, step, adapter, index
        self.keys.append(k)

    def drain(self, dim: int) -> dict[str, np.ndarray]:
        rows = np.concatenate(self.rows) if self.rows else np.zeros((0, dim), np.float32)
        keys = np.concatenate(self.keys) if self.keys else np.zeros((0, 4), np.int64)
        self.rows, self.keys = [], []
        return {"rows": rows, "keys": keys}


class ModelServer(Node):
    """Server node: serves forward/backprop for client adapters; logs what it saw."""

    accepts_broadcast = False

    def __init__(self, spec: NodeSpec, *, model: LoraEncoder, keep_received: int = 100_000,
                 curious: Curious | None = None) -> None:
        super().__init__(spec)
        self.model = model
        self.curious = curious  # the θ-difference and concatenation attacks it runs on what it keeps
        self.dim = Arch.output_size(model.encoder.config)
        self.received: list[Received] = []
        self.keep_received = keep_received
        self.activations = Observed()
        self.gradients = Observed()
        self.busy: dict[str, float] = {}  # seconds spent in handlers, by round phase
        self.calls = {"forward": 0, "backprop": 0}
        self.theta = ThetaStore()  # the last adapter sets received: a request may carry only what changed

    def handle(self, messages: list[Message]) -> list[Message]:
        for m in messages:
            if len(self.received) < self.keep_received:
                c = m.content
                self.received.append(Received(
                    m.metadata.message_type, int(m.metadata.src_node_id), m.metadata.group_id,
                    tuple(f"{r}/{k}" for r, rec in c.config_records.items() for k in rec),
                    tuple((f"{r}/{k}", a.dtype, tuple(a.shape)) for r, rec in c.array_records.items() for k, a in rec.items())))
        t0 = time.perf_counter()
        try:
            return super().handle(messages)
        finally:
            phase = parse_round(messages[0].metadata.group_id)[0] if messages else "control"
            self.busy[phase] = self.busy.get(phase, 0.0) + time.perf_counter() - t0

    def _forward(self, messages: list[Message], *, kind: str, train: bool) -> list[Message]:
        out = []
        for m in messages:
            tag = read_step(m)
            ids, lengths = read_inputs(m)
            adapter = self._adapter(m, tag.adapter)
            keep = (tag.epoch, tag.step, tag.adapter) if train else None  # the step's backprop reuses the graph
            out_h = self.model.forward(ids, lengths, adapter, types=read_types(m), keep=keep)
            h = out_h.cpu().numpy().astype(np.float32)
            self.calls["forward"] += 1
            if train:
                self.activations.add(h, epoch=tag.epoch, step=tag.step, adapter=tag.adapter, index=np.arange(len(h)))
            if train and self.curious is not None:
                self.curious.note(epoch=tag.epoch, step=tag.step, adapter=tag.adapter, ids=ids, lengths=lengths,
                                  tensors=adapter)
            out.append(respond(m, kind, **{Record.ACT: {"h": h}}))
        return out

    def _adapter(self, m: Message, index: int) -> dict[str, torch.Tensor]:
        """The whole adapter set a request stands for (what this server holds of it after the request):
        the one received, or the kept copy updated with the changed tensors received (theta_cache.py)."""
        return self.theta.resolve(m, adapter=index, received=read_record(m, Record.ADAPTER))

    @handles(Kind.TRAIN_FORWARD)
    def on_train_forward(self, messages: list[Message]) -> list[Message]:
        return self._forward(messages, kind=Kind.TRAIN_ACTS, train=True)

    @handles(Kind.EVAL_FORWARD)
    def on_eval_forward(self, messages: list[Message]) -> list[Message]:
        return self._forward(messages, kind=Kind.EVAL_ACTS, train=False)

    @handles(Kind.TRAIN_BACKPROP)
    def on_backprop(self, messages: list[Message]) -> list[Message]:
        out = []
        kept = self.model.kept_key()  # the pieces of the adapter set whose forward graph is kept go first
        for m in sorted(messages, key=lambda m: (read_step(m).epoch, read_step(m).step, read_step(m).adapter) != kept):
            tag = read_step(m)
            ids, lengths = read_inputs(m)
            adapter = self._adapter(m, tag.adapter)
            if self.curious is not None:
                self.curious.note(epoch=tag.epoch, step=tag.step, adapter=tag.adapter, ids=ids, lengths=lengths,
                                  tensors=adapter)
            pieces = torch.from_numpy(np.array(wire.get_array(m, Record.GRAD, "g")))
            stacked: dict[str, list[torch.Tensor]] = {}
            for g in pieces:
                nz = np.flatnonzero(g.abs().sum(1).numpy() > 0)
                self.gradients.add(g.numpy()[nz], epoch=tag.epoch, step=tag.step, adapter=tag.adapter, index=nz)
            for grads in self.model.backprop_many(ids, lengths, adapter, pieces,  # one forward for dense pieces
                                                  types=read_types(m), keep=(tag.epoch, tag.step, tag.adapter)):
                for name, t in grads.items():
                    stacked.setdefault(name, []).append(t)
                self.calls["backprop"] += 1
            stacked_np = {k: torch.stack(v).cpu().numpy().astype(np.float32) for k, v in stacked.items()}
            out.append(respond(m, Kind.TRAIN_GRADS, **{Record.GRADS: stacked_np}))
        return out

    @handles(Kind.QUERY_LOG)
    def on_log(self, messages: list[Message]) -> list[Message]:
        """Drain the observation log (driver control plane; the experimenter scores it)."""
        act, grad = self.activations.drain(self.dim), self.gradients.drain(self.dim)
        arrays = {"act_rows": act["rows"], "act_keys": act["keys"], "grad_rows": grad["rows"], "grad_keys": grad["keys"]}
        if self.curious is not None:  # the attacks it runs on what it kept (theta: g_h rows, cat: [h_1 … h_n])
            for source, got in self.curious.run(self.model).items():
                arrays.update({f"{source}_rows": got["rows"], f"{source}_keys": got["keys"]})
        stats = wire.metrics(busy_train_s=self.busy.get("train", 0.0), busy_eval_s=self.busy.get("eval", 0.0),
                             forward_calls=self.calls["forward"],
                             backprop_calls=self.calls["backprop"])
        named: dict[str, ArrayRecord | MetricRecord] = {Record.LOG: wire.arrays(**arrays), Record.STATS: stats}
        return [wire.reply(messages[-1], content=wire.records(**named))]

    def state(self) -> dict[str, Any]:
        """Stateless API: nothing about the client's training to resume (the adapter copies are re-sent whole
        after a load); the observation log not drained yet and what the curious keep holds, so a resume from
        a mid-epoch checkpoint scores the epoch's leakage on everything it saw."""
        return {"activations": self.activations.state(), "gradients": self.gradients.state(),
                "curious": self.curious.state() if self.curious is not None else {}}

    def load_state(self, state: dict[str, Any]) -> None:
        self.theta.forget()  # the client forgets what it sent too: the next request carries all of θ
        if state:
            self.activations.load(state.get("activations", {}))
            self.gradients.load(state.get("gradients", {}))
            if self.curious is not None:
                self.curious.load(state.get("curious", {}))
