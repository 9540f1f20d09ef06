"""SAP customer node: owns the texts and labels, runs the bottom, privatizes, computes the loss.

It receives the bottom from the vendor once, ηdχ-privatizes every representation it releases
(snapping to the nearest token embedding for split 0; CTI lowers the noise on class-skewed
tokens) and answers the vendor's logits with dLoss/dlogits. The labels are not sent, but that gradient
(softmax − one-hot) names each one: its only negative entry is the label, so the vendor knows
every training label exactly. SAP protects the texts, not the labels.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.metrics import confusion, glue_scores
from parties.llm.common.tokens import encode
from parties.llm.common.wire import pack
from parties.llm.sap import cti
from parties.llm.sap.split import BottomModel, build_bottom
from parties.llm.sap.wire import VENDOR_ID, Kind, Mode, Record, read_step, send
from vfl.core.errors import ProtocolError
from vfl.core.rng import NodeNoise, NoiseSource, derive_seed
from vfl.data.sampling import Schedule
from vfl.privacy.mechanisms.dchi import calibrate_eta, privatize
from vfl.privacy.mechanisms.santext import santext
from vfl.runtime import message as wire
from vfl.runtime.node import Node, NodeSpec, handles


@dataclass(frozen=True)
class Privatizer:
    """The customer's release policy: η (None = plain, "auto" = calibrated to ``eia_target``), nearest-token
    snapping, CTI, and SanText token substitution before the bottom (``santext_epsilon``)."""

    eta: float | str | None
    snap: bool = True
    cti: bool = False
    cti_fraction: float = 0.01
    cti_factor: float = 0.0  # SAP Algorithm 1: contributing tokens get no noise
    cti_smoothing: float = 1.0
    eia_target: float = 0.1  # eta "auto": the nearest-neighbour EIA success it aims at
    santext_epsilon: float | None = None


def resolve_eta(eta: float | str | None, *, vocab: torch.Tensor, target: float, seed: int
                ) -> tuple[float | None, float | None]:
    """(η, the nearest-neighbour EIA success measured at it): "auto" is calibrated on the public table
    with a public, seeded sample, so customer and (Kerckhoffs) vendor arrive at the same η."""
    if eta != "auto":
        return (None if eta is None else float(eta)), None
    chosen, success, _ = calibrate_eta(table=vocab.detach().float(), target=target,
                                       noise=NoiseSource.seeded("sap-eta-calibration", seed))
    return chosen, success


def sanitize(ids: np.ndarray, *, vocab: torch.Tensor, epsilon: float | None, noise: NoiseSource,
             keep: tuple[int, ...]) -> np.ndarray:
    """The token ids the bottom sees: SanText draws (special tokens and padding kept), or ``ids``."""
    if epsilon is None:
        return ids
    return santext(ids, table=vocab.detach().float(), epsilon=epsilon, noise=noise, keep=keep)


class SapCustomer(Node):
    """Party node of SAP (data owner)."""

    def __init__(self, spec: NodeSpec, *, texts: tuple[np.ndarray, np.ndarray], labels: tuple[np.ndarray, np.ndarray],
                 num_classes: int, tokenizer: Any, max_len: int, split: int, frozen: bool, privatizer: Privatizer,
                 schedule: Schedule, make_optimizer: OptimizerFactory, seed: int, upload_chunk: int = 256,
                 attribute: np.ndarray | None = None, noise_rng: str = "crypto", device: str = "cpu",
                 pairs: tuple[np.ndarray | None, np.ndarray | None] = (None, None), token_types: bool = False
                 ) -> None:
        super().__init__(spec)
        self.split, self.frozen, self.priv, self.schedule = split, frozen, privatizer, schedule
        self.seed, self.device, self.upload_chunk = seed, device, upload_chunk
        self.node_noise = NodeNoise(noise_rng, seed=seed, node=spec.node_id)  # built here, never sent
        self.make_optimizer, self.num_classes = make_optimizer, num_classes
        self.y_train, self.y_test = (np.asarray(y, dtype=np.int64) for y in labels)
        self.attribute = attribute
        self.special = sorted(int(i) for i in tokenizer.all_special_ids)
        tr = encode(tokenizer, texts[0], max_len, pairs=pairs[0], types=token_types and pairs[0] is not None)
        te = encode(tokenizer, texts[1], max_len, pairs=pairs[1], types=token_types and pairs[1] is not None)
        self.ids_train, self.len_train, self.ids_test, self.len_test = tr.ids, tr.lengths, te.ids, te.lengths
        self.inputs = {"train": tr.ids, "eval": te.ids}  # what enters the bottom (SanText: substituted at setup)
        self.eta: float | None = None if privatizer.eta == "auto" else privatizer.eta  # type: ignore[assignment]
        self.eta_success: float | None = None  # eta auto: the calibration's measured NN-EIA success
        self.types = {"train": tr.types, "eval": te.types}  # token types of sentence pairs: into the bottom
        self.contributing = np.zeros(0, dtype=np.int64)
        if privatizer.cti and privatizer.eta is not None:
            seqs = [row[:n] for row, n in zip(self.ids_train, self.len_train, strict=True)]
            counts = cti.class_token_counts(sequences=seqs, labels=self.y_train, num_classes=num_classes,
                                            vocab_size=len(tokenizer), ignore=self.special)
            ui = cti.utility_importance(counts, smoothing=privatizer.cti_smoothing)
            self.contributing = cti.contributing_tokens(ui=ui, counts=counts, fraction=privatizer.cti_fraction)
        self.bottom: BottomModel | None = None
        self.optimizer: torch.optim.Optimizer | None = None
        self._pending: tuple[int, int, torch.Tensor] | None = None  # (epoch, step, released reps with graph)
        self.reset_metrics()

    def reset_metrics(self) -> None:
        self.train_stats = {"loss": 0.0, "correct": 0, "count": 0}
        self.step_losses: list[float] = []  # each training step's loss since the last metrics query (the loss plot)
        self.eval_stats = {"correct": 0, "count": 0}
        self.eval_confusion = np.zeros((self.num_classes, self.num_classes), np.int64)

    # ---- privatization ----------------------------------------------------------------------
    def _noise(self, phase: str, epoch: int, step: int) -> NoiseSource:
        """The dχ noise of one release, from this node's own source (the vendor cannot rebuild it)."""
        return self.node_noise.round("dchi", phase=phase, epoch=epoch, step=step)

    def release(self, ids: np.ndarray, lengths: np.ndarray, *, noise: NoiseSource,
                types: np.ndarray | None = None) -> torch.Tensor:
        """Bottom outputs of real tokens, privatized, packed (T, d); keeps the graph when training."""
        if self.bottom is None:
            raise ProtocolError("customer has no bottom model yet (the vendor's query.sap_bottom not received)")
        width = int(lengths.max())
        x = torch.as_tensor(ids[:, :width], device=self.device)
        n = torch.as_tensor(lengths, device=self.device)
        mask = (torch.arange(width, device=self.device).unsqueeze(0) < n.unsqueeze(1)).to(torch.long)
        tt = None if types is None else torch.as_tensor(types[:, :width], device=self.device)
        flat = pack(self.bottom(x, mask, tt), n)
        if self.eta is None:
            return flat
        tokens = pack(x.unsqueeze(-1), n).squeeze(-1).cpu().numpy()
        scale = torch.as_tensor(cti.noise_scale(tokens, contributing=self.contributing, factor=self.priv.cti_factor),
                                device=self.device)
        eta = torch.where(scale > 0, self.eta / scale.clamp_min(1e-30), torch.full_like(scale, float("inf")))
        table = self.bottom.vocab if self.split == 0 and self.priv.snap else None
        out, _ = privatize(flat, eta=eta, noise=noise, table=table)
        return out

    def _reps(self, ids: np.ndarray, lengths: np.ndarray, *, noise: NoiseSource, grad: bool,
              types: np.ndarray | None = None) -> tuple[torch.Tensor, dict[str, np.ndarray]]:
        with torch.set_grad_enabled(grad):
            out = self.release(ids, lengths, noise=noise, types=types)
        return out, {"h": out.detach().cpu().numpy().astype(np.float32, copy=False),
                     "lengths": lengths.astype(np.int32)}

    # ---- setup ------------------------------------------------------------------------------
    @handles(Kind.BOTTOM)
    def on_bottom(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        config_json = str(wire.config_value(m, Record.MODEL, "config"))
        state = {k: wire.from_array(a) for k, a in m.content.array_records[Record.WEIGHTS].items()}
        self.bottom = build_bottom(config_json=config_json, split=self.split, state=state).to(self.device)
        torch.manual_seed(derive_seed("sap-dropout", self.seed, self.node_id) >> 1)  # reproducible dropout
        vocab = self.bottom.vocab
        self.eta, self.eta_success = resolve_eta(self.priv.eta, vocab=vocab, target=self.priv.eia_target,
                                                 seed=self.seed)
        if self.priv.santext_epsilon is not None:  # sanitized once per run, from this node's own noise
            for phase, ids in (("train", self.ids_train), ("eval", self.ids_test)):
                self.inputs[phase] = sanitize(ids, vocab=vocab, epsilon=self.priv.santext_epsilon,
                                              noise=self._noise(f"santext-{phase}", 0, 0), keep=tuple(self.special))
        if self.frozen:
            self.bottom.eval().requires_grad_(False)
        else:
            self.optimizer = self.make_optimizer(list(self.bottom.parameters()))
        return []

    # ---- frozen bottom: release each split once ---------------------------------------------
    def _upload(self, kind: str, phase: str, ids: np.ndarray, lengths: np.ndarray, epoch: int) -> list[Message]:
        out = []
        for chunk, start in enumerate(range(0, len(ids), self.upload_chunk)):
            sl = slice(start, start + self.upload_chunk)
            types = self.types[phase]
            _, arrs = self._reps(ids[sl], lengths[sl], noise=self._noise(f"{phase}-upload", 0, chunk), grad=False,
                                 types=None if types is None else types[sl])
            out.append(send(kind, src=self.node_id, dst=VENDOR_ID, to=None, phase=phase, epoch=epoch, step=chunk,
                            mode=Mode.UPLOAD, offset=start, records={Record.REPS: arrs}))
        return out

    @handles(Kind.TRAIN_UPLOAD)
    def on_train_upload(self, messages: list[Message]) -> list[Message]:
        epoch = read_step(messages[-1])[0]
        return self._upload(Kind.TRAIN_REPS, "train", self.inputs["train"], self.len_train, epoch)

    @handles(Kind.EVAL_UPLOAD)
    def on_eval_upload(self, messages: list[Message]) -> list[Message]:
        epoch = read_step(messages[-1])[0]
        return self._upload(Kind.EVAL_REPS, "eval", self.inputs["eval"], self.len_test, epoch)

    # ---- trainable bottom: a fresh privatized batch per step ---------------------------------
    @handles(Kind.TRAIN_FORWARD)
    def on_train_forward(self, messages: list[Message]) -> list[Message]:
        epoch, step, _, _ = read_step(messages[-1])
        sel = self.schedule.train_ids(epoch, step)
        self.bottom.train()  # type: ignore[union-attr]
        types = self.types["train"]
        out, arrs = self._reps(self.inputs["train"][sel], self.len_train[sel], noise=self._noise("train", epoch, step),
                               grad=True, types=None if types is None else types[sel])
        self._pending = (epoch, step, out)
        return [send(Kind.TRAIN_REPS, src=self.node_id, dst=VENDOR_ID, to=messages[-1], phase="train", epoch=epoch,
                     step=step, records={Record.REPS: arrs})]

    @handles(Kind.EVAL_FORWARD)
    def on_eval_forward(self, messages: list[Message]) -> list[Message]:
        epoch, step, _, _ = read_step(messages[-1])
        sel = self.schedule.test_ids(step)
        self.bottom.eval()  # type: ignore[union-attr]
        types = self.types["eval"]
        _, arrs = self._reps(self.inputs["eval"][sel], self.len_test[sel], noise=self._noise("eval", epoch, step),
                             grad=False, types=None if types is None else types[sel])
        return [send(Kind.EVAL_REPS, src=self.node_id, dst=VENDOR_ID, to=messages[-1], phase="eval",
                     epoch=epoch, step=step, records={Record.REPS: arrs})]

    @handles(Kind.TRAIN_BOTTOM_GRAD)
    def on_bottom_grad(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        epoch, step, _, _ = read_step(m)
        if self._pending is None or self._pending[:2] != (epoch, step):
            raise ProtocolError(f"customer: bottom gradient for {epoch}:{step} but pending "
                                f"{self._pending[:2] if self._pending else None}")
        out = self._pending[2]
        g = torch.as_tensor(np.array(wire.get_array(m, Record.BGRAD, "g")), device=self.device).reshape(out.shape)
        self.optimizer.zero_grad(set_to_none=True)  # type: ignore[union-attr]
        out.backward(g)
        self.optimizer.step()  # type: ignore[union-attr]
        self._pending = None
        return []

    # ---- loss on the customer (dLoss/dlogits exposes every label to the vendor) -------------
    @handles(Kind.TRAIN_LOGITS)
    def on_train_logits(self, messages: list[Message]) -> list[Message]:
        m = messages[-1]
        epoch, step, _, _ = read_step(m)
        logits = torch.tensor(wire.get_array(m, Record.LOGITS, "z"), requires_grad=True)
        y = torch.as_tensor(self.y_train[self.schedule.train_ids(epoch, step)])
        loss = torch.nn.functional.cross_entropy(logits, y)
        loss.backward()
        grad = logits.grad
        if grad is None:  # cannot happen: cross-entropy depends on every logit
            raise RuntimeError(f"step {step}: the loss has no gradient for the vendor's logits")
        s = self.train_stats
        self.step_losses.append(float(loss.detach()))
        s["loss"] += float(loss.detach()) * len(y)
        s["correct"] += int((logits.detach().argmax(1) == y).sum())
        s["count"] += len(y)
        return [send(Kind.TRAIN_GRAD, src=self.node_id, dst=VENDOR_ID, to=m, phase="train", epoch=epoch, step=step,
                     records={Record.GRAD: {"g": grad.numpy().astype(np.float32, copy=False)}})]

    @handles(Kind.EVAL_LOGITS)
    def on_eval_logits(self, messages: list[Message]) -> list[Message]:
        for m in messages:
            _, step, _, _ = read_step(m)
            z = wire.get_array(m, Record.LOGITS, "z")
            y = self.y_test[self.schedule.test_ids(step)]
            self.eval_stats["correct"] += int((z.argmax(1) == y).sum())
            self.eval_stats["count"] += len(y)
            self.eval_confusion += confusion(truth=y, pred=z.argmax(1), num_classes=self.num_classes)
        return []

    # ---- control plane (the experimenter's view; not part of the protocol) -------------------
    @handles(Kind.QUERY_METRICS)
    def on_metrics(self, messages: list[Message]) -> list[Message]:
        out: dict[str, float] = {}
        s, e = self.train_stats, self.eval_stats
        if s["count"]:
            out.update(train_loss=s["loss"] / s["count"], train_acc=s["correct"] / s["count"])
        if e["count"]:
            out["test_acc"] = e["correct"] / e["count"]
            scores = glue_scores(self.eval_confusion)
            out.update(test_f1=scores["f1"], test_mcc=scores["mcc"])
        out["cti_tokens"] = len(self.contributing)
        if self.eta is not None:
            out["eta_used"] = self.eta
        if self.eta_success is not None:
            out["eta_calibrated_eia"] = self.eta_success
        if self.priv.santext_epsilon is not None:  # share of real tokens SanText replaced (utility cost)
            real = ~np.isin(self.ids_train, self.special)
            out["santext_changed"] = float((self.inputs["train"] != self.ids_train)[real].mean()) if real.any() else 0.0
        records: dict[str, Any] = {Record.METRICS: wire.metrics(**out),
                                   Record.STEP_LOSS: wire.arrays(loss=np.asarray(self.step_losses, dtype=np.float64))}
        self.reset_metrics()
        return [wire.reply(messages[0], content=wire.records(**records))]

    @handles(Kind.QUERY_TRUTH)
    def on_truth(self, messages: list[Message]) -> list[Message]:
        """Ground truth for scoring attacks: true token ids of asked samples, the attribute column."""
        m = messages[-1]
        ids = wire.get_array(m, Record.ASK, "ids").astype(np.int64)
        lengths = self.len_train[ids]
        tokens = np.concatenate([self.ids_train[i, :n] for i, n in zip(ids, lengths, strict=True)]) if len(ids) \
            else np.zeros(0, np.int64)
        arrs = {"tokens": tokens, "lengths": lengths, "special": np.array(self.special, dtype=np.int64)}
        if self.attribute is not None:
            arrs["attribute"] = self.attribute.astype(np.int64)
        return [wire.reply(m, content=wire.records(**{Record.TRUTH: wire.arrays(**arrs)}))]

    def state(self) -> dict[str, Any]:
        if self.frozen or self.bottom is None:
            return {}
        return {"bottom": self.bottom.state_dict(), "optimizer": self.optimizer.state_dict()}  # type: ignore[union-attr]

    def load_state(self, state: dict[str, Any]) -> None:
        if state and self.bottom is not None and self.optimizer is not None:
            self.bottom.load_state_dict(state["bottom"])
            self.optimizer.load_state_dict(state["optimizer"])

