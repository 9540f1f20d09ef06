"""Glue between the engine's per-epoch callback and the configured tracker (``tracking:``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfl.engine import Engine, EpochCallback
from vfl.rundir import RunDir
from vfl.schema import RunConfig
from vfl.tracking import Tracker, make_tracker


@dataclass
class TrackedEpochs:
    """Calls the caller's ``on_epoch_end`` and logs the committed row to the tracker."""

    tracker: Tracker | None
    inner: EpochCallback | None

    def on_epoch_end(self, epoch: int, record: dict[str, Any], engine: Engine) -> None:
        if self.tracker is not None:
            self.tracker.log(record)
        if self.inner is not None:
            self.inner(epoch, record, engine)

    def close(self) -> None:
        if self.tracker is not None:
            self.tracker.close()


def track_epochs(cfg: RunConfig, run_dir: RunDir | None, inner: EpochCallback | None) -> TrackedEpochs:
    flat = {k: v for k, v in cfg.to_dict().items() if not isinstance(v, dict)}
    tracker = make_tracker(cfg.tracking, run_dir=run_dir.path if run_dir is not None else None,
                           read_rows=run_dir.read_metrics if run_dir is not None else None, name=cfg.name,
                           params=flat)
    return TrackedEpochs(tracker, inner)
