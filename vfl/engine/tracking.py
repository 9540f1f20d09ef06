"""Experiment trackers: every metrics row also goes to ``tracking: csv | tensorboard | mlflow | wandb``
(one name or a list: ``tracking: [csv, mlflow]``).

metrics.jsonl stays the record of a run; a tracker is a view of it. ``csv`` is built in
(``metrics.csv`` in the run directory, rewritten from metrics.jsonl after every epoch, so a
resumed run's file matches its rows); ``tensorboard``, ``mlflow`` and ``wandb`` are optional
extras, checked before the run directory is made. Each tracker receives the whole config
flattened to dotted keys (``params.b``, ``train.lr``) as params/hparams/config, the metrics of
every epoch with step = epoch, and at the end the run's summary.json, config.resolved.yaml,
metrics.jsonl and plots as artifacts. The experiment is ``$VFL_EXPERIMENT`` or the config's
``name``; the run name ``$VFL_RUN_NAME`` or the run directory's name (a sweep point's directory
names its setting and seed). A tracker that cannot start is one ``ConfigError`` naming
``tracking``; one that fails later warns once and the run goes on (metrics.jsonl loses nothing).
"""

from __future__ import annotations

import contextlib
import csv
import importlib.util
import io
import json
import logging
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from vfl.core.errors import ConfigError, install_hint
from vfl.core.private_fs import write_atomic

log = logging.getLogger(__name__)

TRACKERS = ("none", "csv", "tensorboard", "mlflow", "wandb")
CSV_FILE = "metrics.csv"
ENV_EXPERIMENT, ENV_RUN_NAME = "VFL_EXPERIMENT", "VFL_RUN_NAME"
ARTIFACTS = ("summary.json", "config.resolved.yaml", "metrics.jsonl", "plots")  # logged at the end of a run
_EXTRA = {"tensorboard": ("tensorboard", "tensorboard"), "mlflow": ("mlflow", "mlflow"),
          "wandb": ("wandb", "wandb")}  # kind -> (module, extra)


class Tracker(Protocol):
    def log(self, record: dict[str, Any]) -> None: ...

    def log_artifacts(self, paths: Sequence[Path]) -> None: ...

    def close(self, *, ok: bool = True) -> None: ...


@dataclass(frozen=True)
class RunInfo:
    """What every tracker is told at start: names, the flattened config, where the run lives."""

    experiment: str
    run_name: str
    params: dict[str, Any]
    run_dir: Path | None


def kinds_of(tracking: str | Sequence[str]) -> tuple[str, ...]:
    """``"csv"`` or ``["csv", "mlflow"]`` -> the trackers to start, in order, without ``none`` or repeats."""
    items = [tracking] if isinstance(tracking, str) else list(tracking)
    return tuple(dict.fromkeys(k for k in items if k != "none"))


def check_tracking(tracking: str | Sequence[str]) -> None:
    """``ConfigError`` naming ``tracking`` and the extra to install when a backend is missing."""
    for kind in ([tracking] if isinstance(tracking, str) else list(tracking)):
        if kind not in TRACKERS:
            raise ConfigError("tracking", f"got {kind!r}; allowed: {', '.join(TRACKERS)} (or a list of them)")
        if kind in _EXTRA:
            module, extra = _EXTRA[kind]
            if importlib.util.find_spec(module) is None:
                raise ConfigError("tracking", f"{kind!r} needs the optional package {module!r}, which is not "
                                  f"installed; install it with: {install_hint(extra)} (or use tracking: csv)")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested config -> ``{"train.lr": 0.05, "params.b": 16, "model.bottom_hidden": "[32]"}``: scalars
    as they are, lists as JSON, an empty section as ``{}`` (so that it is there)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and v:
            out.update(flatten(v, key + "."))
        elif isinstance(v, (Mapping, list, tuple)):
            out[key] = json.dumps(v, default=str)
        else:
            out[key] = v
    return out


