"""P3EFT's private backprop over the U-shaped split (``ushape-p3eft``).

dLoss/d(body output) names the response tokens to a server that knows the tail
(``tests/engine/llm/test_ushape_privacy.py``). Backprop through the body is linear in that gradient
for fixed inputs and adapters, so the client splits it into ``m`` pieces with secret coefficients
(``parties/llm/p3eft/private_backprop.split_gradient``: m − 1 Gaussian pieces far above the
gradient's scale and one that closes the sum), sends piece j to model server j and recombines
dLoss/dθ_body = Σ α_j (∂body/∂θ)ᵀ ĝ^j and dLoss/d(head output) = Σ α_j (∂body/∂h)ᵀ ĝ^j. The body's
adapters are therefore the client's: it steps them with its own optimizer and sends each server the
tensors changed since that server last got them (``theta_cache``); a server keeps only that copy.
Every server runs the step's forward (its piece's backprop needs it); the first answers it.
The guarantee is P3EFT's and needs its assumption: any m − 1 servers together hold noise of the
gradient, but all m pooling their pieces recover its direction (the α_j only scale it;
``tests/unit/llm/test_p3eft_math.py``), so the servers must not all collude. What a server still
sees: the head's output (use ``params.eta``) and the body's adapters from step to step (the
θ-difference of P3EFT §3.3; ``params.theta_noise`` perturbs the copies sent in training).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.llm.common.wire import pack
from parties.llm.p3eft.private_backprop import recombine, split_gradient
from parties.llm.p3eft.theta_cache import THETA, ThetaSender, ThetaStore
from parties.llm.p3eft.wire import read_record, to_numpy
from parties.llm.ushape.client import UClient
from parties.llm.ushape.parts import Body
from parties.llm.ushape.server import (
    Pending,
    body_reply,
    forward_reply,
    take_pending,
    train_forward,
)
from parties.llm.ushape.wire import (
    CLIENT_ID,
    Kind,
    Record,
    read_step,
    send,
)
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


def body_adapters(body: Body) -> dict[str, torch.nn.Parameter]:
    """The body's LoRA parameters by name (the names its ``state_dict`` uses)."""
    return {n: p for n, p in body.named_parameters() if "lora_" in n}


