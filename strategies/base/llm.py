"""What the split-LLM strategies' drivers share: control messages, conversations, the optimizer.

``LlmDriver`` is the base of ``sap`` and the P3EFT family (``p3eft``, ``head-only``, ``split-lora``,
``dcor``, ``pslf``): one party (the label owner), text data only, the seeded batch schedule both
sides derive, and the driver's three ways to talk to the nodes (``_control``, ``_converse``,
``_query``). ``optimizer_factory`` is the one mapping of ``train.optimizer`` to torch for the
LLM nodes: ``adam`` is ``torch.optim.Adam``, ``adamw`` is ``torch.optim.AdamW`` (decoupled weight
decay, Loshchilov & Hutter, ICLR 2019), ``sgd`` is ``torch.optim.SGD``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.common import Message

from parties.llm.common.backbone import OptimizerFactory
from parties.llm.common.wire import Record
from vfl.core.errors import ConfigError, DataError, ProtocolError
from vfl.data.dataset import Dataset
from vfl.data.sampling import Schedule, num_batches
from vfl.engine.schema import RunConfig, TrainConfig
from vfl.engine.strategy import Strategy
from vfl.runtime import message as wire
from vfl.runtime.grid import Grid
from vfl.runtime.message import round_tag
from vfl.runtime.optim import attach_schedule, make_optimizer, warmup_count

TEXT_PAIR = "text_pair"  # Dataset.extras key of the second text of sentence-pair tasks (train/test suffixed)


def text_pairs(ds: Dataset) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The second texts of a sentence-pair dataset (``extras['text_pair_train'/'_test']``), or (None, None)."""
    tr, te = ds.extras.get(f"{TEXT_PAIR}_train"), ds.extras.get(f"{TEXT_PAIR}_test")
    if (tr is None) != (te is None):
        raise DataError(f"{ds.name}: extras has only one of {TEXT_PAIR}_train / {TEXT_PAIR}_test")
    if tr is None or te is None:
        return None, None
    if len(tr) != ds.num_train or len(te) != ds.num_test:
        raise DataError(f"{ds.name}: {len(tr)}/{len(te)} text pairs for {ds.num_train}/{ds.num_test} texts")
    return np.asarray(tr, dtype=object), np.asarray(te, dtype=object)