def run_info(*, name: str, config: Mapping[str, Any], run_dir: Path | None) -> RunInfo:
    """Names from the environment, else the config's ``name`` and the run directory's name."""
    experiment = os.environ.get(ENV_EXPERIMENT) or name
    run_name = os.environ.get(ENV_RUN_NAME) or (run_dir.name if run_dir is not None else name)
    return RunInfo(experiment, run_name, flatten(config), run_dir)


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

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        pass  # the files are already beside metrics.csv

    def close(self, *, ok: bool = True) -> None:
        pass


def _hparam(value: Any) -> Any:
    return value if isinstance(value, (bool, int, float, str)) else json.dumps(value, default=str)


class TensorBoardTracker:
    """Scalars per epoch into ``<run>/tensorboard`` (torch's SummaryWriter); the flattened config as
    text and, at the end, as hparams beside the final metrics (TensorBoard's HPARAMS tab)."""

    def __init__(self, log_dir: Path, info: RunInfo) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer, self.info = SummaryWriter(log_dir=str(log_dir)), info
        self.last: dict[str, float] = {}
        table = "\n".join(f"| {k} | {v} |" for k, v in info.params.items())
        self.writer.add_text("config", "| key | value |\n|---|---|\n" + table, global_step=0)

    def log(self, record: dict[str, Any]) -> None:
        self.last = _numeric(record)
        for k, v in self.last.items():
            self.writer.add_scalar(k, v, global_step=int(record["epoch"]))
        self.writer.flush()

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        pass  # TensorBoard has no artifact store; the files sit beside tensorboard/ in the run directory

    def close(self, *, ok: bool = True) -> None:
        if ok and self.last:
            hparams = {k: _hparam(v) for k, v in self.info.params.items() if v is not None}
            self.writer.add_hparams(hparams, {f"final/{k}": v for k, v in self.last.items()}, run_name=".")
        self.writer.close()


def artifacts_beside_db(uri: str) -> str | None:
    """``<the database's folder>/mlartifacts`` (a file URI) for a ``sqlite:///`` tracking URI, where
    mlflow would put a new experiment's artifacts in ``./mlruns`` under the working directory; None
    for other URIs (a file store keeps them inside it; a server or another database: its own setting)."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlartifacts").as_uri()


class MlflowTracker:
    """One mlflow run per vfl run, in experiment ``info.experiment`` (the tracking URI is mlflow's
    own setting: ``MLFLOW_TRACKING_URI``, default ``./mlruns``; with a sqlite database the
    experiments vfl creates keep their artifacts beside it, ``artifacts_beside_db``)."""

    def __init__(self, info: RunInfo) -> None:
        import mlflow

        self.mlflow = mlflow
        if not os.environ.get("MLFLOW_EXPERIMENT_ID"):
            name = os.environ.get("MLFLOW_EXPERIMENT_NAME") or info.experiment
            where = artifacts_beside_db(mlflow.get_tracking_uri())
            if where is not None and mlflow.get_experiment_by_name(name) is None:
                try:
                    mlflow.create_experiment(name, artifact_location=where)
                except mlflow.exceptions.MlflowException:  # created meanwhile (a parallel sweep): use it
                    pass
            if not os.environ.get("MLFLOW_EXPERIMENT_NAME"):
                mlflow.set_experiment(info.experiment)
        self.run = mlflow.start_run(run_name=info.run_name)
        items = [(k, str(v)[:500]) for k, v in info.params.items()]
        for i in range(0, len(items), 100):  # mlflow takes at most 100 params per batch
            mlflow.log_params(dict(items[i:i + 100]))
        if info.run_dir is not None:
            mlflow.set_tag("vfl.run_dir", str(info.run_dir.absolute()))

    def log(self, record: dict[str, Any]) -> None:
        self.mlflow.log_metrics(_numeric(record), step=int(record["epoch"]))

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        for p in paths:
            if p.is_dir():
                self.mlflow.log_artifacts(str(p), artifact_path=p.name)
            else:
                self.mlflow.log_artifact(str(p))

    def close(self, *, ok: bool = True) -> None:
        self.mlflow.end_run(status="FINISHED" if ok else "FAILED")


class WandbTracker:
    """One W&B run per vfl run: project ``info.experiment``, the flattened config, metrics with
    step = epoch, the run's files as one artifact. ``WANDB_MODE=offline`` works without a network
    (sync later with ``wandb sync``); the files go to ``<run>/wandb`` (else W&B's own folder)."""

    def __init__(self, info: RunInfo) -> None:
        import wandb

        self.wandb, self.info = wandb, info
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or info.experiment, name=info.run_name,
                              config=info.params, dir=str(info.run_dir) if info.run_dir is not None else None,
                              reinit="finish_previous")

    def log(self, record: dict[str, Any]) -> None:
        self.run.log(_numeric(record), step=int(record["epoch"]))

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", self.info.run_name)[:120] or "run"
        art = self.wandb.Artifact(name=f"{name}-outputs", type="vfl-run")
        for p in paths:
            if p.is_dir():
                art.add_dir(str(p), name=p.name)
            else:
                art.add_file(str(p))
        self.run.log_artifact(art)

    def close(self, *, ok: bool = True) -> None:
        self.run.finish(exit_code=0 if ok else 1)


