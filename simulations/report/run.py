"""What a finished run directory holds, loaded for reports and post-hoc attacks.

The experimenter's side: the resolved config, metrics, summary, recorded views, the accountant
ledger of the last checkpoint, and — rebuilt from the config's data source — the ground truth
(labels, every party's features) that SCORES attacks. Attackers never get the ground truth as
input, only what their node received plus the auxiliary knowledge each attack declares.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

import strategies  # noqa: F401  (registers the strategies the config may name)
from simulations.data.party_tables import AlignedTables, PartyTableSource
from simulations.data.source import ConfigDataSource, make_data_source
from strategies.base.psi import STATE_KEY
from strategies.base.vertical import VerticalStrategy
from vfl.core.errors import ConfigError, DataError, RunFileError
from vfl.core.rng import NoiseSource
from vfl.data.dataset import Dataset, LabelShard, PartyShard
from vfl.data.sampling import Schedule
from vfl.engine.rundir import METRICS, SUMMARY, RunDir, read_summary
from vfl.engine.schema import RunConfig, load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy import Accountant
from vfl.runtime.node import state_from_bytes
from vfl.runtime.views import NodeView, load_views


class Skipped(Exception):
    """An attack that does not apply to this run (the message says why and what would enable it)."""


@dataclass
class FusionModel:
    """The trained VFL model rebuilt from a checkpoint: every party's bottom + the server's head."""

    strategy: VerticalStrategy
    bottoms: list[nn.Module]
    head: nn.Module
    shapes: list[tuple[int, ...]]

    def embeddings(self, xs: list[np.ndarray]) -> list[torch.Tensor]:
        with torch.no_grad():
            return [b(torch.as_tensor(np.asarray(x, np.float32))) for b, x in zip(self.bottoms, xs, strict=True)]

    def logits(self, xs: list[np.ndarray], *, noise: NoiseSource | None = None) -> torch.Tensor:
        """Head output on the plain fused embeddings, or (``noise`` given) on the mechanism's release."""
        embs = self.embeddings(xs)
        with torch.no_grad():
            fused = (self.strategy.release(embs, noise=noise) if noise is not None
                     else VerticalStrategy.release(self.strategy, embs, noise=NoiseSource.fresh()))
            return self.head(fused.float())

    def split(self, flat: torch.Tensor) -> list[np.ndarray]:
        """A (N, sum of features) tensor back into the parties' input arrays."""
        out, start = [], 0
        for shape in self.shapes:
            n = int(np.prod(shape))
            out.append(flat[:, start:start + n].reshape(len(flat), *shape).numpy())
            start += n
        return out

    def predict_flat(self, flat: torch.Tensor) -> torch.Tensor:
        return self.logits(self.split(flat))


