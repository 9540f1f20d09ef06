"""Split fine-tuning client (party): texts, labels, tokenizer, head, adapter sets and optimizer.

One training step is a multi-hop conversation the driver starts with ``train.step``:
  1. client -> servers  ``train.forward``   per adapter set i (to server i mod S): x, θ_i
  2. servers -> client  ``train.activations`` h_i = h(x, θ_i)
  3. the client mixes h' = Σ W_i ⊙ h_i, computes the head loss (+ regularizers), g_{h_i} = ∂L/∂h_i,
     splits each g_{h_i} into pieces (private_backprop) and sends piece j to server (i + j) mod S
     as ``train.backprop`` (x, θ_i, ĝ); 4. servers answer ``train.grads``; 5. the client
     recombines g_θi = Σ α_j ĝθ_j and steps its optimizer (adapters and head). Nothing is sent back.
``Recipe`` selects the algorithm: head only (no adapters: frozen features fetched once and
cached), one adapter (regular split LoRA, + distance correlation, + randomized-response labels)
or P3EFT (n adapters, mixing weights, m pieces, adversarial regularizer).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from flwr.common import Message
from torch import nn

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.metrics import confusion, glue_scores
from parties.llm.common.tokens import encode
from parties.llm.p3eft.adapters import init_adapters
from parties.llm.p3eft.private_backprop import mix, mixing_weights, recombine, split_gradient
from parties.llm.p3eft.regularizers import adversarial_penalty, dcor_loss
from parties.llm.p3eft.theta_cache import THETA, ThetaSender
from parties.llm.p3eft.wire import (
    Kind,
    Record,
    StepTag,
    inputs,
    read_record,
    read_step,
    request,
    to_numpy,
)
from vfl.core.errors import ProtocolError
from vfl.core.rng import NodeNoise, NoiseSource, derive_seed, seeded_torch
from vfl.data.sampling import Schedule
from vfl.privacy.mechanisms.label_dp import randomized_response
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


@dataclass(frozen=True)
class Recipe:
    """What the client runs: adapters (0 = head only), pieces m (1 = plain backprop, 0 = one per
    example, >= 2 = obfuscated), mixing scale s (None = equal weights), regularizer, label noise."""

    adapters: int = 1
    m: int = 1
    grad_noise: float = 30.0
    xi_scale: float | None = None
    reg: str = "none"  # none | adversarial | dcor
    reg_weight: float = 0.0
    probe_l2: float = 0.1
    probe_steps: int = 20
    label_epsilon: float | None = None  # PSLF randomized response
    rotate: bool = False  # alternate two server groups step by step: no server sees two consecutive θ
    theta_noise: float = 0.0  # std of fresh Gaussian noise on every adapter tensor sent in training


@dataclass
class Pending:
    """One step in flight: which samples, activations received, pieces expected back."""

    phase: str
    epoch: int
    step: int
    ids: np.ndarray
    acts: dict[int, np.ndarray] = field(default_factory=dict)
    alphas: dict[int, torch.Tensor] = field(default_factory=dict)
    routes: dict[int, tuple[int, list[int]]] = field(default_factory=dict)  # tag -> (adapter, piece ids)
    pieces: dict[int, dict[int, dict[str, torch.Tensor]]] = field(default_factory=dict)
    sent: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)  # adapter set -> tensors as sent


def tokenize(tokenizer: Any, texts: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    enc = encode(tokenizer, texts, max_len)
    return enc.ids.astype(np.int32), enc.lengths.astype(np.int32)


def make_head(dim: int, num_classes: int, hidden: int) -> nn.Module:
    """The client's head f(h, ψ): linear, or one hidden ReLU layer."""
    if hidden <= 0:
        return nn.Linear(dim, num_classes)
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


