"""Data-holder node of the U-shaped split: instruction rows, head, tail, LM head, loss, generation.

Per training step it runs the head on a batch, sends the hidden states (ηdχ-privatized with
``eta``: SAP's release), runs the tail and the loss on the body's answer, sends dLoss/d(body output)
back and, with dLoss/d(head output), steps its own adapters. The labels (response tokens), the token
ids and the logits never leave it. It also measures the held-out perplexity and decodes the sample
prompts greedily through the split (``generate.Greedy``) for ROUGE-L against the references.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.metrics import rouge_l
from parties.llm.common.wire import pack
from parties.llm.ushape.generate import Greedy, last_logits
from parties.llm.ushape.instruct import Rows, response_nll
from parties.llm.ushape.parts import Head, Tail, real_mask
from parties.llm.ushape.wire import SERVER_ID, Kind, Record, read_step, received_hidden, send
from vfl.core.errors import ProtocolError
from vfl.core.rng import NodeNoise
from vfl.data.sampling import Schedule
from vfl.privacy.mechanisms.dchi import privatize
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


@dataclass(frozen=True)
class Samples:
    """The test prompts decoded after each evaluation: token ids, their texts and the reference answers."""

    prompt_ids: list[list[int]]
    prompts: list[str]
    references: list[str]
    max_new: int
    positions: int | None = None  # the model's position table: no row grows past it


@dataclass
class _Decode:
    greedy: Greedy
    epoch: int
    step: int = 0


class UClient(Node):
    """Client node (data holder and label owner) of ``ushape-lora``."""

    def __init__(self, spec: NodeSpec, *, rows: tuple[Rows, Rows], head: Head, tail: Tail, tokenizer: Any,
                 schedule: Schedule, make_optimizer: OptimizerFactory, samples: Samples, eta: float | None = None,
                 noise_rng: str = "crypto", seed: int = 0, device: str = "cpu") -> None:
        super().__init__(spec)
        self.train_rows, self.test_rows = rows
        self.head, self.tail = head.to(device).eval(), tail.to(device).eval()  # eval mode throughout: no dropout
        self.head_trains = flat_grad(head)  # (parts.py: deterministic steps, exact resume)
        self.tokenizer, self.schedule, self.samples, self.eta, self.device = tokenizer, schedule, samples, eta, device
        self.node_noise = NodeNoise(noise_rng, seed=seed, node=spec.node_id)  # built here, never sent
        self.params = [p for part in (head, tail) for n, p in part.named_parameters() if "lora_" in n]
        self.params += self._own_body_params()
        self.optimizer = make_optimizer(self.params) if self.params else None
        self._pending: dict[str, Any] | None = None
        self._decode: _Decode | None = None
        self.generations: list[str] = []
        self.stats = {"train": [0.0, 0], "eval": [0.0, 0]}  # summed nll, response tokens
        self.step_losses: list[float] = []  # each training step's loss since the last metrics query (the loss plot)
        self.rouge: list[float] = []

    def _own_body_params(self) -> list[torch.nn.Parameter]:
        """Body adapters this client trains itself (none: the model server steps its own)."""
        return []

    def _to_server(self, kind: str, to: Message, *, phase: str, epoch: int, step: int,
                   arrs: dict[str, dict[str, np.ndarray]]) -> list[Message]:
        """The head's release of one step on its way to the model server."""
        return [send(kind, src=self.node_id, dst=SERVER_ID, to=to, phase=phase, epoch=epoch, step=step, records=arrs)]

    # ---- the head's release ------------------------------------------------------------------
    def _release(self, ids: np.ndarray, lengths: np.ndarray, *, phase: str, epoch: int, step: int, grad: bool
                 ) -> tuple[torch.Tensor, dict[str, dict[str, np.ndarray]]]:
        """Head outputs of the real tokens, packed (T, d), privatized with ``eta``; keeps the graph when training."""
        width = int(lengths.max())
        x, n = torch.as_tensor(ids[:, :width], device=self.device), torch.as_tensor(lengths, device=self.device)
        with torch.set_grad_enabled(grad):
            flat = pack(self.head(x, real_mask(n, width)), n)
            if self.eta is not None:
                noise = self.node_noise.round("dchi", phase=phase, epoch=epoch, step=step)
                flat, _ = privatize(flat, eta=self.eta, noise=noise)
        arrs = {Record.HIDDEN: {"h": flat.detach().cpu().numpy().astype(np.float32, copy=False),
                                "lengths": lengths.astype(np.int32)}}
        return flat, arrs

    def _tail(self, m: Message) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h, mask, lengths = received_hidden(m, self.device)
        return h, self.tail(h, mask), torch.as_tensor(lengths, device=self.device)

    # ---- training -----------------------------------------------------------------------------
    @handles(Kind.TRAIN_STEP)
    def on_train_step(self, messages: list[Message]) -> list[Message]:
        epoch, step = read_step(messages[-1])
        sel = self.schedule.train_ids(epoch, step)
        rows = self.train_rows
        flat, arrs = self._release(rows.ids[sel], rows.lengths[sel], phase="train", epoch=epoch, step=step,
                                   grad=self.head_trains)
        self._pending = {"at": (epoch, step), "flat": flat, "labels": rows.labels[sel], "lengths": rows.lengths[sel]}
        return self._to_server(Kind.TRAIN_HEAD, messages[-1], phase="train", epoch=epoch, step=step, arrs=arrs)

    def _expect(self, m: Message) -> dict[str, Any]:
        at = read_step(m)
        if self._pending is None or self._pending["at"] != at:
            raise ProtocolError(f"client: {m.metadata.message_type} for {at[0]}:{at[1]} without its step")
        return self._pending

    @handles(Kind.TRAIN_BODY)
    def on_train_body(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        pend = self._expect(m)
        h, mask, lengths = received_hidden(m, self.device)
        h.requires_grad_(True)
        logits = self.tail(h, mask)
        labels = torch.as_tensor(pend["labels"][:, : logits.shape[1]], device=self.device)
        nll, count = response_nll(logits, labels)
        if self.optimizer is not None:
            self.optimizer.zero_grad(set_to_none=True)
        (nll / max(count, 1)).backward()
        self.stats["train"][0] += float(nll.detach())
        self.stats["train"][1] += count
        self.step_losses.append(float(nll.detach()) / max(count, 1))
        grad = pack(h.grad if h.grad is not None else torch.zeros_like(h), torch.as_tensor(lengths, device=self.device))
        return self._send_body_grad(m, grad, *pend["at"])

    def _send_body_grad(self, m: Message, grad: torch.Tensor, epoch: int, step: int) -> list[Message]:
        """dLoss/d(body output), packed (T, d), to the model server."""
        return [send(Kind.TRAIN_BODY_GRAD, src=self.node_id, dst=SERVER_ID, to=m, phase="train", epoch=epoch,
                     step=step, records={Record.GRAD: {"g": grad.cpu().numpy().astype(np.float32, copy=False)}})]

    @handles(Kind.TRAIN_HEAD_GRAD)
    def on_head_grad(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        pend = self._expect(m)
        flat = pend["flat"]
        if flat.requires_grad:
            g = torch.as_tensor(np.array(wire.get_array(m, Record.GRAD, "g")), device=self.device).reshape(flat.shape)
            flat.backward(g)
        if self.optimizer is not None:
            self.optimizer.step()
        self._pending = None
        return []

    # ---- perplexity on the held-out rows ------------------------------------------------------
    @handles(Kind.EVAL_STEP)
    def on_eval_step(self, messages: list[Message]) -> list[Message]:
        epoch, step = read_step(messages[-1])
        sel = self.schedule.test_ids(step)
        rows = self.test_rows
        _, arrs = self._release(rows.ids[sel], rows.lengths[sel], phase="eval", epoch=epoch, step=step, grad=False)
        return self._to_server(Kind.EVAL_HEAD, messages[-1], phase="eval", epoch=epoch, step=step, arrs=arrs)

    @handles(Kind.EVAL_BODY)
    def on_eval_body(self, messages: list[Message]) -> list[Message]:
        for m in messages:
            _, step = read_step(m)
            sel = self.schedule.test_ids(step)
            with torch.no_grad():
                _, logits, _ = self._tail(m)
                labels = torch.as_tensor(self.test_rows.labels[sel][:, : logits.shape[1]], device=self.device)
                nll, count = response_nll(logits, labels)
            self.stats["eval"][0] += float(nll)
            self.stats["eval"][1] += count
        return []

    # ---- greedy generation through the split --------------------------------------------------
    def _gen_request(self, to: Message) -> list[Message]:
        d = self._decode
        assert d is not None
        ids, lengths = d.greedy.batch()
        _, arrs = self._release(ids, lengths, phase="gen", epoch=d.epoch, step=d.step, grad=False)
        return self._to_server(Kind.GEN_HEAD, to, phase="eval", epoch=d.epoch, step=d.step, arrs=arrs)

    @handles(Kind.GENERATE)
    def on_generate(self, messages: list[Message]) -> list[Message]:
        epoch, _ = read_step(messages[-1])
        if not self.samples.prompt_ids:
            return []
        tok = self.tokenizer
        self._decode = _Decode(Greedy(self.samples.prompt_ids, eos=tok.eos_token_id, pad=tok.pad_token_id,
                                      max_new=self.samples.max_new, positions=self.samples.positions), epoch)
        return self._gen_request(messages[-1])

    @handles(Kind.GEN_BODY)
    def on_gen_body(self, messages: list[Message]) -> list[Message]:
        m, d = messages[-1], self._decode
        if d is None or read_step(m) != (d.epoch, d.step):
            raise ProtocolError(f"client: generation step {read_step(m)} not asked for")
        with torch.no_grad():
            _, logits, lengths = self._tail(m)
            d.greedy.advance(last_logits(logits, lengths).cpu().numpy())
        d.step += 1
        if not d.greedy.finished:
            return self._gen_request(m)
        self.generations = [self.tokenizer.decode(t, skip_special_tokens=True).strip() for t in d.greedy.outputs()]
        self.rouge = [rouge_l(reference=r, candidate=c) for r, c in zip(self.samples.references, self.generations,
                                                                         strict=True)]
        self._decode = None
        return []

    # ---- the driver's questions ---------------------------------------------------------------
    @handles(Kind.QUERY_METRICS)
    def on_metrics(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        phase = str(wire.config_value(m, Record.WHICH, "phase"))
        nll, count = self.stats[phase]
        loss = nll / count if count else math.nan
        out = {"loss": loss, "ppl": math.exp(min(loss, 700.0)) if count else math.nan, "tokens": float(count)}
        if phase == "eval" and self.rouge:
            out["rouge_l"] = float(np.mean(self.rouge))
        self.stats[phase] = [0.0, 0]
        records: dict[str, Any] = {Record.METRICS: wire.metrics(**out)}
        if phase == "train":
            records[Record.STEP_LOSS] = wire.arrays(loss=np.asarray(self.step_losses, dtype=np.float64))
            self.step_losses = []
        return [wire.reply(m, content=wire.records(**records))]

    @handles(Kind.QUERY_SAMPLES)
    def on_samples(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        rec = wire.config(prompts=list(self.samples.prompts), references=list(self.samples.references),
                          generations=list(self.generations))
        return [wire.make(Kind.QUERY_SAMPLES, src=self.node_id, dst=m.metadata.src_node_id, round=wire.round_of(m),
                          content=wire.records(**{Record.SAMPLES: rec}), reply_to=m.metadata.message_id)]

    # ---- checkpoints ---------------------------------------------------------------------------
    def lora_state(self) -> dict[str, torch.Tensor]:
        return {f"{name}.{k}": v.detach().cpu().clone() for name, part in (("head", self.head), ("tail", self.tail))
                for k, v in part.state_dict().items() if "lora_" in k}

    def state(self) -> dict[str, Any]:
        return {"lora": self.lora_state(), "optimizer": {} if self.optimizer is None else self.optimizer.state_dict(),
                "epoch": {"stats": {ph: list(v) for ph, v in self.stats.items()},  # the epoch in progress's sums
                          "step_losses": list(self.step_losses)}}

    def load_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        load_parts(head=self.head, tail=self.tail, lora=state["lora"])
        if self.optimizer is not None and state.get("optimizer"):
            self.optimizer.load_state_dict(state["optimizer"])
        if "epoch" in state:
            self.stats = {ph: [float(v[0]), int(v[1])] for ph, v in state["epoch"]["stats"].items()}
            self.step_losses = [float(v) for v in state["epoch"]["step_losses"]]


def flat_grad(head: Head) -> bool:
    """Does the head have trainable weights (then its output keeps the graph for the head gradient)?"""
    return any(p.requires_grad for p in head.parameters())


def load_parts(*, head: Head, tail: Tail, lora: dict[str, torch.Tensor]) -> None:
    """Load a client checkpoint's adapters (``head.*``, ``tail.*``) into the two parts."""
    for name, part in (("head", head), ("tail", tail)):
        part.load_state_dict({k[len(name) + 1:]: v for k, v in lora.items() if k.startswith(name + ".")}, strict=False)