@dataclass
class RunArtifacts:
    path: Path
    cfg: RunConfig
    summary: dict[str, Any]
    metrics: list[dict[str, Any]] = field(default_factory=list)

    # ---- what the run left -------------------------------------------------------------------
    @cached_property
    def views(self) -> dict[str, NodeView]:
        return load_views(self.path)

    @property
    def has_views(self) -> bool:
        return (self.path / "views" / "index.json").exists()

    def view(self, name: str) -> NodeView:
        if not self.has_views:
            raise Skipped("the run recorded no views (rerun with --set privacy.record_views=true)")
        if name not in self.views:
            raise Skipped(f"no recorded view of node {name!r} (views of: {', '.join(sorted(self.views))})")
        return self.views[name]

    @cached_property
    def engine_state(self) -> dict[str, Any] | None:
        ckpt = RunDir(self.path).latest_checkpoint()
        return None if ckpt is None else ckpt[1]

    @cached_property
    def accountant(self) -> Accountant | None:
        """The checkpoint's accountant plus every release the write-ahead ledger holds after it (a
        run killed mid-epoch has released more than its checkpoint says)."""
        from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger, restore_accountant

        state = self.engine_state or {}
        acc, _ = restore_accountant(saved=state.get("accountant"), covered=int(state.get("privacy_ledger_seq", 0)),
                                    ledger=ReleaseLedger(self.path / LEDGER_FILE))
        return acc

    # ---- the experimenter's ground truth (scores attacks; never an attacker input) -----------
    @cached_property
    def data(self) -> ConfigDataSource | AlignedTables:
        """The registered dataset, or, for per-party files, every file joined on the rows the run aligned
        (the split its checkpoint keeps), in the order the nodes bound them."""
        d = self.cfg.data
        if not (d.parties or d.split_parties):
            return ConfigDataSource.from_config(self.cfg)
        source = make_data_source(self.cfg)
        ckpt = RunDir(self.path).latest_checkpoint()
        split = next((st[STATE_KEY] for b in (ckpt[0].values() if ckpt else ()) if (st := state_from_bytes(b)).get(
            STATE_KEY)), None)
        if split is None or not isinstance(source, PartyTableSource):
            raise Skipped("per-party files: no checkpoint holds the aligned rows to score the attacks with")
        return source.aligned(list(split["train_ids"]), list(split["test_ids"]), name=str(self.cfg.dataset))

    @cached_property
    def dataset(self) -> Dataset:
        return self.data.dataset()

    @cached_property
    def parts(self) -> tuple[list[PartyShard], LabelShard]:
        return self.data.partition()

    @cached_property
    def strategy(self) -> VerticalStrategy:
        s = STRATEGIES.get(self.cfg.strategy, "strategy")(self.cfg)
        if not isinstance(s, VerticalStrategy):
            raise Skipped(f"strategy {self.cfg.strategy!r} is not a vertical strategy")
        s.prepare(self.data)
        return s

    @cached_property
    def schedule(self) -> Schedule:
        labels = self.parts[1]
        return self.strategy.schedule(len(labels.y_train), len(labels.y_test))

    @property
    def is_vertical(self) -> bool:
        return issubclass(STRATEGIES.get(self.cfg.strategy, "strategy"), VerticalStrategy)

    @cached_property
    def model(self) -> FusionModel:
        """Bottoms and head as in the last checkpoint (built by the strategy, states loaded)."""
        ckpt = RunDir(self.path).latest_checkpoint()
        if ckpt is None:
            raise Skipped("the run has no checkpoint to rebuild the trained model from")
        states = ckpt[0]
        bottoms, head = [], None
        for spec in self.strategy.layout():
            with torch.random.fork_rng(devices=[]):
                node = self.strategy.build_node(spec, self.data)
            node.load_state(state_from_bytes(states[spec.node_id]))
            if spec.is_server:
                head = node.head.eval()  # type: ignore[attr-defined]
            else:
                bottoms.append(node.bottom.eval())  # type: ignore[attr-defined]
        if head is None:
            raise DataError(f"{self.path}: checkpoint without the server's head")
        shapes = [s.input_shape for s in self.parts[0]]
        return FusionModel(self.strategy, bottoms, head, shapes)


def report_noise(run: RunArtifacts, purpose: str) -> NoiseSource:
    """The mechanism's noise when the report re-plays a release: drawn from the run seed, so one run's
    report is the same every time (these draws reach no node; the run's own releases used fresh noise)."""
    return NoiseSource.seeded("report", purpose, run.cfg.seed)


def evaluation_noise(run: RunArtifacts, draw: int = 0) -> NoiseSource:
    """The report's evaluation of the test set through the mechanism, draw ``draw``: draw 0 is the
    "clean" evaluation the robustness attacks compare with (each attacked evaluation starts the same
    stream again: common random numbers, so a drop is the attack's and not the noise's)."""
    return NoiseSource.seeded("report", "evaluation", run.cfg.seed, draw)


def load_run(path: str | Path) -> RunArtifacts:
    """A run directory with its config and summary (``ConfigError`` naming the path if it is not one)."""
    p = Path(path)
    rd = RunDir(p)
    if not (p / "config.resolved.yaml").exists():
        raise ConfigError("RUN_DIR", f"{p} is not a run directory (no config.resolved.yaml)")
    cfg = load_run_config(rd.read_config(key="RUN_DIR"))
    summary: dict[str, Any] = read_summary(p / SUMMARY) if (p / SUMMARY).exists() else {}
    metrics = rd.read_metrics()
    epochs = summary.get("epochs")
    if isinstance(epochs, int) and {r["epoch"] for r in metrics} != set(range(epochs)):
        have = sorted({r["epoch"] for r in metrics})
        raise RunFileError(f"{p / METRICS} holds the rows of epochs {have} but {p / SUMMARY} reports {epochs} "
                           "epoch(s): the file was deleted, truncated or edited, so the report would lose rows")
    return RunArtifacts(p, cfg, summary, metrics)
