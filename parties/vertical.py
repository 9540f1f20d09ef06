"""Vertical FL nodes: the passive party (features + bottom net) and the active party (labels + head).

Both are long-lived: they keep their model, optimizer and data shard for the whole run. The
party computes its embedding for the shared batch ids, passes it through its mods (PBM, LDP,
SecAgg...) and sends it up; the server fuses what it receives, steps its head and sends the
gradient of the fused input back (ONE broadcast tensor for sum fusion).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from flwr.common import ArrayRecord, Message
from torch import nn

from parties import vertical_wire as vw
from parties.data_guard import STATE_KEY as DATA_KEY
from parties.data_guard import DataGuard
from parties.defenses.server_labels import ServerLabels
from parties.fast_step import module_hook, set_mode, step_all, zero_grads
from parties.local_updates import party_local_steps, server_local_steps
from parties.nonfinite import check_embedding, check_loss
from parties.party_batch import train_together
from parties.release_guard import ReleaseGuard
from vfl import message as wire
from vfl.data import LabelShard, PartyShard
from vfl.defenses import UNDRAWN, Defense
from vfl.errors import ConfigError, ProtocolError
from vfl.fastrecords import meta_of, metas_of
from vfl.message import BROADCAST
from vfl.mods import Mod, ModContext, apply_mods
from vfl.node import Node, NodeSpec, handles
from vfl.rng import NodeNoise
from vfl.sampling import Schedule
from vfl.torch_light import backward

__all__ = ["ActiveServer", "PassiveParty", "Schedule", "concat_aggregator",
           "sum_aggregator"]  # the protocol's names: parties.vertical_wire (Kind, Record, Array, Key)


def step_config(*, epoch: int, step: int, forward: bool, grad_step: int = -1) -> Any:
    return wire.config(**{vw.Key.EPOCH: epoch, vw.Key.STEP: step, vw.Key.FORWARD: forward, vw.Key.GRAD_STEP: grad_step})


def step_of(message: Message) -> tuple[int, int]:
    """(epoch, step) of a message's STEP record."""
    cfg = wire.config_of(message, vw.Record.STEP)
    return wire.config_int(cfg, vw.Key.EPOCH), wire.config_int(cfg, vw.Key.STEP)


