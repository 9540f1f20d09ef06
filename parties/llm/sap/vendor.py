"""SAP vendor node: owns the pretrained model, ships the bottom, trains top LoRA + head, attacks.

The vendor never sees texts, token ids or labels: it sees privatized representations (and their
lengths) and dLoss/dlogits. Every message it receives is kept in ``log``; the embedding-inversion
and attribute-inference attacks read only what it received (plus its own initial bottom weights:
the white-box attacker of SAP §5.1) and answer the driver's ``query.eia`` / ``query.aia``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from flwr.common import ArrayRecord, ConfigRecord, Message
from torch import nn

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.lora import LoraSpec, inject_lora
from parties.llm.common.wire import pack, unpack
from parties.llm.sap.customer import Privatizer, resolve_eta, sanitize
from parties.llm.sap.split import bottom_state, split_encoder
from parties.llm.sap.wire import CUSTOMER_ID, Kind, Mode, Record, read_step, send, split_packed
from vfl.attacks.attribute import PROBES, Probe, attacker_inference, transformer_attribute_inference
from vfl.attacks.inversion import (
    learned_inversion,
    nearest_neighbor_inversion,
    optimization_inversion,
    train_inverter,
)
from vfl.core.errors import ProtocolError
from vfl.core.rng import NoiseSource, derive_seed, seeded_torch
from vfl.data.sampling import Schedule
from vfl.privacy.mechanisms.dchi import privatize
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


@dataclass(frozen=True)
class AttackBudget:
    eia_samples: int = 16
    eia_steps: int = 100
    eia_lr: float = 0.1
    eia_temperature: float = 1.0
    eia_chunk: int = 8
    aia_epochs: int = 0  # fine-tuning epochs of the transformer AIA probe (0 = that probe is off)
    aia_lr: float = 1e-3
    aia_batch: int = 16
    inverter_samples: int = 0  # public token sequences the learned inverter trains on (0 = that attack is off)
    inverter_epochs: int = 4
    inverter_hidden: int = 256
    inverter_lr: float = 2e-3
    inverter_negatives: int = 2048
    mechanism: Privatizer | None = None  # the customer's public release policy (Kerckhoffs: the attacker knows it)


@dataclass
class LogEntry:
    """One received message: kind, sender, round, config values and (within the log budget) its arrays."""

    kind: str
    src: int
    round: str
    config: dict[str, Any]
    shapes: dict[str, tuple[str, tuple[int, ...]]]
    arrays: dict[str, np.ndarray] | None = field(default=None, repr=False)


class SapVendor(Node):
    """Server node of SAP (model owner and honest-but-curious attacker)."""

    accepts_broadcast = False

    def __init__(self, spec: NodeSpec, *, encoder: nn.Module, split: int, pooling: str, lora: LoraSpec,
                 make_optimizer: OptimizerFactory, attack: AttackBudget, seed: int, device: str = "cpu",
                 log_bytes: int = 64 << 20,
                 schedule_lr: Callable[[torch.optim.Optimizer, int], torch.optim.Optimizer] | None = None) -> None:
        super().__init__(spec)
        self.encoder, self.split, self.pooling, self.lora = encoder, split, pooling, lora
        self.make_optimizer, self.attack, self.seed, self.device = make_optimizer, attack, seed, device
        self.schedule_lr = schedule_lr  # train.lr_schedule over the run's steps (learnt at setup)
        self.log: list[LogEntry] = []
        self.log_budget = log_bytes
        self.top: nn.Module | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self.schedule: Schedule | None = None
        self.train_store: list[np.ndarray | None] = []
        self.test_store: list[np.ndarray | None] = []
        self.eia_ids: set[int] = set()
        self.obs_full: dict[int, list[np.ndarray]] = {}
        self.obs_pooled: dict[int, list[np.ndarray]] = {}
        self.obs_len: dict[int, int] = {}  # each sample's token count, as the ``lengths`` on the wire show it
        self.obs_last: dict[int, np.ndarray] = {}  # each sample's latest (L, d) rows: the transformer probe's input
        self._pending: tuple[int, int, torch.Tensor, torch.Tensor] | None = None

    def handle(self, messages: list[Message]) -> list[Message]:
        for m in messages:
            self._record(m)
        return super().handle(messages)

    def _record(self, m: Message) -> None:
        arrays = {f"{r}/{k}": wire.from_array(a) for r, rec in m.content.array_records.items() for k, a in rec.items()}
        size = sum(a.nbytes for a in arrays.values())
        keep = size <= self.log_budget
        self.log_budget -= size if keep else 0
        config = {f"{r}/{k}": v for r, rec in m.content.config_records.items() for k, v in rec.items()}
        self.log.append(LogEntry(m.metadata.message_type, int(m.metadata.src_node_id), m.metadata.group_id, config,
                                 {k: (a.dtype.str, a.shape) for k, a in arrays.items()}, arrays if keep else None))

    # ---- setup: build top + LoRA + head, ship the bottom ------------------------------------
    @handles(Kind.INIT)
    def on_init(self, messages: list[Message]) -> list[Message]:
        c = messages[-1].content.config_records[Record.TASK]
        self.schedule = Schedule(seed=self.seed, num_train=wire.config_int(c, "num_train"),
                                 num_test=wire.config_int(c, "num_test"), batch_size=wire.config_int(c, "batch_size"),
                                 eval_batch_size=wire.config_int(c, "eval_batch_size"))
        self.train_store = [None] * self.schedule.num_train
        self.test_store = [None] * self.schedule.num_test
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed("sap-top", self.seed) >> 1)
            bottom, top = split_encoder(self.encoder, split=self.split, num_classes=wire.config_int(c, "num_classes"),
                                        pooling=self.pooling)
            self.attack_bottom = copy.deepcopy(bottom).float().eval().requires_grad_(False).to(self.device)
            top.requires_grad_(False)
            params = inject_lora(top, self.lora, where="the top model")
            top.head.requires_grad_(True)
        torch.manual_seed(derive_seed("sap-dropout", self.seed, self.node_id) >> 1)  # reproducible dropout
        self.top = top.to(self.device)
        self.optimizer = self.make_optimizer(params + list(top.head.parameters()))
        if self.schedule_lr is not None and "total_steps" in c:
            self.optimizer = self.schedule_lr(self.optimizer, wire.config_int(c, "total_steps"))
        rng = np.random.default_rng(derive_seed("sap-eia-ids", self.seed))
        k = min(self.attack.eia_samples, self.schedule.num_train)
        self.eia_ids = {int(i) for i in rng.choice(self.schedule.num_train, size=k, replace=False)}
        config_json, weights = bottom_state(bottom)
        named: dict[str, ArrayRecord | ConfigRecord] = {Record.MODEL: wire.config(config=config_json),
                                                        Record.WEIGHTS: wire.arrays(**weights)}
        content = wire.records(**named)
        return [wire.make(Kind.BOTTOM, src=self.node_id, dst=CUSTOMER_ID, round=wire.round_tag(-1, -1, "setup"),
                          content=content)]

    # ---- receiving representations ----------------------------------------------------------
    def _observe(self, ids: np.ndarray, reps: list[np.ndarray]) -> None:
        for sid, r in zip(ids.tolist(), reps, strict=True):
            if sid in self.eia_ids:
                self.obs_full.setdefault(sid, []).append(np.array(r))
            self.obs_pooled.setdefault(sid, []).append(np.asarray(r, dtype=np.float32).mean(0))
            self.obs_len[sid] = len(r)
            if self.attack.aia_epochs:
                self.obs_last[sid] = r  # a reference to the received rows (frozen bottom: the store's own)

    def _forward(self, flat: np.ndarray, lengths: np.ndarray, *, train: bool, input_grad: bool = False
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-model logits; ``input_grad`` keeps dLoss/d(received reps) for a trainable bottom."""
        h = torch.tensor(flat, device=self.device, requires_grad=input_grad)
        padded, mask = unpack(h, torch.tensor(lengths, device=self.device))
        self.top.train(train)  # type: ignore[union-attr]
        with torch.set_grad_enabled(train):
            logits = self.top(padded, mask)  # type: ignore[misc]
        return logits, h

    def _from_store(self, store: list[np.ndarray | None], ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        reps = [store[i] for i in ids]
        if any(r is None for r in reps):
            raise ProtocolError("vendor asked to train/evaluate on samples whose representations it never received")
        return np.concatenate(reps), np.array([len(r) for r in reps])  # type: ignore[arg-type]

    def _logits(self, kind: str, phase: str, to: Message | None, epoch: int, step: int, z: torch.Tensor) -> Message:
        return send(kind, src=self.node_id, dst=CUSTOMER_ID, to=to, phase=phase, epoch=epoch, step=step,
                    records={Record.LOGITS: {"z": z.detach().cpu().numpy().astype(np.float32, copy=False)}})

    def _receive(self, m: Message, store: list[np.ndarray | None], *, observe: bool
                 ) -> tuple[int, int, np.ndarray, np.ndarray] | None:
        """Representations of one message: an upload chunk goes into ``store`` (None back), a batch
        comes back as (epoch, step, packed rows, lengths). ``observe``: keep them for the attacks."""
        epoch, step, mode, offset = read_step(m)
        flat, lengths = wire.get_array(m, Record.REPS, "h"), wire.get_array(m, Record.REPS, "lengths")
        reps = split_packed(flat, lengths)
        upload = mode == Mode.UPLOAD
        if upload:
            for i, r in enumerate(reps):
                store[offset + i] = r
        if observe:
            ids = np.arange(offset, offset + len(reps)) if upload else self.schedule.train_ids(epoch, step)  # type: ignore[union-attr]
            self._observe(ids, reps)
        return None if upload else (epoch, step, flat, lengths)

    @handles(Kind.TRAIN_REPS)
    def on_train_reps(self, messages: list[Message]) -> list[Message]:
        out = []
        for m in messages:
            if (batch := self._receive(m, self.train_store, observe=True)) is None:
                continue
            epoch, step, flat, lengths = batch
            logits, h = self._forward(flat, lengths, train=True, input_grad=True)
            self._pending = (epoch, step, logits, h)
            out.append(self._logits(Kind.TRAIN_LOGITS, "train", m, epoch, step, logits))
        return out

    @handles(Kind.TRAIN_STEP)
    def on_train_step(self, messages: list[Message]) -> list[Message]:
        epoch, step, _, _ = read_step(messages[-1])
        flat, lengths = self._from_store(self.train_store, self.schedule.train_ids(epoch, step))  # type: ignore[union-attr]
        logits, h = self._forward(flat, lengths, train=True)
        self._pending = (epoch, step, logits, h)
        return [self._logits(Kind.TRAIN_LOGITS, "train", None, epoch, step, logits)]

    @handles(Kind.TRAIN_GRAD)
    def on_grad(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        epoch, step, _, _ = read_step(m)
        if self._pending is None or self._pending[:2] != (epoch, step):
            raise ProtocolError(f"vendor: gradient for {epoch}:{step} but pending "
                                f"{self._pending[:2] if self._pending else None}")
        _, _, logits, h = self._pending
        g = torch.as_tensor(np.array(wire.get_array(m, Record.GRAD, "g")), device=self.device)
        self.optimizer.zero_grad(set_to_none=True)  # type: ignore[union-attr]
        logits.backward(g)
        self.optimizer.step()  # type: ignore[union-attr]
        self._pending = None
        if h.grad is None:  # frozen bottom: nothing goes back
            return []
        return [send(Kind.TRAIN_BOTTOM_GRAD, src=self.node_id, dst=CUSTOMER_ID, to=m, phase="train", epoch=epoch,
                     step=step, records={Record.BGRAD: {"g": h.grad.cpu().numpy().astype(np.float32, copy=False)}})]

    @handles(Kind.EVAL_REPS)
    def on_eval_reps(self, messages: list[Message]) -> list[Message]:
        out = []
        for m in messages:
            if (batch := self._receive(m, self.test_store, observe=False)) is None:
                continue
            epoch, step, flat, lengths = batch
            logits, _ = self._forward(flat, lengths, train=False)
            out.append(self._logits(Kind.EVAL_LOGITS, "eval", m, epoch, step, logits))
        return out

    @handles(Kind.EVAL_STEP)
    def on_eval_step(self, messages: list[Message]) -> list[Message]:
        epoch, step, _, _ = read_step(messages[-1])
        flat, lengths = self._from_store(self.test_store, self.schedule.test_ids(step))  # type: ignore[union-attr]
        logits, _ = self._forward(flat, lengths, train=False)
        return [self._logits(Kind.EVAL_LOGITS, "eval", None, epoch, step, logits)]

    # ---- attacks on what was received (control plane) ---------------------------------------
    def invert(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """EIA on every observation of the attacked samples: (sample ids, lengths, guessed tokens)."""
        entries = [(sid, r) for sid in sorted(self.obs_full) for r in self.obs_full[sid]]
        guesses: list[np.ndarray] = []
        vocab = self.attack_bottom.vocab
        gen = seeded_torch("sap-eia", self.seed, device=self.device)  # attack restarts: reproducible
        chunk = self.attack.eia_chunk
        for i in range(0, len(entries), chunk):
            reps = [torch.as_tensor(r, device=self.device) for _, r in entries[i : i + chunk]]
            lengths = torch.tensor([len(r) for r in reps], device=self.device)
            if self.split == 0:
                ids = nearest_neighbor_inversion(torch.cat(reps), vocab=vocab).cpu().numpy()
                guesses += split_packed(ids, lengths.cpu().numpy())
                continue
            padded, mask = unpack(torch.cat(reps), lengths)
            pred = optimization_inversion(target=padded, attention_mask=mask, bottom=self.attack_bottom.forward_embeds,
                                          vocab=vocab, steps=self.attack.eia_steps, lr=self.attack.eia_lr,
                                          temperature=self.attack.eia_temperature, generator=gen)
            guesses += [pred[j, : int(n)].cpu().numpy() for j, n in enumerate(lengths)]
        sample = np.array([sid for sid, _ in entries], dtype=np.int64)
        lens = np.array([len(g) for g in guesses], dtype=np.int64)
        flat = np.concatenate(guesses).astype(np.int64) if guesses else np.zeros(0, np.int64)
        return sample, lens, flat

    def inverter_pairs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(features, true tokens) the vendor makes on its own: uniformly drawn token sequences (a public
        sample needing no text) at the lengths it sees on the wire, through its copy of the public bottom
        and the public release mechanism (SanText, then ηdχ with snapping), with its own seeded noise."""
        b, mech, vocab = self.attack, self.attack.mechanism, self.attack_bottom.vocab
        rng = np.random.default_rng(derive_seed("sap-inverter-data", self.seed))
        seen = np.array(sorted(self.obs_len.values()) or [16], dtype=np.int64)
        lengths = rng.choice(seen, size=b.inverter_samples)
        ids = rng.integers(0, vocab.shape[0], size=(b.inverter_samples, int(lengths.max())))
        inputs = ids
        if mech is not None and mech.santext_epsilon is not None:
            inputs = sanitize(ids, vocab=vocab, epsilon=mech.santext_epsilon, keep=(),
                              noise=NoiseSource.seeded("sap-inverter-santext", self.seed))
        n = torch.as_tensor(lengths, device=self.device)
        mask = (torch.arange(ids.shape[1], device=self.device).unsqueeze(0) < n.unsqueeze(1)).to(torch.long)
        feats = []
        with torch.no_grad():
            for i in range(0, len(ids), 64):
                x = torch.as_tensor(inputs[i : i + 64], device=self.device)
                feats.append(pack(self.attack_bottom(x, mask[i : i + 64]), n[i : i + 64]))
        flat = torch.cat(feats)
        eta = None if mech is None else resolve_eta(mech.eta, vocab=vocab, target=mech.eia_target, seed=self.seed)[0]
        if eta is not None:
            table = vocab if self.split == 0 and mech.snap else None  # type: ignore[union-attr]
            flat, _ = privatize(flat, eta=eta, noise=NoiseSource.seeded("sap-inverter-dchi", self.seed), table=table)
        tokens = pack(torch.as_tensor(ids, device=self.device).unsqueeze(-1), n).squeeze(-1)
        return flat.float(), tokens

    def invert_learned(self, entries: list[np.ndarray]) -> np.ndarray:
        """The learned inverter (trained on :meth:`inverter_pairs`) on the received rows of ``entries``."""
        b = self.attack
        feats, tokens = self.inverter_pairs()
        inverter = train_inverter(features=feats, tokens=tokens, vocab=self.attack_bottom.vocab, hidden=b.inverter_hidden,
                                  epochs=b.inverter_epochs, lr=b.inverter_lr, batch_size=256,
                                  negatives=b.inverter_negatives, holdout=0.2, generator=seeded_torch("sap-inverter", self.seed))
        if not entries:
            return np.zeros(0, np.int64)
        reps = torch.as_tensor(np.concatenate(entries), device=self.device)
        return learned_inversion(reps, inverter=inverter).cpu().numpy().astype(np.int64)

    @handles(Kind.QUERY_EIA)
    def on_eia(self, messages: list[Message]) -> list[Message]:
        sample, lens, flat = self.invert()
        arrays = {"sample": sample, "lengths": lens, "tokens": flat}
        if self.attack.inverter_samples:  # same observations, same order: one guess per received row
            arrays["tokens_learned"] = self.invert_learned([r for sid in sorted(self.obs_full) for r in self.obs_full[sid]])
        return [wire.reply(messages[-1], content=wire.records(**{Record.EIA: wire.arrays(**arrays)}))]

    @handles(Kind.QUERY_AIA)
    def on_aia(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        known_ids, known_y = wire.get_array(m, Record.AUX, "ids"), wire.get_array(m, Record.AUX, "values")
        seen = np.array(sorted(self.obs_pooled), dtype=np.int64)
        feats = {sid: np.mean(self.obs_pooled[sid], axis=0) for sid in seen.tolist()}
        have = np.isin(known_ids, seen)
        targets = np.setdiff1d(seen, known_ids)
        preds = {"pred": np.zeros(0, np.int64), **{f"pred_{p}": np.zeros(0, np.int64) for p in PROBES}}
        chosen = -1
        if len(targets) and have.any():  # everything it holds: pooled noisy vectors and the lengths on the wire
            pooled = np.stack([feats[int(i)] for i in seen])
            lengths = np.array([self.obs_len[int(i)] for i in seen])
            row = {int(sid): r for r, sid in enumerate(seen)}
            best, each, name = attacker_inference(pooled=pooled, lengths=lengths,
                                                  known=np.array([row[int(i)] for i in known_ids[have]]),
                                                  known_y=known_y[have], targets=np.array([row[int(i)] for i in targets]),
                                                  seed=self.seed, finetune=self._finetune_probe(seen))
            preds = {"pred": best, **{f"pred_{p}": v for p, v in each.items()}}
            chosen = PROBES.index(name)
        else:
            targets = np.zeros(0, np.int64)
        arrays = {"ids": targets, "probe": np.array([chosen], np.int64),
                  **{k: np.asarray(v).astype(np.int64) for k, v in preds.items()}}
        return [wire.reply(m, content=wire.records(**{Record.AIA: wire.arrays(**arrays)}))]

    def _finetune_probe(self, seen: np.ndarray) -> Probe | None:
        """The paper's AIA attacker on rows of ``seen``: a copy of the vendor's own top (its LoRA and
        frozen blocks as they are now) with a fresh head, LoRA + head fine-tuned on the token rows received."""
        if not self.attack.aia_epochs or self.top is None:
            return None
        reps = [self.obs_last[int(i)] for i in seen]
        top = self.top

        def make_model(num_classes: int) -> nn.Module:
            probe = copy.deepcopy(top)
            probe.requires_grad_(False)
            probe.head = nn.Linear(top.head.in_features, num_classes).to(self.device)  # type: ignore[union-attr,arg-type]
            for name, p in probe.named_parameters():
                p.requires_grad_("lora_" in name or name.startswith("head."))
            return probe

        def probe(train: np.ndarray, train_y: np.ndarray, test: np.ndarray) -> np.ndarray:
            return transformer_attribute_inference(reps=reps, train=train, train_y=train_y, test=test,
                                                   make_model=make_model, epochs=self.attack.aia_epochs,
                                                   lr=self.attack.aia_lr, batch_size=self.attack.aia_batch,
                                                   seed=derive_seed("sap-aia-probe", self.seed) >> 1, device=self.device)
        return probe

    def state(self) -> dict[str, Any]:
        if self.top is None:
            return {}
        trainable = {k: v for k, v in self.top.state_dict().items() if "lora_" in k or k.startswith("head.")}
        return {"top": trainable, "optimizer": self.optimizer.state_dict()}  # type: ignore[union-attr]

    def load_state(self, state: dict[str, Any]) -> None:
        if state and self.top is not None:
            self.top.load_state_dict(state["top"], strict=False)
            self.optimizer.load_state_dict(state["optimizer"])  # type: ignore[union-attr]
