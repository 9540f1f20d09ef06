"""The optional trackers with their real packages (each test is skipped where its extra is not
installed: ``pip install -e '.[mlflow,tensorboard,wandb]'``): the whole config as params, metrics
per epoch with step = epoch, the run's files as artifacts, the sweep point in the run name, and a
tracker that cannot start as one line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import vfl
from vfl.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
TINY = {"params.b": 8, "data.train_subsample": 128, "data.test_subsample": 64, "train.epochs": 2}


def test_mlflow_gets_every_key_every_epoch_and_the_files(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # mlflow >= 3 refuses a file store without it
    out = tmp_path / "002-params.b=8-seed0"  # a sweep point's directory name
    result = vfl.run("demo", out_dir=out, overrides={**TINY, "tracking": ["csv", "mlflow"]})
    client = MlflowClient()
    exp = client.get_experiment_by_name("demo")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.run_name == out.name and run.info.status == "FINISHED"
    params = run.data.params
    assert params["params.b"] == "8" and params["params.beta"] == "0.25" and params["train.lr"] == "0.05"
    assert params["model.bottom_hidden"] == "[32]" and len(params) > 60
    hist = client.get_metric_history(run.info.run_id, "train_loss")
    assert [m.step for m in hist] == [0, 1]
    assert [m.value for m in hist] == pytest.approx([r["train_loss"] for r in result.history])
    files = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"summary.json", "config.resolved.yaml", "metrics.jsonl", "plots"} <= files
    assert (out / "metrics.csv").is_file()  # the other tracker of the list ran too


def test_mlflow_that_cannot_start_is_one_line_and_leaves_no_run(tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, MLFLOW_TRACKING_URI=str(blocker / "mlruns"))
    out = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "simulations.cli.main", "run", "demo", "--transport", "inprocess",
                           "--out", str(out), "--set", "tracking=mlflow", "--set", "train.epochs=1"],
                          env=env, text=True, capture_output=True, timeout=300)
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert done.returncode == 2 and len(err) == 1, done.stderr[-3000:]
    assert err[0].startswith("vfl: error: tracking: mlflow could not start:")
    assert not out.exists()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", str(blocker / "mlruns"))
    with pytest.raises(ConfigError) as exc:  # the same from Python
        vfl.run("demo", out_dir=out, overrides={**TINY, "tracking": "mlflow"})
    assert exc.value.key == "tracking" and not out.exists()


def test_tensorboard_scalars_per_epoch_and_the_config(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "run"
    result = vfl.run("demo", out_dir=out, overrides={**TINY, "tracking": "tensorboard"})
    acc = EventAccumulator(str(out / "tensorboard"))
    acc.Reload()
    loss = acc.Scalars("train_loss")
    assert [e.step for e in loss] == [0, 1]
    assert [e.value for e in loss] == pytest.approx([r["train_loss"] for r in result.history], rel=1e-6)
    assert "config/text_summary" in acc.Tags()["tensors"]


def test_wandb_offline_gets_the_config_and_the_files(tmp_path, monkeypatch):
    pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_MODE", "offline")  # no network, no login
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "001-strategy=npq-seed0"
    vfl.run("demo", out_dir=out, overrides={**TINY, "tracking": "wandb"})
    (run_dir,) = (out / "wandb").glob("offline-run-*")
    (log,) = run_dir.glob("run-*.wandb")  # W&B's offline record of the run (synced later with `wandb sync`)
    raw = log.read_bytes()
    for _ in range(60):  # W&B's own service process writes the record; under load it lands after finish() returns
        if b"config.resolved.yaml" in raw:
            break
        time.sleep(0.5)
        raw = log.read_bytes()
    artifact = re.sub(r"[^A-Za-z0-9._-]+", "-", out.name) + "-outputs"  # W&B's allowed characters
    for text in ("params.b", "train.lr", "train_loss", artifact, "summary.json", "config.resolved.yaml"):
        assert text.encode() in raw, text  # the config keys, the metrics, the artifact and its files
    assert json.loads((out / "summary.json").read_text())["epochs"] == 2


def test_mlflow_on_sqlite_writes_no_mlruns_in_the_working_directory(tmp_path, monkeypatch):
    """A database tracking URI gives mlflow no artifact folder; its default is ./mlruns under the working
    directory. The experiment vfl creates keeps its artifacts beside the database file instead."""
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    db, cwd = tmp_path / "db", tmp_path / "cwd"
    db.mkdir()
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db / 'mlflow.db'}")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID", raising=False)  # mlflow's set_experiment exports it (another test's)
    vfl.run("demo", out_dir=tmp_path / "run", transport="inprocess", overrides={**TINY, "tracking": "mlflow"})
    assert sorted(p.name for p in cwd.iterdir()) == []  # no ./mlruns
    client = MlflowClient()
    (run,) = client.search_runs([client.get_experiment_by_name("demo").experiment_id])
    assert {"summary.json", "metrics.jsonl"} <= {f.path for f in client.list_artifacts(run.info.run_id)}
    assert (db / "mlartifacts").is_dir()