class PassiveParty(Node):
    """A passive party: holds ``X_m`` and the bottom net; never sees labels."""

    release_guard: ReleaseGuard | None = None  # its own cap on each training sample's releases (set by the strategy)

    def __init__(self, spec: NodeSpec, *, index: int, num_parties: int, shard: PartyShard, bottom: nn.Module,
                 optimizer: torch.optim.Optimizer, schedule: Schedule, mods: Sequence[Mod] = (),
                 device: str = "cpu", noise_rng: str = "crypto", local_steps: int = 1) -> None:
        super().__init__(spec)
        self.index = index
        self.local_steps = local_steps  # FedBCD Q: local updates per exchange (parties/local_updates.py)
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
        if phase == "train" and self.release_guard is not None:  # refuse past its own cap (parties/release_guard.py)
            self.release_guard.admit(self.schedule.train_ids(epoch, step), epoch=epoch, step=step)
        if self.mods:  # encoded or masked, the server cannot tell whose embedding went bad: say it here
            check_embedding(emb, party=self.spec.name, phase=phase, epoch=epoch, step=step)
        md = meta_of(request)  # (read directly: each flwr metadata property costs two calls)
        out = wire.make(md["_message_type"], src=self.spec.node_id, dst=int(md["_src_node_id"]),
                        round=wire.round_tag(epoch, step, phase), reply_to=md["_message_id"],
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
        backward([out], [g])  # torch's own call would import sympy in each party process (vfl.torch_light)
        if (begin_step := getattr(self.optimizer, "begin_step", None)) is not None:  # DP-SGD: parties/dp_bottom.py
            begin_step(epoch=epoch, step=step, batch_size=int(out.shape[0]))
        step_all([self.optimizer])  # plain torch optimizers: without the per-call wrapper (fast_step.py)
        self._pending = None
        party_local_steps(bottom=self.bottom, optimizer=self.optimizer, grad=g, extra=self.local_steps - 1,
                          inputs=lambda: self._inputs(self.shard.x_train, self.schedule.train_ids(epoch, step)))

    @classmethod
    def handle_together(cls, deliveries: Sequence[tuple[Node, list[Message]]]) -> list[list[Message]] | None:
        """The parties of one host take a gradient with one fused backward (parties/party_batch.py)."""
        return train_together(PassiveParty, deliveries)

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
            self.release_guard.merge(old.release_guard.counts)

    def release_report(self) -> dict[str, Any] | None:
        """Control plane: its cap, its most-released sample and its worst-case ε (None without a guard)."""
        return self.release_guard.report() if self.release_guard is not None else None


Aggregator = Callable[[list[Message]], torch.Tensor]
UNSCORED_ROWS = 8192  # train predictions the server holds before scoring them (bounds the held logits' memory)


class ActiveServer(Node):
    """The active party: labels + fusion head; aggregates embeddings and returns the gradient."""

    accepts_broadcast = False

    def __init__(self, spec: NodeSpec, *, labels: LabelShard, head: nn.Module, optimizer: torch.optim.Optimizer,
                 schedule: Schedule, party_ids: Sequence[int], aggregate: Aggregator, fusion: str = "sum",
                 device: str = "cpu", local_steps: int = 1, defenses: Sequence[Defense] = (),
                 noise_rng: str = "crypto") -> None:
        super().__init__(spec)
        self.labels = labels
        self.defenses = list(defenses)  # vfl/defenses.py: relabel once (site labels), mods on GRAD (site gradient)
        self.mods = [m for d in self.defenses if (m := d.mod()) is not None]  # site gradient, or dcae's DiscreteSGD
        self._noise_rng = noise_rng
        self._node_noise: NodeNoise | None = None  # built at first use (a defense that draws), never sent
        self.data_guard = DataGuard(spec.name)  # a resumed server refuses labels other than its checkpoint's
        self.server_labels = ServerLabels(self.defenses, noise=lambda: self.node_noise)  # label_rr(_prior), cae
        self.mod_state: dict[str, Any] = {}  # the gradient mods' own bookkeeping (+ "labels" of the batch)
        self.local_steps = local_steps  # FedBCD Q: local updates per exchange (parties/local_updates.py)
        self.head = head.to(device)
        self.optimizer = optimizer
        self.schedule = schedule
        self.party_ids = sorted(party_ids)
        self.aggregate = aggregate
        self.fusion = fusion
        self.device = device
        self.loss_fn = nn.CrossEntropyLoss()
        self.last_summed: list[int] = []
        self._senders: tuple[list[Message] | None, list[int], list[int]] = (None, [], [])  # (messages, senders, sorted)
        self.reset_metrics()

    def reset_metrics(self) -> None:
        self._train_stats: dict[str, float] = {"loss": 0.0, "correct": 0, "count": 0}
        self._unscored: list[tuple[torch.Tensor, torch.Tensor]] = []  # (logits, labels) of steps not yet scored
        self._unscored_rows = 0
        self.eval_scores: list[np.ndarray] = []
        self.eval_labels: list[np.ndarray] = []

    @property
    def train_stats(self) -> dict[str, float]:
        """The running train ``loss`` (summed over samples), ``correct`` predictions and ``count`` since the
        last metrics read."""
        self._score()
        return self._train_stats

    def _score(self) -> None:
        """Count the correct predictions of the steps held back (argmax of the softmax, as one step counts its
        own): one softmax over their logits concatenated instead of five tensor ops per step. Softmax
        works row by row, so every row's prediction is the one its step would have made
        (``tests/unit/test_train_accuracy.py``)."""
        if self._unscored:
            logits = torch.cat([lg for lg, _ in self._unscored])
            labels = torch.cat([y for _, y in self._unscored])
            self._train_stats["correct"] += int((torch.softmax(logits, 1).argmax(1) == labels).sum())
            self._unscored, self._unscored_rows = [], 0

    def _check_round(self, messages: list[Message], phase: str) -> tuple[int, int]:
        mds = metas_of(messages)  # (read directly: each flwr metadata property costs two calls)
        srcs = [int(md["_src_node_id"]) for md in mds]  # (a list: a generator is a call per item)
        if (senders := sorted(srcs)) != self.party_ids:
            missing = sorted(set(self.party_ids) - set(srcs))
            raise ProtocolError(f"server expected embeddings from every party; missing nodes {missing}")
        tags = {md["_group_id"] for md in mds}  # the embeddings' (authenticated) round tags (#29.2)
        if len(tags) != 1:
            raise ProtocolError(f"{phase} embeddings from different rounds: {sorted(str(t) for t in tags)}")
        self._senders = (messages, srcs, senders)  # fuse reads the same list's senders from here
        got, epoch, step = wire.parse_round(str(tags.pop()))
        if got != phase:
            raise ProtocolError(f"{phase} embeddings tagged with round phase {got!r}")
        return epoch, step

    def fuse(self, messages: list[Message]) -> torch.Tensor:
        read, srcs, senders = self._senders  # what _check_round read of this list, or read now (directly: flwr's is four calls)
        if read is not messages:
            srcs = [int(md["_src_node_id"]) for md in metas_of(messages)]
            senders = sorted(srcs)
        if srcs == senders:  # already in sender order (a host's parties reply in node order): the sort is the identity
            self.last_summed, ordered = senders, list(messages)
        else:
            order = sorted(range(len(messages)), key=srcs.__getitem__)
            self.last_summed, ordered = [srcs[i] for i in order], [messages[i] for i in order]
        fused = self.aggregate(ordered)
        if self.device != "cpu":  # (on the CPU ``to`` returns the tensor itself)
            fused = fused.to(self.device)
        if self.view_sink is not None:  # views only
            self.note_derived(wire.round_of(messages[0]), "fused", fused.detach().cpu().numpy())
        return fused

    def contributors(self) -> list[int]:
        """The parties whose embeddings made the last fused input (dropout records)."""
        return list(self.last_summed)

    @handles(vw.Kind.DROP)
    def on_drop(self, messages: list[Message]) -> list[Message]:
        """The driver reports parties that left the run: later rounds expect only the others."""
        gone = {int(p) for m in messages for p in wire.config_of(m, vw.Record.DROP)[vw.Key.PARTIES]}  # type: ignore[union-attr]
        self.party_ids = [p for p in self.party_ids if p not in gone]
        return []

    @handles(vw.Kind.TRAIN_FORWARD)
    def on_train(self, messages: list[Message]) -> list[Message]:
        epoch, step = self._check_round(messages, "train")
        return self.train_step(messages, epoch, step)

    @property
    def node_noise(self) -> NodeNoise:
        """The server's noise key, drawn inside it on first use: only a defense that adds noise needs one."""
        if self._node_noise is None:
            self._node_noise = NodeNoise(self._noise_rng, seed=self.schedule.seed, node=self.node_id)
        return self._node_noise

    def train_labels(self) -> np.ndarray:
        """The labels the head trains on: the true ones, or the label defenses' one-time draws (kept in ``state()``)."""
        return self.server_labels.train_labels(self.labels.y_train, num_classes=self.labels.num_classes)

    def _private_backward(self, fused: torch.Tensor, y: torch.Tensor, epoch: int, step: int) -> np.ndarray | None:
        """A gradient defense's private backward (label_gp): sets the head's gradient and returns the rows
        to send down; None without one."""
        for d in self.defenses:
            noise = self.node_noise.round(type(d).__name__, phase="train", epoch=epoch, step=step)
            if (rows := d.private_backward(self.head, fused, y, noise=noise)) is not None:
                return rows
        return None

    def train_step(self, messages: list[Message], epoch: int, step: int) -> list[Message]:
        """Fuse the embeddings, step the head, and send back the gradient (+ forward step+1)."""
        if self.data_guard.expected is not None:
            self.data_guard.check((self.labels.y_train, self.labels.y_test))
        ids = self.schedule.train_ids(epoch, step)
        defended = bool(self.defenses)  # without defenses the label hooks below are identities: skipped
        y = torch.as_tensor((self.train_labels() if defended else self.labels.y_train)[ids], device=self.device)
        fused = self.fuse(messages).detach().requires_grad_(True)
        if defended and (staged := self.server_labels.batch(self.labels.y_train, num_classes=self.labels.num_classes,
                                                            ids=ids, epoch=epoch, step=step, head=self.head,
                                                            fused=fused)) is not None:
            y = torch.as_tensor(staged, device=self.device)  # label_rr_prior: stage-2 labels drawn / put to use
        if self.head.training is not True:  # = set_mode(self.head, training=True), without its call per step
            self.head.train(True)
        if (arm := module_hook(self.head, "arm")) is not None:  # a head defense (mid): this step's noise
            arm(self.node_noise.round("head", phase="train", epoch=epoch, step=step))
        logits = self.head(fused)
        if not defended:  # the dataset's labels, in [0, num_classes) (vfl.data): never UNDRAWN
            loss = self.loss_fn(logits, y)
        else:
            loss = (self.loss_fn(logits, self.server_labels.targets(y, num_classes=self.labels.num_classes))
                    if bool((y != UNDRAWN).any()) else logits.sum() * 0.0)  # all UNDRAWN: no signal
        if (penalty := module_hook(self.head, "penalty")) is not None:  # mid: + lambda * KL of the bottleneck
            loss = loss + penalty
        value = check_loss(loss, epoch=epoch, step=step, messages=messages, fused=fused, logits=logits, head=self.head)
        zero_grads([self.optimizer])
        private = self._private_backward(fused, y, epoch, step) if defended else None  # label_gp: a DP backward
        if private is None:
            loss.backward()
        step_all([self.optimizer])
        n = y.shape[0]  # = len(y) (a tensor's len() is a Python call)
        stats = self._train_stats
        stats["loss"] += (float(loss.detach()) if value is None else value) * n
        stats["count"] += n
        if defended:  # the label defenses' decoding: scored now
            stats["correct"] += int((self.server_labels.decode(logits.detach()).argmax(1) == y).sum())
        else:  # scored in batches (_score): the same predictions
            self._unscored.append((logits.detach(), y))
            self._unscored_rows += n
            if self._unscored_rows >= UNSCORED_ROWS:
                self._score()
        if private is not None:
            grad = private
        elif fused.grad is None:  # a user's head whose output ignores its input: nothing to send the parties
            raise ConfigError("model.head", "the head's loss does not depend on the fused embeddings; "
                              "no gradient reaches the parties")
        else:
            grad = fused.grad.detach().numpy() if self.device == "cpu" else fused.grad.detach().cpu().numpy()
            if grad.dtype != np.float32:  # (= astype(np.float32, copy=False), without its call for float32)
                grad = grad.astype(np.float32)
        if self.local_steps > 1:  # FedBCD Q > 1
            server_local_steps(head=self.head, optimizer=self.optimizer, loss_fn=self.loss_fn, fused=fused, labels=y,
                               extra=self.local_steps - 1)
        nxt = step + 1 < self.schedule.steps
        cfg = step_config(epoch=epoch, step=step + 1 if nxt else step, forward=nxt, grad_step=step)
        src = messages[0]
        tag = meta_of(src)["_group_id"]  # = wire.round_of(src) (flwr's property chain: four calls)
        if self.fusion == "sum":  # one tensor for everyone: the gradient of the sum is the same for all
            out = [wire.make(vw.Kind.TRAIN_FORWARD, src=self.spec.node_id, dst=BROADCAST, round=tag,
                             content=wire.records(**{vw.Record.GRAD: wire.arrays(**{vw.Array.GRAD: grad}), vw.Record.STEP: cfg}))]
            return self._defend(out, epoch, step)
        dim = grad.shape[1] // len(self.party_ids)
        return self._defend([wire.make(vw.Kind.TRAIN_FORWARD, src=self.spec.node_id, dst=pid, round=tag,
                          content=wire.records(**{vw.Record.GRAD: wire.arrays(**{f"{vw.Array.GRAD}{i}": grad[:, i * dim:(i + 1) * dim]}),
                                                  vw.Record.STEP: cfg}))
                for i, pid in enumerate(self.party_ids)], epoch, step)

    def _defend(self, out: list[Message], epoch: int, step: int) -> list[Message]:
        """The gradient defenses' mods on every gradient message before it leaves the server."""
        if not self.mods:
            return out
        self.mod_state["labels"] = self.train_labels()[self.schedule.train_ids(epoch, step)]  # e.g. Marvell
        ctx = ModContext(party=-1, num_parties=len(self.party_ids), phase="train", epoch=epoch, step=step,
                         seed=self.schedule.seed, node_noise=self.node_noise, state=self.mod_state)
        return [apply_mods(self.mods, m, ctx) for m in out]

    @handles(vw.Kind.EVAL_FORWARD)
    def on_eval(self, messages: list[Message]) -> list[Message]:
        _, step = self._check_round(messages, "eval")
        return self.eval_step(messages, step)

    def eval_step(self, messages: list[Message], step: int) -> list[Message]:
        if self.data_guard.expected is not None:
            self.data_guard.check((self.labels.y_train, self.labels.y_test))
        set_mode(self.head, training=False)
        with torch.no_grad():
            logits = self.head(self.fuse(messages))
        self.eval_scores.append(self.server_labels.decode(logits).cpu().numpy())
        self.eval_labels.append(self.labels.y_test[self.schedule.test_ids(step)])
        return []

    @handles(vw.Kind.METRICS)
    def on_metrics(self, messages: list[Message]) -> list[Message]:
        """Driver-side read of the running metrics (control plane, never sent to parties)."""
        out: dict[str, float] = {}
        s = self.train_stats
        if s["count"]:
            out["train_loss"] = s["loss"] / s["count"]
            out["train_acc"] = s["correct"] / s["count"]
        if self.eval_scores:
            scores, labels = np.concatenate(self.eval_scores), np.concatenate(self.eval_labels)
            out["test_acc"] = float((scores.argmax(1) == labels).mean())
            if self.labels.num_classes == 2:
                from sklearn.metrics import average_precision_score

                out["test_auprc"] = float(average_precision_score(labels == 1, scores[:, 1]))
        self.reset_metrics()
        return [wire.metrics_reply(messages[0], **out)]

    def state(self) -> dict[str, Any]:
        out = {"head": self.head.state_dict(), "optimizer": self.optimizer.state_dict(),
               DATA_KEY: self.data_guard.current((self.labels.y_train, self.labels.y_test))}
        return out | self.server_labels.state()  # y_used, y_pending: the label defenses' draws

    def load_state(self, state: dict[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.data_guard.expect(state.get(DATA_KEY))
        self.server_labels.load_state(state)


def _numpy(t: torch.Tensor, device: str) -> np.ndarray:
    """``t.detach().cpu().numpy()`` (on a CPU node without the ``cpu()`` call, which returns ``t`` itself)."""
    return t.detach().numpy() if device == "cpu" else t.detach().cpu().numpy()


def sum_aggregator(messages: list[Message]) -> torch.Tensor:
    """NPQ/LDP fusion: the float sum of the embeddings (in party order)."""
    total = None
    for m in messages:
        e = wire.get_array(m, vw.Record.EMB, vw.Array.FLOAT)
        if total is None:
            total = e.astype(np.float32)  # a copy (the wire's array is read-only): the sum adds into it
        else:
            total += e if e.dtype == np.float32 else e.astype(np.float32)  # in place: the same float32 sums
    if total is None:
        raise ProtocolError("no embeddings to aggregate")
    return torch.from_numpy(total)


def concat_aggregator(messages: list[Message]) -> torch.Tensor:
    """Concatenation fusion (party order); not additive, so incompatible with secure aggregation."""
    return torch.from_numpy(np.concatenate([wire.get_array(m, vw.Record.EMB, vw.Array.FLOAT) for m in messages], axis=1))
