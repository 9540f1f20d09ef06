"""Model-server node of the U-shaped split: runs the body (frozen blocks + LoRA) and trains its adapters.

It receives the head's hidden states and the gradient of the client's loss with respect to its own
output; it never receives token ids, logits or labels (``wire.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.wire import pack, unpack
from parties.llm.ushape.parts import Body
from parties.llm.ushape.wire import (
    CLIENT_ID,
    Kind,
    Record,
    hidden_record,
    read_step,
    received_hidden,
    send,
)
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


class BodyServer(Node):
    """Server node: body forward, backward from the client's gradient, LoRA step."""

    def __init__(self, spec: NodeSpec, *, body: Body, make_optimizer: OptimizerFactory,
                 schedule_lr: Callable[[torch.optim.Optimizer, int], torch.optim.Optimizer], device: str = "cpu") -> None:
        super().__init__(spec)
        self.body, self.device = body.to(device).eval(), device  # eval mode throughout: no dropout (parts.py)
        self.params = [p for n, p in body.named_parameters() if "lora_" in n]
        self.make_optimizer, self.schedule_lr = make_optimizer, schedule_lr
        self.optimizer: torch.optim.Optimizer | None = None  # built at INIT, when the run's step count is known
        self._opt_state: dict[str, Any] | None = None  # a checkpoint's optimizer state loaded before INIT
        self._pending: Pending | None = None

    @handles(Kind.INIT)
    def on_init(self, messages: list[Message]) -> list[Message]:
        """The driver's run length (optimizer steps, for the lr schedule): the server never sees the data."""
        total = wire.config_int(messages[-1].content.config_records[Record.TASK], "total_steps")
        if self.params and self.optimizer is None:  # a set-up after a resume or restart keeps the loaded state
            self.optimizer = self.schedule_lr(self.make_optimizer(self.params), total)
        if self.optimizer is not None and self._opt_state:
            self.optimizer.load_state_dict(self._opt_state)
        self._opt_state = None
        return []

    def _forward(self, m: Message, kind: str, phase: str) -> list[Message]:
        return [forward_reply(self.body, m, kind=kind, phase=phase, src=self.node_id, device=self.device)]

    @handles(Kind.TRAIN_HEAD)
    def on_train_head(self, messages: list[Message]) -> list[Message]:
        self._pending = train_forward(self.body, messages[-1], self.device)
        return [body_reply(self.node_id, messages[-1], self._pending)]

    @handles(Kind.TRAIN_BODY_GRAD)
    def on_body_grad(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        epoch, step, h, out, lengths, g = take_pending(self._pending, m, self.device)
        self._pending = None
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        out.backward(g)
        if self.optimizer is not None:
            self.optimizer.step()
        gh = h.grad if h.grad is not None else torch.zeros_like(h)
        flat = pack(gh, torch.as_tensor(lengths, device=self.device))
        return [send(Kind.TRAIN_HEAD_GRAD, src=self.node_id, dst=CLIENT_ID, to=m, phase="train", epoch=epoch,
                     step=step, records={Record.GRAD: {"g": flat.cpu().numpy().astype(np.float32, copy=False)}})]

    @handles(Kind.EVAL_HEAD)
    def on_eval_head(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self._forward(m, Kind.EVAL_BODY, "eval")]

    @handles(Kind.GEN_HEAD)
    def on_gen_head(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self._forward(m, Kind.GEN_BODY, "eval")]

    def lora_state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu().clone() for k, v in self.body.state_dict().items() if "lora_" in k}

    def state(self) -> dict[str, Any]:
        opt = {} if self.optimizer is None else self.optimizer.state_dict()
        return {"lora": self.lora_state(), "optimizer": opt}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        self.body.load_state_dict(state["lora"], strict=False)
        if self.optimizer is not None and state.get("optimizer"):
            self.optimizer.load_state_dict(state["optimizer"])
        else:
            self._opt_state = state.get("optimizer") or None


Pending = tuple[int, int, torch.Tensor, torch.Tensor, np.ndarray]  # epoch, step, h (with grad), body output, lengths


def train_forward(body: Body, m: Message, device: str) -> Pending:
    """The body's forward of a training release, the graph kept for the backward of the step."""
    epoch, step = read_step(m)
    h, mask, lengths = received_hidden(m, device)
    h.requires_grad_(True)
    return epoch, step, h, body(h, mask), lengths


def body_reply(src: int, m: Message, pending: Pending) -> Message:
    """``train.body_out``: the body's output of the pending step, packed."""
    epoch, step, _, out, lengths = pending
    return send(Kind.TRAIN_BODY, src=src, dst=CLIENT_ID, to=m, phase="train", epoch=epoch, step=step,
                records=hidden_record(out, lengths))


def take_pending(pending: Pending | None, m: Message, device: str
                 ) -> tuple[int, int, torch.Tensor, torch.Tensor, np.ndarray, torch.Tensor]:
    """The pending step a gradient (or a piece) ``m`` answers, with that gradient unpacked to (B, L, d)."""
    epoch, step = read_step(m)
    if pending is None or pending[:2] != (epoch, step):
        raise ProtocolError(f"model server: body gradient for {epoch}:{step} without its forward")
    _, _, h, out, lengths = pending
    g, _ = unpack(torch.as_tensor(np.array(wire.get_array(m, Record.GRAD, "g")), device=device),
                  torch.as_tensor(lengths, device=device))
    return epoch, step, h, out, lengths, g


def forward_reply(body: Body, m: Message, *, kind: str, phase: str, src: int, device: str) -> Message:
    """The body's output (no graph) for an evaluation or generation release ``m``, as the reply ``kind``."""
    epoch, step = read_step(m)
    h, mask, lengths = received_hidden(m, device)
    with torch.no_grad():
        out = body(h, mask)
    return send(kind, src=src, dst=CLIENT_ID, to=m, phase=phase, epoch=epoch, step=step,
                records=hidden_record(out, lengths))