class LlmClient(Node):
    """Party node of split fine-tuning over a model-server API (labels and head stay here)."""

    def __init__(self, spec: NodeSpec, *, texts: tuple[np.ndarray, np.ndarray], labels: tuple[np.ndarray, np.ndarray],
                 num_classes: int, tokenizer: Any, max_len: int, shapes: Mapping[str, tuple[int, ...]], dim: int,
                 recipe: Recipe, schedule: Schedule, server_ids: list[int], make_optimizer: OptimizerFactory,
                 head_hidden: int = 0, seed: int = 0, noise_rng: str = "crypto",
                 pairs: tuple[np.ndarray | None, np.ndarray | None] = (None, None), token_types: bool = False,
                 resend_adapters: bool = False) -> None:
        super().__init__(spec)
        self.recipe, self.schedule, self.servers = recipe, schedule, list(server_ids)
        self.all_servers = list(server_ids)  # self.servers: those of the current step (rotate: one group)
        self.num_classes, self.seed = num_classes, seed
        self.node_noise = NodeNoise(noise_rng, seed=seed, node=spec.node_id)  # built here, never sent
        enc = {ph: encode(tokenizer, x, max_len, pairs=pr, types=token_types and pr is not None)
               for ph, x, pr in (("train", texts[0], pairs[0]), ("eval", texts[1], pairs[1]))}
        self.tokens = {ph: (e.ids.astype(np.int32), e.lengths.astype(np.int32)) for ph, e in enc.items()}
        self.types = {ph: e.types for ph, e in enc.items()}  # token types of sentence pairs (or None)
        y_train, self.y_test = (np.asarray(y, dtype=np.int64) for y in labels)
        self.y_true = y_train
        self.y_used = y_train
        if recipe.label_epsilon is not None:  # PSLF: train on randomized-response labels, drawn once
            self.y_used = randomized_response(y_train, num_classes=num_classes, epsilon=recipe.label_epsilon,
                                              noise=self._noise("pslf-rr", "init"))
        gen = seeded_torch("llm-client-init", seed)  # adapter init: reproducible, not private
        self.adapters = [{k: nn.Parameter(v) for k, v in init_adapters(shapes, generator=gen).items()}
                         for _ in range(recipe.adapters)]
        n = max(1, recipe.adapters)
        self.w = (mixing_weights(n=n, dim=dim, scale=recipe.xi_scale, noise=self._noise("p3eft-mixing", "init"))
                  if recipe.xi_scale is not None else torch.full((n, dim), 1.0 / n, dtype=torch.float64))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed("llm-client-head", seed) >> 1)
            self.head = make_head(dim, num_classes, head_hidden)
        params = list(self.head.parameters()) + [p for a in self.adapters for p in a.values()]
        self.optimizer = make_optimizer(params)
        self.cache = {ph: np.full((len(self.tokens[ph][1]), dim), np.nan, np.float32) for ph in ("train", "eval")}
        self.pending: Pending | None = None
        self.theta = None if resend_adapters else ThetaSender()  # None: every request carries all of θ_i
        self.g_rms: dict[int, float] = {}  # per adapter set: running rms of g_h (noise scale of the pieces)
        self.stats = {"train": [0.0, 0, 0], "eval": [0.0, 0, 0]}  # loss sum, correct, count
        self.step_losses: list[float] = []  # each training step's loss since the last metrics query (the loss plot)
        self.confusion = {ph: np.zeros((num_classes, num_classes), np.int64) for ph in ("train", "eval")}

    # ---- helpers ------------------------------------------------------------------------------
    def _noise(self, purpose: str, phase: str, epoch: int = 0, step: int = 0) -> NoiseSource:
        """Privacy noise (mixing weights, gradient pieces, label coins) from this node's own source."""
        return self.node_noise.round(purpose, phase=phase, epoch=epoch, step=step)

    def step_servers(self, phase: str, epoch: int, step: int) -> list[int]:
        """The servers of this step. ``rotate``: training step k (counted over the run) goes to group k mod 2
        (servers 0, 2, 4, … or 1, 3, 5, …), so no server holds the adapters of two consecutive steps;
        evaluation after epoch e goes to the group of the next training step, which sees the same θ."""
        if not self.recipe.rotate:
            return self.all_servers
        k = epoch * self.schedule.steps + step if phase == "train" else (epoch + 1) * self.schedule.steps
        return self.all_servers[k % 2::2]

    def _batch(self, phase: str, epoch: int, step: int) -> np.ndarray:
        return self.schedule.train_ids(epoch, step) if phase == "train" else self.schedule.test_ids(step)

    def _x(self, phase: str, ids: np.ndarray) -> dict[str, np.ndarray]:
        toks, lens = self.tokens[phase]
        types = self.types[phase]
        return inputs(toks[ids], lens[ids], None if types is None else types[ids])

    def _labels(self, phase: str, ids: np.ndarray) -> torch.Tensor:
        return torch.from_numpy((self.y_used if phase == "train" else self.y_test)[ids])

    def _score(self, phase: str, logits: torch.Tensor, ids: np.ndarray, loss: float) -> None:
        truth = self.y_true if phase == "train" else self.y_test
        s = self.stats[phase]
        if phase == "train":
            self.step_losses.append(loss)
        s[0] += loss * len(ids)
        s[1] += int((logits.argmax(1).numpy() == truth[ids]).sum())
        s[2] += len(ids)
        self.confusion[phase] += confusion(truth=truth[ids], pred=logits.argmax(1).numpy(),
                                           num_classes=self.num_classes)

    def _sent(self, p: Pending, i: int) -> dict[str, np.ndarray]:
        """Adapter set ``i`` as sent this step. With ``theta_noise`` σ > 0 in training: θ + z, z ~ N(0, σ²)
        fresh per step and set from this node's noise source, the same z for the step's forward and
        backprop (the gradient is the one at θ + z, applied to the clean θ the client keeps), so two
        steps' tensors differ by −lr·g_θ + z' − z and the θ-difference attack reads mostly noise."""
        if i not in p.sent:
            sent = to_numpy(self.adapters[i])
            sigma = self.recipe.theta_noise
            if sigma > 0 and p.phase == "train":
                noise = self._noise(f"p3eft-theta-{i}", "train", p.epoch, p.step)
                sent = {k: v + sigma * noise.normal(v.shape).numpy() for k, v in sorted(sent.items())}
            p.sent[i] = sent
        return p.sent[i]

    def _adapter_to(self, p: Pending, i: int, dst: int, arrays: dict[str, Any]) -> dict[str, Any]:
        """Put adapter set ``i`` as sent this step into ``arrays`` for server ``dst``: whole, or (unless
        resend_adapters) only the tensors changed since ``dst`` last received set ``i``; returns the
        ``theta`` config record that lets ``dst`` check it holds the rest (theta_cache.py)."""
        if self.theta is None:
            arrays[Record.ADAPTER] = self._sent(p, i)
            return {}
        delta, versions = self.theta.outgoing(server=dst, adapter=i, tensors=self._sent(p, i))
        if delta:
            arrays[Record.ADAPTER] = delta
        return {THETA: versions}

    # ---- step start (driver control) ---------------------------------------------------------
    def _start(self, m: Message, phase: str) -> list[Message]:
        t = read_step(m)
        ids = self._batch(phase, t.epoch, t.step)
        self.servers = self.step_servers(phase, t.epoch, t.step)
        self.pending = Pending(phase, t.epoch, t.step, ids)
        if self.recipe.adapters == 0 and not np.isnan(self.cache[phase][ids]).any():
            return self._finish(self.pending, [torch.from_numpy(self.cache[phase][ids])])
        kind = Kind.TRAIN_FORWARD if phase == "train" else Kind.EVAL_FORWARD
        out = []
        for i in range(max(1, self.recipe.adapters)):
            arrays: dict[str, Any] = {Record.INPUTS: self._x(phase, ids)}
            dst = self.servers[i % len(self.servers)]
            configs = self._adapter_to(self.pending, i, dst, arrays) if self.recipe.adapters else {}
            out.append(request(kind, src=self.node_id, dst=dst, phase=phase,
                               tag=StepTag(t.epoch, t.step, i, i), records=arrays, configs=configs))
        return out

    @handles(Kind.TRAIN_STEP)
    def on_train_step(self, messages: list[Message]) -> list[Message]:
        return self._start(messages[-1], "train")

    @handles(Kind.EVAL_STEP)
    def on_eval_step(self, messages: list[Message]) -> list[Message]:
        return self._start(messages[-1], "eval")

    # ---- activations back: loss, regularizers, private backprop ------------------------------
    def _collect(self, messages: list[Message], phase: str) -> list[Message]:
        p = self.pending
        if p is None or p.phase != phase:
            raise ProtocolError(f"client: activations for {phase} but nothing pending")
        for m in messages:
            t = read_step(m)
            if (t.epoch, t.step) != (p.epoch, p.step):
                raise ProtocolError(f"client: activations for {t.epoch}:{t.step}, pending {p.epoch}:{p.step}")
            p.acts[max(t.adapter, 0)] = wire.get_array(m, Record.ACT, "h")
        if len(p.acts) < max(1, self.recipe.adapters):
            return []
        hs = [torch.tensor(np.array(p.acts[i]), requires_grad=phase == "train") for i in sorted(p.acts)]
        if self.recipe.adapters == 0:
            self.cache[phase][p.ids] = p.acts[0]
        return self._finish(p, hs)

    @handles(Kind.TRAIN_ACTS)
    def on_train_acts(self, messages: list[Message]) -> list[Message]:
        return self._collect(messages, "train")

    @handles(Kind.EVAL_ACTS)
    def on_eval_acts(self, messages: list[Message]) -> list[Message]:
        return self._collect(messages, "eval")

    def _regularizer(self, hs: list[torch.Tensor], y: torch.Tensor) -> torch.Tensor:
        r = self.recipe
        if r.reg == "adversarial":  # cross-fitted: each half's probe scored on the other half (regularizers.py)
            return sum((adversarial_penalty(h, y, num_classes=self.num_classes, l2=r.probe_l2, steps=r.probe_steps)
                        for h in hs), torch.zeros(()))
        if r.reg == "dcor":
            return sum((dcor_loss(h, y, num_classes=self.num_classes) for h in hs), torch.zeros(()))
        return torch.zeros(())

    def _finish(self, p: Pending, hs: list[torch.Tensor]) -> list[Message]:
        y = self._labels(p.phase, p.ids)
        if p.phase == "eval":
            with torch.no_grad():
                logits = self.head(mix(hs, self.w))
            self._score("eval", logits, p.ids, float(F.cross_entropy(logits, torch.from_numpy(self.y_test[p.ids]))))
            self.pending = None
            return []
        logits = self.head(mix(hs, self.w))
        main = F.cross_entropy(logits, y)
        total = main + self.recipe.reg_weight * self._regularizer(hs, y) if self.recipe.adapters else main
        head_params = list(self.head.parameters())
        wrt = head_params + (hs if self.recipe.adapters else [])
        grads = torch.autograd.grad(total, wrt)
        self.optimizer.zero_grad(set_to_none=True)
        for q, g in zip(head_params, grads, strict=False):
            q.grad = g
        self._score("train", logits.detach(), p.ids, float(main.detach()))
        if not self.recipe.adapters:
            self.optimizer.step()
            self.pending = None
            return []
        return self._backprop(p, [g for g in grads[len(head_params):]])

    def _backprop(self, p: Pending, g_h: list[torch.Tensor]) -> list[Message]:
        r, noise, out = self.recipe, self._noise("p3eft-split", "train", p.epoch, p.step), []
        x = self._x("train", p.ids)
        for i, g in enumerate(g_h):
            rms = float(g.detach().pow(2).mean().sqrt())
            ref = self.g_rms.get(i, rms) or 1.0  # running rms of PAST steps: no tie to this batch's labels
            self.g_rms[i] = 0.9 * self.g_rms[i] + 0.1 * rms if i in self.g_rms else rms
            pieces, p.alphas[i] = split_gradient(g, m=r.m, std=r.grad_noise * ref, noise=noise)
            pieces, origin = self._route_pieces(p, i, pieces)  # dp-lora hook: piece j' goes where piece origin[j'] went
            p.pieces[i] = {}
            by_server: dict[int, list[int]] = {}
            for j in range(len(pieces)):
                by_server.setdefault((i + origin[j]) % len(self.servers), []).append(j)
            for s, js in by_server.items():
                tag = len(p.routes)
                p.routes[tag] = (i, js)
                g_np = pieces[js].numpy().astype(np.float32)
                arrays = {Record.INPUTS: x, Record.GRAD: {"g": g_np}}
                configs = self._adapter_to(p, i, self.servers[s], arrays)
                out.append(request(Kind.TRAIN_BACKPROP, src=self.node_id, dst=self.servers[s], phase="train",
                                   tag=StepTag(p.epoch, p.step, tag, i), records=arrays, configs=configs))
        return out

    @handles(Kind.TRAIN_GRADS)
    def on_grads(self, messages: list[Message]) -> list[Message]:
        p = self.pending
        if p is None or p.phase != "train" or not p.routes:
            raise ProtocolError("client: gradients received but no backprop pending")
        for m in messages:
            t = read_step(m)
            if (t.epoch, t.step) != (p.epoch, p.step) or t.tag not in p.routes:
                raise ProtocolError(f"client: unexpected gradients {t} for pending {p.epoch}:{p.step}")
            i, js = p.routes.pop(t.tag)
            grads = read_record(m, Record.GRADS)
            for k, j in enumerate(js):
                p.pieces[i][j] = {name: v[k] for name, v in grads.items()}
        if p.routes:
            return []
        self._apply_grads(p)
        self.pending = None
        return []

    def _route_pieces(self, p: Pending, i: int, pieces: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
        """The pieces of adapter set ``i`` as sent, and the index of the piece each came from (dp-lora hook)."""
        return pieces, list(range(len(pieces)))

    def _apply_grads(self, p: Pending) -> None:
        """Recombine every adapter set's gradient and step the optimizer (dp-lora hook: DP-SGD instead)."""
        for i, adapter in enumerate(self.adapters):
            g_theta = recombine([p.pieces[i][j] for j in range(len(p.alphas[i]))], p.alphas[i])
            for name, param in adapter.items():
                param.grad = g_theta[name].to(param.dtype)
        self.optimizer.step()

    # ---- metrics (driver control) ------------------------------------------------------------
    @handles(Kind.QUERY_METRICS)
    def on_metrics(self, messages: list[Message]) -> list[Message]:
        phase = str(messages[-1].content.config_records[Record.WHICH]["phase"])
        loss, correct, count = self.stats[phase]
        self.stats[phase] = [0.0, 0, 0]
        scores = glue_scores(self.confusion[phase])
        self.confusion[phase][:] = 0
        rec = wire.metrics(loss=loss / max(count, 1), acc=correct / max(count, 1), count=count,
                           f1=scores["f1"], mcc=scores["mcc"])
        records: dict[str, Any] = {Record.METRICS: rec}
        if phase == "train":
            records[Record.STEP_LOSS] = wire.arrays(loss=np.asarray(self.step_losses, dtype=np.float64))
            self.step_losses = []
        return [wire.reply(messages[-1], content=wire.records(**records))]

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "adapters": [{k: v.detach().clone() for k, v in a.items()} for a in self.adapters],
            "head": self.head.state_dict(), "optimizer": self.optimizer.state_dict(), "w": self.w,
            "g_rms": dict(self.g_rms)}
        if self.recipe.label_epsilon is not None:  # PSLF's labels were randomized once: keep them
            out["y_used"] = torch.from_numpy(self.y_used.copy())
        # what the epoch in progress summed so far (a mid-epoch checkpoint: train.checkpoint_every_steps)
        out["epoch"] = {"stats": {ph: list(v) for ph, v in self.stats.items()}, "step_losses": list(self.step_losses),
                        "confusion": {ph: torch.from_numpy(c.copy()) for ph, c in self.confusion.items()}}
        if self.recipe.adapters == 0:  # head-only: the frozen features fetched so far
            out["cache"] = {ph: torch.from_numpy(c.copy()) for ph, c in self.cache.items()}
        return out

    def load_state(self, state: dict[str, Any]) -> None:
        if self.theta is not None:  # the servers may be fresh nodes: assume they hold nothing
            self.theta.forget()
        if not state:
            return
        with torch.no_grad():
            for a, saved in zip(self.adapters, state["adapters"], strict=True):
                for k, v in a.items():
                    v.copy_(saved[k])
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.w = state["w"]
        self.g_rms = {int(k): float(v) for k, v in state.get("g_rms", {}).items()}
        if "y_used" in state:  # the labels randomized once: a resume must not draw (and leak) them again
            self.y_used = state["y_used"].numpy().astype(np.int64)
        if "epoch" in state:
            sums = state["epoch"]
            self.stats = {ph: list(v) for ph, v in sums["stats"].items()}
            self.step_losses = [float(v) for v in sums["step_losses"]]
            self.confusion = {ph: c.numpy().astype(np.int64) for ph, c in sums["confusion"].items()}
        if "cache" in state:
            self.cache = {ph: c.numpy().astype(np.float32) for ph, c in state["cache"].items()}
