"""The active party of vertical FL: the labels and the fusion head. It fuses the parties' embeddings
(``sum_aggregator`` / ``concat_aggregator``, or a strategy's decoder), steps its head and answers with
the gradient of the fused input (ONE broadcast tensor for sum fusion). The passive parties:
``parties/vertical/party.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from flwr.common import Message
from torch import nn

from parties.vertical import wire as vw
from parties.vertical.data_guard import STATE_KEY as DATA_KEY
from parties.vertical.data_guard import DataGuard
from parties.vertical.labels import ServerLabels
from parties.vertical.local_updates import server_local_steps
from parties.vertical.nonfinite import check_loss
from parties.vertical.wire import step_config
from vfl.core.errors import ConfigError, ProtocolError
from vfl.core.rng import NodeNoise
from vfl.data.dataset import LabelShard
from vfl.data.sampling import Schedule
from vfl.privacy.defenses import UNDRAWN, Defense
from vfl.runtime import message as wire
from vfl.runtime.accel import module_hook, set_mode, step_all, zero_grads
from vfl.runtime.message import BROADCAST
from vfl.runtime.mods import ModContext, apply_mods
from vfl.runtime.node import Node, NodeSpec, handles

__all__ = ["ActiveServer", "Aggregator", "UNSCORED_ROWS", "concat_aggregator", "sum_aggregator"]


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
        self.defenses = list(defenses)  # vfl/privacy/defenses.py: relabel once (site labels), mods on GRAD (site gradient)
        self.mods = [m for d in self.defenses if (m := d.mod()) is not None]  # site gradient, or dcae's DiscreteSGD
        self._noise_rng = noise_rng
        self._node_noise: NodeNoise | None = None  # built at first use (a defense that draws), never sent
        self.data_guard = DataGuard(spec.name)  # a resumed server refuses labels other than its checkpoint's
        self.server_labels = ServerLabels(self.defenses, noise=lambda: self.node_noise)  # label_rr(_prior), cae
        self.mod_state: dict[str, Any] = {}  # the gradient mods' own bookkeeping (+ "labels" of the batch)
        self.local_steps = local_steps  # FedBCD Q: local updates per exchange (parties/vertical/local_updates.py)
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
        (``tests/unit/engine/test_train_accuracy.py``)."""
        if self._unscored:
            logits = torch.cat([lg for lg, _ in self._unscored])
            labels = torch.cat([y for _, y in self._unscored])
            self._train_stats["correct"] += int((torch.softmax(logits, 1).argmax(1) == labels).sum())
            self._unscored, self._unscored_rows = [], 0

    def _check_round(self, messages: list[Message], phase: str) -> tuple[int, int]:
        mds = [m.metadata for m in messages]
        srcs = [md.src_node_id for md in mds]
        if (senders := sorted(srcs)) != self.party_ids:
            missing = sorted(set(self.party_ids) - set(srcs))
            raise ProtocolError(f"server expected embeddings from every party; missing nodes {missing}")
        tags = {md.group_id for md in mds}  # the embeddings' (authenticated) round tags
        if len(tags) != 1:
            raise ProtocolError(f"{phase} embeddings from different rounds: {sorted(str(t) for t in tags)}")
        self._senders = (messages, srcs, senders)  # fuse reads the same list's senders from here
        got, epoch, step = wire.parse_round(str(tags.pop()))
        if got != phase:
            raise ProtocolError(f"{phase} embeddings tagged with round phase {got!r}")
        return epoch, step

    def fuse(self, messages: list[Message]) -> torch.Tensor:
        read, srcs, senders = self._senders  # what _check_round read of this list, or read now
        if read is not messages:
            srcs = [m.metadata.src_node_id for m in messages]
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
        if not defended:  # the dataset's labels, in [0, num_classes) (vfl.data.dataset): never UNDRAWN
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
        tag = src.metadata.group_id
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
