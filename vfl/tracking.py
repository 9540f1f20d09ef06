"""Experiment trackers: every metrics row also goes to ``tracking: csv | tensorboard | mlflow``.

metrics.jsonl stays the record of a run; a tracker is a view of it. ``csv`` is built in
(``metrics.csv`` in the run directory, rewritten from metrics.jsonl after every epoch, so a
resumed run's file matches its rows); ``tensorboard`` and ``mlflow`` are optional extras, checked
before the run directory is made.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import json
import logging
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from vfl.checkpoint import write_atomic
from vfl.errors import ConfigError

log = logging.getLogger(__name__)

TRACKERS = ("none", "csv", "tensorboard", "mlflow")
CSV_FILE = "metrics.csv"
_EXTRA = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow")}  # kind -> (module, extra)


class Tracker(Protocol):
    def log(self, record: dict[str, Any]) -> None: ...

    def close(self) -> None: ...


def check_tracking(kind: str) -> None:
    """``ConfigError`` naming ``tracking`` and the extra to install when the backend is missing."""
    if kind not in TRACKERS:
        raise ConfigError("tracking", f"got {kind!r}; allowed: {', '.join(TRACKERS)}")
    if kind in _EXTRA:
        module, extra = _EXTRA[kind]
        if importlib.util.find_spec(module) is None:
            raise ConfigError("tracking", f"{kind!r} needs the optional package {module!r}, which is not "
                              f"installed; install it with: pip install 'vfl-privacy[{extra}]' (or use tracking: csv)")


def _numeric(record: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in record.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v)) and k != "epoch":
            out[k] = float(v)
    return out


def csv_text(rows: Sequence[dict[str, Any]]) -> str:
    """Rows as CSV: the union of their keys (first-seen order); nested values as JSON, None empty."""
    fields: dict[str, None] = {}
    for r in rows:
        fields.update(dict.fromkeys(r))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(fields), lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: json.dumps(v) if isinstance(v, (dict, list)) else ("" if v is None else v)
                    for k, v in r.items()})
    return buf.getvalue()


class CsvTracker:
    """``metrics.csv`` next to metrics.jsonl, rebuilt from ``read_rows()`` after every epoch."""

    def __init__(self, path: Path, read_rows: Callable[[], list[dict[str, Any]]]) -> None:
        self.path, self.read_rows = path, read_rows

    def log(self, record: dict[str, Any]) -> None:
        write_atomic(self.path, csv_text(self.read_rows()).encode())

    def close(self) -> None:
        pass


class TensorBoardTracker:
    """Scalars per epoch into ``<run>/tensorboard`` (torch's SummaryWriter)."""

    def __init__(self, log_dir: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(log_dir))

    def log(self, record: dict[str, Any]) -> None:
        for k, v in _numeric(record).items():
            self.writer.add_scalar(k, v, global_step=int(record["epoch"]))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MlflowTracker:
    """One mlflow run per vfl run (the tracking URI is mlflow's own setting: MLFLOW_TRACKING_URI)."""

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        import mlflow

        self.mlflow = mlflow
        mlflow.start_run(run_name=name)
        mlflow.log_params({k: str(v)[:500] for k, v in params.items()})

    def log(self, record: dict[str, Any]) -> None:
        self.mlflow.log_metrics(_numeric(record), step=int(record["epoch"]))

    def close(self) -> None:
        self.mlflow.end_run()


def make_tracker(kind: str, *, run_dir: Path | None, read_rows: Callable[[], list[dict[str, Any]]] | None,
                 name: str, params: dict[str, Any]) -> Tracker | None:
    """The tracker for ``kind`` (None for ``none``; file trackers need a run directory)."""
    check_tracking(kind)
    if kind == "none":
        return None
    if kind == "mlflow":
        return MlflowTracker(name, params)
    if run_dir is None:
        log.info("tracking: %s writes into the run directory; no out_dir, so nothing is tracked", kind)
        return None
    if kind == "csv":
        if read_rows is None:
            raise ConfigError("tracking", "csv needs the run's metrics rows")
        return CsvTracker(run_dir / CSV_FILE, read_rows)
    return TensorBoardTracker(run_dir / "tensorboard")
