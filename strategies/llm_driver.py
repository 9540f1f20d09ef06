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

import torch
from flwr.common import Message

from parties.llm.common.backbone import OptimizerFactory
from vfl import message as wire
from vfl.data import Dataset
from vfl.errors import ConfigError, ProtocolError
from vfl.grid import Grid
from vfl.message import round_tag
from vfl.optim import make_optimizer
from vfl.sampling import Schedule, num_batches
from vfl.schema import RunConfig, TrainConfig
from vfl.strategy import Strategy


def optimizer_factory(t: TrainConfig) -> OptimizerFactory:
    """``train.optimizer`` over the given parameters: Adam, AdamW or SGD (momentum) with ``train.lr``
    and ``train.weight_decay``."""

    def make(params: list[torch.nn.Parameter]) -> torch.optim.Optimizer:
        return make_optimizer(params, name=t.optimizer, lr=t.lr, momentum=t.momentum, weight_decay=t.weight_decay)

    return make


class LlmDriver(Strategy):
    """Driver base of the split-LLM strategies: one party, text data, shared conversation helpers."""

    server_role = "model_server"  # the vendor / model servers: transport.resources.model_server

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

    def _model_info(self) -> tuple[str, Any]:
        if self._model is None:
            from transformers import AutoConfig

            from parties.llm.common.arch import arch_of_config
            from parties.llm.common.backbone import resolve_model_dir

            p = self.params
            path = str(resolve_model_dir(p.model_dir, allow_download=p.allow_download))
            self._model = (path, arch_of_config(AutoConfig.from_pretrained(path, local_files_only=True)))
        return self._model

    def _text_dataset(self, ds: Dataset) -> Dataset:
        """``ds`` if it is text, else a ConfigError naming ``dataset``."""
        if ds.modality != "text":
            raise ConfigError("dataset", f"{ds.name} is {ds.modality!r}; {self.name} needs a text dataset")
        return ds

    def _schedule(self, num_train: int | None = None, num_test: int | None = None) -> Schedule:
        """The seeded batch schedule (both sides derive it; no sample ids cross the wire)."""
        t = self.cfg.train
        return Schedule(seed=self.cfg.seed, num_train=self._sizes[0] if num_train is None else num_train,
                        num_test=self._sizes[1] if num_test is None else num_test, batch_size=t.batch_size,
                        eval_batch_size=max(t.batch_size, t.eval_batch_size))

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
                 ) -> dict[str, float]:
        """A node's metric record (``record``) as floats."""
        rep = self._query(grid, kind, node, epoch, **records)
        return wire.metric_floats(rep.content.metric_records[record])