def optimizer_factory(t: TrainConfig, total_steps: int | None = None) -> OptimizerFactory:
    """``train.optimizer`` over the given parameters: Adam, AdamW or SGD (momentum) with ``train.lr``
    and ``train.weight_decay``; with ``total_steps`` (the run's optimizer steps) also ``train.lr_schedule``
    and its warmup."""

    def make(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        opt = make_optimizer(params, name=t.optimizer, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)
        return opt if total_steps is None else schedule_lr(t, opt, total_steps)

    return make


def schedule_lr(t: TrainConfig, opt: torch.optim.Optimizer, total_steps: int) -> torch.optim.Optimizer:
    """``opt`` with ``train.lr_schedule`` over ``total_steps`` optimizer steps after ``train.warmup_steps``
    (or ``warmup_ratio`` of them)."""
    warmup = warmup_count(total=total_steps, steps=t.warmup_steps, ratio=t.warmup_ratio)
    return attach_schedule(opt, schedule=t.lr_schedule, warmup=warmup, total=total_steps)


class LlmDriver(Strategy):
    """Driver base of the split-LLM strategies: one party, text data, shared conversation helpers."""

    server_profile = "model_server"  # the vendor / model servers: transport.resources.model_server
    supports_lr_schedule = True  # train.lr_schedule / warmup_steps / warmup_ratio (vfl/engine/schema.py)

    def __init__(self, cfg: RunConfig) -> None:
        super().__init__(cfg)
        self._sizes = (0, 0, 2)  # num_train, num_test, num_classes (learnt in prepare)
        self._last: dict[str, Any] = {}
        self._model: tuple[str, Any] | None = None  # (resolved directory, architecture adapter)

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        if cfg.num_parties != 1:
            raise ConfigError("num_parties", f"got {cfg.num_parties}; {cfg.strategy} has exactly one "
                              "label-owning party (set 1)")

    def model_path(self) -> str:
        """``params.model_dir`` resolved to a local directory (ConfigError if there is none)."""
        return self._model_info()[0]

    def model_arch(self) -> Any:
        """The architecture adapter (``parties.llm.common.arch``) of the configured model."""
        return self._model_info()[1]

    def lora_spec(self) -> Any:
        """The ``LoraSpec`` of ``params`` (``strategies/base/llm_params.py:LoraParams``) for this model's
        family (``lora_targets`` empty: its defaults); None for a strategy without adapters."""
        from parties.llm.common.lora import lora_spec_for

        p = self.params
        if not hasattr(p, "lora_rank"):
            return None
        return lora_spec_for(self.model_arch(), rank=p.lora_rank, alpha=p.lora_alpha,
                             dropout=getattr(p, "lora_dropout", 0.0), targets=tuple(p.lora_targets))

    def _model_info(self) -> tuple[str, Any]:
        if self._model is None:
            from transformers import AutoConfig

            from parties.llm.common.backbone import resolve_model_dir
            from parties.llm.common.loading import arch_of_config

            p = self.params
            path = str(resolve_model_dir(p.model_dir, allow_download=p.allow_download))
            stack = getattr(p, "t5_stack", "encoder")  # split-LLM strategies: T5 encoder alone or whole
            self._model = (path, arch_of_config(AutoConfig.from_pretrained(path, local_files_only=True), stack=stack))
        return self._model

    def _text_dataset(self, ds: Dataset) -> Dataset:
        """``ds`` if it is text (single texts or sentence pairs) and ``params.max_len`` fits the model's
        position table, else a ConfigError naming the key."""
        from transformers import AutoConfig

        from parties.llm.common.tokens import check_max_len

        if ds.modality != "text":
            raise ConfigError("dataset", f"{ds.name} is {ds.modality!r}; {self.name} needs a text dataset")
        text_pairs(ds)  # both splits or neither
        t = self.cfg.train
        total = self.total_steps(ds.num_train)
        if warmup_count(total=total, steps=t.warmup_steps, ratio=t.warmup_ratio) >= total:
            key, got = ("train.warmup_steps", t.warmup_steps) if t.warmup_steps else ("train.warmup_ratio", t.warmup_ratio)
            raise ConfigError(key, f"got {got}; the warmup would take all {total} optimizer steps of the run "
                              f"(train.epochs × steps per epoch), allowed: fewer than {total} warmup steps")
        check_max_len(AutoConfig.from_pretrained(self.model_path(), local_files_only=True), int(self.params.max_len))
        return ds

    def token_types(self, ds: Dataset) -> bool:
        """Send token types: the data are sentence pairs and the model has a segment embedding."""
        from transformers import AutoConfig

        from parties.llm.common.tokens import uses_token_types

        return text_pairs(ds)[0] is not None and uses_token_types(
            AutoConfig.from_pretrained(self.model_path(), local_files_only=True))

    def _schedule(self, num_train: int | None = None, num_test: int | None = None) -> Schedule:
        """The seeded batch schedule (both sides derive it; no sample ids cross the wire)."""
        t = self.cfg.train
        return Schedule(seed=self.cfg.seed, num_train=self._sizes[0] if num_train is None else num_train,
                        num_test=self._sizes[1] if num_test is None else num_test, batch_size=t.batch_size,
                        eval_batch_size=max(t.batch_size, t.eval_batch_size))

    def total_steps(self, num_train: int) -> int:
        """Optimizer steps of the whole run (what the lr schedule spans)."""
        return self.cfg.train.epochs * num_batches(num_samples=num_train, batch_size=self.cfg.train.batch_size)

    def steps_per_epoch(self) -> int:
        return num_batches(num_samples=self._sizes[0], batch_size=self.cfg.train.batch_size)

    # ---- talking to the nodes ---------------------------------------------------------------
    @staticmethod
    def _control(kind: str, node: int, tag: str, **records: Any) -> Message:
        """A driver control message to ``node`` (src = dst: it comes from the node's own driver)."""
        return wire.make(kind, src=node, dst=node, round=tag, content=wire.records(**records) if records else None)

    @staticmethod
    def _converse(grid: Grid, m: Message, max_hops: int = 16) -> None:
        """One driver message, then route replies until every node is quiet (the ledger counts
        every wire, by kind too)."""
        grid.run_until_quiet([m], max_hops=max_hops)

    def _query(self, grid: Grid, kind: str, node: int, epoch: int, **records: Any) -> Message:
        """One control-plane question to ``node`` and its single reply."""
        replies = grid.send([self._control(kind, node, round_tag(epoch, 0, "control"), **records)])
        if len(replies) != 1:
            raise ProtocolError(f"{kind}: expected one reply, got {len(replies)}")
        return replies[0].open()

    def _metrics(self, grid: Grid, node: int, epoch: int, *, kind: str, record: str, **records: Any
                 ) -> dict[str, Any]:
        """A node's metric record (``record``) as floats, with ``step_loss`` when the reply has the
        steps' losses (the label holder's training metrics)."""
        rep = self._query(grid, kind, node, epoch, **records)
        out: dict[str, Any] = wire.metric_floats(rep.content.metric_records[record])
        if wire.has_array(rep, Record.STEP_LOSS, "loss"):
            out["step_loss"] = step_windows(wire.get_array(rep, Record.STEP_LOSS, "loss"),
                                            every=self.cfg.train.log_every_steps,
                                            first_step=epoch * self.steps_per_epoch())
        return out


def step_windows(losses: Any, *, every: int, first_step: int) -> list[list[float]]:
    """``[[step, mean loss], ...]``: the mean of each ``every`` consecutive steps' losses (the last window
    may be shorter), ``step`` the 1-based run step that closes it (``first_step`` steps came before)."""
    values = [float(v) for v in losses]
    return [[first_step + min(i + every, len(values)), sum(values[i:i + every]) / len(values[i:i + every])]
            for i in range(0, len(values), every)]
