"""`vfl run --resume`: only keys that do not change what was computed may change; a refused resume
writes nothing; the resolved config is rewritten once the run restarted and keeps a history."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from simulations.cli.main import main
from simulations.cli.runner import resolve_config
from vfl.engine.lock import RunLock
from vfl.engine.rundir import RunDir

FAST = ["--transport", "inprocess", "--no-progress", "--set", "train.epochs=2", "--set", "params.b=8",
        "--set", "data.train_subsample=256", "--set", "data.test_subsample=64"]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("resume") / "run"
    assert main(["run", "demo", "--out", str(out), *FAST]) == 0
    return out


@pytest.fixture
def run(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out)  # a fresh copy of the same 2-epoch run for each test
    return out


def _snapshot(out):
    return {p.relative_to(out).as_posix(): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and "ray-tmp" not in p.parts and p.name != ".lock"}


@pytest.mark.parametrize("override,key,needle", [
    ("model.embed_dim=32", "model.embed_dim", "cannot change on resume (run has 16, got 32)"),
    ("params.b=64", "params.b", "cannot change on resume (run has 8, got 64)"),
    ("seed=5", "seed", "cannot change on resume"),
    ("privacy.noise_rng=seeded", "privacy.noise_rng", "cannot change on resume"),
    ("train.epochs=1", "train.epochs", "a resume may only extend the run (it has train.epochs=2)"),
    ("train.lr=1e-3", "train.lr", "cannot change on resume"),
])
def test_unsafe_override_is_refused_before_anything_is_written(run, override, key, needle, capsys):
    before = _snapshot(run)
    assert main(["run", "--resume", str(run), "--no-progress", "--set", override]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"vfl: error: {key}: ") and needle in err, err
    assert _snapshot(run) == before  # config, metrics, checkpoints untouched
    if key == "model.embed_dim":  # the reported bug: the run could never be resumed again
        assert main(["run", "--resume", str(run), "--no-progress", "--set", "train.epochs=3"]) == 0


def test_safe_overrides_are_kept_in_the_config_history(run):
    assert main(["run", "--resume", str(run), "--no-progress", "--set", "train.epochs=3",
                 "--set", "train.eval_every=2"]) == 0
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    hist = RunDir(run).config_history()
    assert len(hist) == 2 and "created by: vfl run demo --out" in hist[0]
    assert "resumed with train.epochs=3, train.eval_every=2" in hist[1]
    cfg = RunDir(run).read_config()
    assert cfg["train"]["epochs"] == 3 and cfg["params"]["b"] == 8


def test_config_is_not_rewritten_when_the_resume_fails_to_start(run, monkeypatch, capsys):
    before = (run / "config.resolved.yaml").read_bytes()
    node = next((run / "checkpoints").glob("epoch_00001")) / "node_1.pt"
    node.write_bytes(b"")
    other = run / "checkpoints" / "epoch_00000" / "node_1.pt"
    other.write_bytes(b"")
    assert main(["run", "--resume", str(run), "--no-progress", "--set", "train.epochs=3"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no intact checkpoint" in err and "node_1.pt is truncated" in err, err
    assert (run / "config.resolved.yaml").read_bytes() == before


def test_a_locked_run_cannot_be_resumed_twice(run, capsys):
    with RunLock(run):
        assert main(["run", "--resume", str(run), "--no-progress", "--set", "train.epochs=3"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"--resume: {run} is in use by another vfl run (PID {os.getpid()})" in err


def test_resume_does_not_take_out(run, capsys):
    assert main(["run", "--resume", str(run), "--out", str(run)]) == 2
    assert "--out: not with --resume" in capsys.readouterr().err


def test_relative_data_dir_is_stored_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = resolve_config("demo", ["data.data_dir=mydata"])
    assert cfg.data.data_dir == str(tmp_path / "mydata")
