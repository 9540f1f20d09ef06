"""A run that fails before its first epoch is committed leaves no run directory behind (no
``config.resolved.yaml`` that looks like a run), and never removes a directory that was there."""

from __future__ import annotations

import pytest

import vfl.engine.api
from simulations.cli.main import main
from vfl.core.errors import ConfigError

TINY = ["num_parties=2", "train.epochs=1", "data.train_subsample=64", "data.test_subsample=32"]


def test_a_model_factory_failing_in_the_node_leaves_nothing(tmp_path):
    out = tmp_path / "new" / "run"
    with pytest.raises(Exception, match="out of weights"):
        vfl.engine.api.run("demo", out_dir=out, overrides=[*TINY, "model.bottom=tests.support.byo_models:explodes"])
    assert not (tmp_path / "new").exists() and tmp_path.is_dir()  # the parents it made go too


def test_a_model_failing_in_the_first_epoch_leaves_nothing_via_the_cli(tmp_path, capsys):
    out = tmp_path / "run"
    rc = main(["run", "demo", "--transport", "inprocess", "--out", str(out), "--no-progress",
               *[a for kv in TINY for a in ("--set", kv)], "--set", "model.bottom=tests.support.byo_models:wrong_width"])
    assert rc != 0 and "expected (batch, model.embed_dim=16)" in capsys.readouterr().err
    assert not out.exists()


def test_a_dataset_factory_failing_leaves_nothing(tmp_path):
    out = tmp_path / "run"
    with pytest.raises(ConfigError, match="the bucket is empty"):
        vfl.engine.api.run("demo", out_dir=out, overrides=[*TINY, "dataset=tests.support.byo_data:raises"])
    assert not out.exists()


def test_an_existing_empty_directory_is_emptied_not_removed(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    with pytest.raises(Exception, match="out of weights"):
        vfl.engine.api.run("demo", out_dir=out, overrides=[*TINY, "model.bottom=tests.support.byo_models:explodes"])
    assert out.is_dir() and list(out.iterdir()) == []
    res = vfl.engine.api.run("demo", out_dir=out, overrides=TINY)  # the same directory takes a good run
    assert res.summary["epochs"] == 1 and (out / "config.resolved.yaml").is_file()


def test_a_run_that_committed_an_epoch_keeps_its_directory(tmp_path):
    out = tmp_path / "run"
    vfl.engine.api.run("demo", out_dir=out, overrides=TINY)
    assert {"config.resolved.yaml", "metrics.jsonl", "summary.json"} <= {p.name for p in out.iterdir()}
