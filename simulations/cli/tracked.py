"""Glue between the engine's per-epoch callback and the configured trackers (``tracking:``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vfl.engine.engine import Engine, EpochCallback
from vfl.engine.rundir import RunDir
from vfl.engine.schema import RunConfig
from vfl.engine.tracking import ARTIFACTS, Trackers, run_info, start_trackers


@dataclass
class TrackedEpochs:
    """Logs each committed row to the trackers, then calls the caller's ``on_epoch_end``."""

    tracker: Trackers
    inner: EpochCallback | None

    def on_epoch_end(self, epoch: int, record: dict[str, Any], engine: Engine) -> None:
        self.tracker.log(record)
        if self.inner is not None:
            self.inner(epoch, record, engine)

    def finish(self, run_dir: RunDir | None) -> None:
        """The run's files as artifacts (after summary.json and the plots are written)."""
        if run_dir is not None:
            self.tracker.log_artifacts([p for p in (run_dir.path / n for n in ARTIFACTS) if p.exists()])

    def close(self, *, ok: bool = True) -> None:
        self.tracker.close(ok=ok)


def track_epochs(cfg: RunConfig, run_dir: RunDir | None, inner: EpochCallback | None) -> TrackedEpochs:
    """Start the trackers of ``cfg.tracking`` (a ``ConfigError`` naming ``tracking`` if one cannot start)."""
    info = run_info(name=cfg.name, config=cfg.to_dict(), run_dir=run_dir.path if run_dir is not None else None)
    tracker = start_trackers(cfg.tracking, info=info, read_rows=run_dir.read_metrics if run_dir is not None else None)
    return TrackedEpochs(tracker, inner)