class PieceServer(Node):
    """Model server of ``ushape-p3eft``: the frozen body run with the client's adapters; per piece of
    dLoss/d(body output) it returns the piece's head gradient and adapter gradient. Never steps."""

    def __init__(self, spec: NodeSpec, *, body: Body, answers_forward: bool, device: str = "cpu") -> None:
        super().__init__(spec)
        self.body, self.device, self.answers_forward = body.to(device).eval(), device, answers_forward
        self.adapters = body_adapters(self.body)
        self.theta = ThetaStore()
        self._pending: Pending | None = None

    @handles(Kind.INIT)
    def on_init(self, messages: list[Message]) -> list[Message]:
        return []  # no optimizer here: the client steps the body's adapters

    def _apply(self, m: Message) -> None:
        """Load the adapters this request stands for (the kept copy updated with what it carries)."""
        theta = self.theta.resolve(m, adapter=0, received=read_record(m, Record.ADAPTER))
        if set(theta) != set(self.adapters):
            raise ProtocolError(f"{m.metadata.message_type}: the body's adapters are {len(self.adapters)} tensors, "
                                f"the client's {len(theta)} do not match them")
        with torch.no_grad():
            for name, p in self.adapters.items():
                p.copy_(theta[name].reshape(p.shape))

    def _forward(self, m: Message, kind: str, phase: str) -> list[Message]:
        self._apply(m)
        return [forward_reply(self.body, m, kind=kind, phase=phase, src=self.node_id, device=self.device)]

    @handles(Kind.TRAIN_HEAD)
    def on_train_head(self, messages: list[Message]) -> list[Message]:
        self._apply(messages[-1])
        self._pending = train_forward(self.body, messages[-1], self.device)
        return [body_reply(self.node_id, messages[-1], self._pending)] if self.answers_forward else []

    @handles(Kind.TRAIN_BODY_GRAD)
    def on_piece(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        epoch, step, h, out, lengths, piece = take_pending(self._pending, m, self.device)
        self._pending = None
        n = torch.as_tensor(lengths, device=self.device)
        params = list(self.adapters.values())
        grads = torch.autograd.grad(out, [h, *params], grad_outputs=piece, allow_unused=True)
        g_h = grads[0] if grads[0] is not None else torch.zeros_like(h)
        g_theta = {name: g if g is not None else torch.zeros_like(p)
                   for (name, p), g in zip(self.adapters.items(), grads[1:], strict=True)}
        return [send(Kind.TRAIN_HEAD_GRAD, src=self.node_id, dst=CLIENT_ID, to=m, phase="train", epoch=epoch,
                     step=step, records={Record.GRAD: {"g": pack(g_h, n).cpu().numpy().astype(np.float32, copy=False)},
                                         Record.ADAPTER_GRAD: to_numpy(g_theta)})]

    @handles(Kind.EVAL_HEAD)
    def on_eval_head(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self._forward(m, Kind.EVAL_BODY, "eval")]

    @handles(Kind.GEN_HEAD)
    def on_gen_head(self, messages: list[Message]) -> list[Message]:
        return [r for m in messages for r in self._forward(m, Kind.GEN_BODY, "eval")]

    def state(self) -> dict[str, Any]:
        return {}  # the adapters are the client's; a restored server gets them whole with the next request

    def load_state(self, state: dict[str, Any]) -> None:
        self.theta.forget()


class PiecesClient(UClient):
    """Client of ``ushape-p3eft``: a ``UClient`` that also owns the body's adapters and splits
    dLoss/d(body output) into one piece per model server."""

    def __init__(self, spec: NodeSpec, *, body_lora: dict[str, torch.nn.Parameter], servers: list[int],
                 grad_noise: float, theta_noise: float = 0.0, **kw: Any) -> None:
        if len(servers) < 2:
            raise ProtocolError(f"private backprop needs at least two model servers, got {servers}")
        self.body_lora, self.servers, self.grad_noise = body_lora, list(servers), grad_noise
        self.theta_noise = theta_noise
        self.theta = ThetaSender()
        self.g_rms: float | None = None  # running rms of past steps' gradients: the pieces' noise scale
        self._pieces: dict[int, tuple[torch.Tensor, dict[str, torch.Tensor]]] = {}
        self._alphas: torch.Tensor | None = None
        super().__init__(spec, **kw)

    def _own_body_params(self) -> list[torch.nn.Parameter]:
        return list(self.body_lora.values())

    def _to_server(self, kind: str, to: Message, *, phase: str, epoch: int, step: int,
                   arrs: dict[str, dict[str, np.ndarray]]) -> list[Message]:
        """Training: the release and the adapters to every server; evaluation and generation: to the first.
        With ``theta_noise`` σ the training adapters sent are θ + z, z ~ N(0, σ²) fresh per step from this
        node's noise, the same for every server of the step (the gradient is the one at θ + z, applied to
        the clean θ the client keeps), so two steps' copies differ by the update + z' − z."""
        now = to_numpy(self.body_lora)
        if self.theta_noise > 0 and kind == Kind.TRAIN_HEAD:
            z = self.node_noise.round("p3eft-theta", phase=phase, epoch=epoch, step=step)
            now = {k: v + self.theta_noise * z.normal(v.shape).numpy() for k, v in sorted(now.items())}
        out = []
        for dst in self.servers if kind == Kind.TRAIN_HEAD else self.servers[:1]:
            delta, versions = self.theta.outgoing(server=dst, adapter=0, tensors=now)
            records = {**arrs, **({Record.ADAPTER: delta} if delta else {})}
            out.append(send(kind, src=self.node_id, dst=dst, to=to, phase=phase, epoch=epoch, step=step,
                            records=records, configs={THETA: versions}))
        return out

    def _send_body_grad(self, m: Message, grad: torch.Tensor, epoch: int, step: int) -> list[Message]:
        rms = float(grad.detach().pow(2).mean().sqrt())
        ref = self.g_rms if self.g_rms else (rms or 1.0)  # past steps' scale: no tie to this batch's labels
        self.g_rms = rms if self.g_rms is None else 0.9 * self.g_rms + 0.1 * rms
        noise = self.node_noise.round("p3eft-split", phase="train", epoch=epoch, step=step)
        pieces, self._alphas = split_gradient(grad, m=len(self.servers), std=self.grad_noise * ref, noise=noise)
        self._pieces = {}
        return [send(Kind.TRAIN_BODY_GRAD, src=self.node_id, dst=dst, to=m, phase="train", epoch=epoch, step=step,
                     records={Record.GRAD: {"g": piece.cpu().numpy().astype(np.float32, copy=False)}})
                for dst, piece in zip(self.servers, pieces, strict=True)]

    @handles(Kind.TRAIN_HEAD_GRAD)
    def on_head_grad(self, messages: list[Message]) -> list[Message]:
        pend = self._expect(messages[-1])
        for m in messages:
            src = int(m.metadata.src_node_id)
            if src not in self.servers or src in self._pieces or read_step(m) != pend["at"]:
                raise ProtocolError(f"client: unexpected gradient piece from node {src} for {read_step(m)}")
            self._pieces[src] = (torch.as_tensor(np.array(wire.get_array(m, Record.GRAD, "g"))),
                                 read_record(m, Record.ADAPTER_GRAD))
        if len(self._pieces) < len(self.servers) or self._alphas is None:
            return []
        sets = [{"h": self._pieces[s][0], **self._pieces[s][1]} for s in self.servers]
        total = recombine(sets, self._alphas)
        self._pieces, self._alphas = {}, None
        for name, p in self.body_lora.items():
            p.grad = total[name].reshape(p.shape).to(p.dtype)
        flat = pend["flat"]
        if flat.requires_grad:
            flat.backward(total["h"].reshape(flat.shape).to(flat.dtype))
        if self.optimizer is not None:
            self.optimizer.step()
        self._pending = None
        return []

    def lora_state(self) -> dict[str, torch.Tensor]:
        return {**super().lora_state(), **{f"body.{k}": v.detach().cpu().clone() for k, v in self.body_lora.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        if state:
            with torch.no_grad():
                for k, p in self.body_lora.items():
                    p.copy_(state["lora"][f"body.{k}"])
        self.theta.forget()  # the servers may be fresh nodes: the next request sends the adapters whole
        self.g_rms = state.get("g_rms", self.g_rms) if state else self.g_rms

    def state(self) -> dict[str, Any]:
        return {**super().state(), "g_rms": self.g_rms}
