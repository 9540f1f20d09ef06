"""Strategy = the round logic of one algorithm, registered by name.

A strategy declares its nodes (``layout``), builds them inside their hosts (``build_node``) and
drives the template round from the driver: configure -> party forward (+ mods) -> aggregate ->
server step -> backward -> party update -> evaluate. No code outside a strategy switches on
algorithm names.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from vfl.core.errors import ConfigError
from vfl.core.registry import Registry
from vfl.data.dataset import DataSource
from vfl.privacy.accounting.noise_report import DPSGD_CAVEAT
from vfl.runtime.node import Node, NodeSpec
from vfl.runtime.node_factory import NodeFactory

if TYPE_CHECKING:
    from vfl.config.run_config import RunConfig
    from vfl.runtime.grid import Grid

__all__ = ["STRATEGIES", "NoParams", "NodeFactory", "Progress", "Strategy", "register"]  # NodeFactory: re-exported

Progress = Callable[..., None]


@dataclass(frozen=True)
class NoParams:
    """Strategies without options."""


class Strategy(ABC):
    """Base class of every algorithm. Subclasses set ``name``, ``summary`` and ``Params``."""

    name: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    Params: ClassVar[type] = NoParams
    bottom_dp_refusal: ClassVar[str | None] = (
        "it has no vertical party bottom model for DP-SGD to protect, and no accounted releases to compose with")
    """Why ``privacy.bottom_dp`` is refused (None: supported, the ε is then end-to-end)."""
    headline: ClassVar[tuple[str, ...]] = ()
    """Summary/metrics keys of this strategy's privacy result (e.g. ``("leak",)``): shown by ``vfl run``'s
    final line and its epoch lines, beside the common ones (accuracy, bytes, ``epsilon``)."""
    round_name: ClassVar[str] = "epoch"
    """What one engine epoch is, in the progress lines (``tree``: one boosting round)."""
    final_keys: ClassVar[tuple[str, ...]] = ()
    """Summary keys ``vfl run``'s final line shows for this strategy besides the common ones and ``headline``."""
    server_profile: ClassVar[str] = "server"
    """Resource profile of the server-side nodes (``transport.resources.<profile>``): ``server`` or ``model_server``."""
    supports_regression: ClassVar[bool] = False
    """Trains on a regression dataset (metric rmse: float targets, one output); classifiers do not. Checked
    on the driver before anything starts (``vfl/engine/data_support.py``)."""
    supports_missing: ClassVar[bool] = False
    """Trains on tabular features with missing values (NaN cells, e.g. trees that route them); the others
    refuse such a dataset in one line before anything starts (``vfl/engine/data_support.py``)."""
    reads_party_files: ClassVar[bool] = False
    """Its nodes can read per-party files aligned by PSI (``data.parties``, ``data.split_parties``); the others
    refuse them in one line before anything starts (``simulations/data/source.py``)."""
    step_checkpoints: ClassVar[bool] = False
    """Whether ``train.checkpoint_every_steps`` applies: ``train_epoch`` runs ``epoch_steps(epoch)`` (so it can
    start after a mid-epoch checkpoint), the nodes are quiet after each ``progress`` call, their ``state``
    holds what they sum over an epoch, and so does ``driver_state`` for the driver."""

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.params = cfg.params
        self._first_step: tuple[int, int] | None = None  # (epoch, step) a mid-epoch checkpoint resumes at

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        """Cross-field checks; raise ``ConfigError`` naming the key."""

    @classmethod
    def round_unit(cls, cfg: RunConfig) -> str:
        """The word for one engine epoch of this run in the progress lines (``round_name`` by default)."""
        return cls.round_name

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        """``cfg`` with the noise parameter that reaches ``privacy.target_epsilon`` (strategies with noise)."""
        raise ConfigError("privacy.target_epsilon", f"strategy {cls.name!r} adds no calibrated noise; "
                          "allowed with: pbm (sets params.beta), ldp (sets params.sigma)")

    # ---- topology (driver) and node construction (inside hosts) ------------------------------
    @abstractmethod
    def layout(self) -> list[NodeSpec]:
        """Every node of the run. How they are packed into actors is the runtime's decision
        (``vfl.runtime.transport.placement``), not the algorithm's."""

    @abstractmethod
    def build_node(self, spec: NodeSpec, data: DataSource) -> Node:
        """Create the node for ``spec`` (runs inside its host; loads only what it needs)."""

    # ---- driver-side round logic ----------------------------------------------------------
    def prepare(self, data: DataSource) -> None:
        """Driver-side look at the data's shape (split sizes) before any node exists."""

    def align(self, grid: Grid) -> None:
        """Sample alignment before ``setup`` (private set intersection when every party brings its
        own table keyed by sample ID); nothing to do when the samples are aligned by construction."""

    def setup(self, grid: Grid) -> None:
        """One-time protocol set-up after the nodes exist (e.g. secure-aggregation keys)."""

    @abstractmethod
    def train_epoch(self, grid: Grid, *, epoch: int, progress: Progress) -> dict[str, float]:
        """Run one epoch of training; return train metrics (``train_loss``, ``train_acc``...)."""

    @abstractmethod
    def evaluate(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        """Evaluate on the test split; return metrics (``test_acc``...)."""

    def epoch_metrics(self, grid: Grid, *, epoch: int) -> dict[str, float]:
        """Metrics gathered at the end of the epoch (after training and evaluation)."""
        return {}

    def steps_per_epoch(self) -> int:
        """Batches per epoch (for progress bars)."""
        return 0

    def start_at(self, epoch: int, step: int) -> None:
        """The next ``train_epoch(epoch)`` starts at ``step`` (a resume from a mid-epoch checkpoint)."""
        self._first_step = (epoch, step)

    def epoch_steps(self, epoch: int) -> range:
        """The steps ``train_epoch(epoch)`` runs: every one, or those after a mid-epoch checkpoint's."""
        first = 0
        if self._first_step is not None and self._first_step[0] == epoch:
            first = self._first_step[1]
        self._first_step = None
        return range(first, self.steps_per_epoch())

    def driver_state(self) -> dict[str, Any]:
        """What the driver keeps between steps and epochs (JSON-able), saved with every checkpoint."""
        return {}

    def load_driver_state(self, state: dict[str, Any]) -> None:
        """Restore ``driver_state`` (a resume)."""

    def privacy_events(self, *, epoch: int) -> list[Any]:
        """Privacy events released during ``epoch`` (for the accountant)."""
        return []

    def replayable(self) -> bool:
        """Would a seeded redo of the attempt that starts now repeat its releases bit for bit? (Then the
        write-ahead ledger need not charge it.) Yes by default; a strategy whose redo may sum other inputs
        (a SecAgg sum that starts short of parties who are back after a resume) says no."""
        return True

    def summary_extra(self, grid: Grid) -> dict[str, Any]:
        """Strategy-specific keys for summary.json (formula bytes, leak metrics...)."""
        return {}

    def epsilon_assumptions(self) -> list[str]:
        """What else the printed ε assumes of the server (appended to ``epsilon_assumption``); none here."""
        return []

    def epsilon_caveats(self) -> list[str]:
        """Why the ε this run prints is not exact in floating point (empty: it is); summary.json's
        ``epsilon_not_exact``, and ``epsilon_is_guarantee`` is false when any is given."""
        return [DPSGD_CAVEAT] if self.cfg.privacy.bottom_dp is not None else []


STRATEGIES: Registry[type[Strategy]] = Registry("strategy")


def register(cls: type[Strategy]) -> type[Strategy]:
    """Class decorator: register a strategy under its ``name`` (duplicates refused)."""
    return STRATEGIES.add(cls.name, cls, cls.summary)