class Trackers:
    """Several trackers at once (``tracking: [csv, mlflow]``). A tracker that fails after it started
    warns once and is dropped: metrics.jsonl is the record, a view must not end the run."""

    def __init__(self, trackers: Sequence[tuple[str, Tracker]]) -> None:
        self.trackers = list(trackers)

    def _each(self, what: str, call: Callable[[Tracker], None]) -> None:
        for kind, tracker in list(self.trackers):
            try:
                call(tracker)
            except Exception as exc:
                log.warning("tracking: %s failed to %s (%s: %s); it receives nothing more, metrics.jsonl "
                            "keeps every row", kind, what, type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")
                self.trackers.remove((kind, tracker))
                if what != "close":  # still end its run, so that what it already got is written out
                    with contextlib.suppress(Exception):
                        tracker.close(ok=False)

    def log(self, record: dict[str, Any]) -> None:
        self._each("log a row", lambda t: t.log(record))

    def log_artifacts(self, paths: Sequence[Path]) -> None:
        self._each("log artifacts", lambda t: t.log_artifacts(paths))

    def close(self, *, ok: bool = True) -> None:
        self._each("close", lambda t: t.close(ok=ok))
        self.trackers.clear()


def _start(kind: str, info: RunInfo, read_rows: Callable[[], list[dict[str, Any]]] | None) -> Tracker | None:
    if kind == "mlflow":
        return MlflowTracker(info)
    if kind == "wandb":
        return WandbTracker(info)
    if info.run_dir is None:
        log.info("tracking: %s writes into the run directory; no out_dir, so nothing is tracked", kind)
        return None
    if kind == "csv":
        if read_rows is None:
            raise ConfigError("tracking", "csv needs the run's metrics rows")
        return CsvTracker(info.run_dir / CSV_FILE, read_rows)
    return TensorBoardTracker(info.run_dir / "tensorboard", info)


def start_trackers(tracking: str | Sequence[str], *, info: RunInfo,
                   read_rows: Callable[[], list[dict[str, Any]]] | None) -> Trackers:
    """Start every configured tracker; one that cannot start closes the others and is one
    ``ConfigError`` naming ``tracking`` (e.g. an unwritable mlflow store, W&B without a login)."""
    check_tracking(tracking)
    started: list[tuple[str, Tracker]] = []
    for kind in kinds_of(tracking):
        try:
            tracker = _start(kind, info, read_rows)
        except ConfigError:
            Trackers(started).close(ok=False)
            raise
        except Exception as exc:
            Trackers(started).close(ok=False)
            first = " ".join(str(exc).split())[:800]  # one line, with the package's own hint
            raise ConfigError("tracking", f"{kind} could not start: {type(exc).__name__}: {first}") from None
        if tracker is not None:
            started.append((kind, tracker))
    return Trackers(started)
