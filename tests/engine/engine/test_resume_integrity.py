"""Resume is transactional: a run killed at any point of an epoch's commit resumes to exactly the
rows of an uninterrupted run; a damaged newest checkpoint falls back to the previous one."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
import vfl.engine.checkpoint as ckpt_mod
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

KEYS = ("train_loss", "train_acc", "test_acc", "bytes_up", "bytes_down", "cum_bytes_up", "epsilon")
SOURCE = BlobSource(num_parties=3, num_train=96, num_test=30)


class Killed(BaseException):
    """Stands for SIGKILL at an exact point (nothing after it runs)."""


def _cfg():
    return load_run_config({"num_parties": 3, "seed": 3, "strategy": "pbm", "params": {"b": 8},
                            "train": {"epochs": 3, "batch_size": 32, "lr": 0.05, "optimizer": "adam"},
                            "privacy": {"noise_rng": "seeded"}})  # row-for-row equality needs replayable noise


def _run(path, *, resume=False):
    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(_cfg().to_dict())
    return Engine(_cfg(), InProcessTransport(), SOURCE, run_dir=run_dir, progress=False).run(resume=resume)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _run(tmp_path_factory.mktemp("ref") / "run").history


def _kill_before_row(monkeypatch, epoch):
    real = RunDir.append_metrics

    def append(self, record):
        if record["epoch"] == epoch:
            raise Killed()
        real(self, record)

    monkeypatch.setattr(RunDir, "append_metrics", append)


def _kill_mid_row(monkeypatch, epoch):
    real = RunDir.append_metrics

    def append(self, record):
        if record["epoch"] == epoch:
            with open(self.path / "metrics.jsonl", "a") as f:
                f.write('{"epoch": ' + str(epoch) + ', "train_lo')
            raise Killed()
        real(self, record)

    monkeypatch.setattr(RunDir, "append_metrics", append)


def _kill_writing(monkeypatch, name, epoch, fn="write_bytes"):
    real = getattr(ckpt_mod, fn)

    def write(path, data):
        if path.name == name and f"{epoch:05d}" in str(path) or (name == "latest" and path.name == "latest"
                                                                 and f"epoch_{epoch:05d}".encode() in data):
            raise Killed()
        real(path, data)

    monkeypatch.setattr(ckpt_mod, fn, write)


@pytest.mark.parametrize("kill", [
    pytest.param(lambda mp: _kill_before_row(mp, 0), id="first-checkpoint-written-row-not"),
    pytest.param(lambda mp: _kill_mid_row(mp, 1), id="partial-metrics-line"),
    pytest.param(lambda mp: _kill_writing(mp, "manifest.json", 1), id="inside-checkpoint-before-manifest"),
    pytest.param(lambda mp: _kill_writing(mp, "node_2.pt", 0), id="inside-first-checkpoint"),
    pytest.param(lambda mp: _kill_writing(mp, "latest", 1, fn="write_atomic"), id="before-latest-marker"),
])
def test_killed_anywhere_in_the_commit_resumes_row_for_row(kill, reference, tmp_path, monkeypatch):
    kill(monkeypatch)
    with pytest.raises(Killed):
        _run(tmp_path / "cut")
    monkeypatch.undo()
    _run(tmp_path / "cut", resume=True)
    rows = RunDir(tmp_path / "cut").read_metrics()
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    for a, b in zip(reference, rows, strict=True):
        for k in KEYS:
            assert a[k] == b[k], (k, a[k], b[k])


def test_truncated_node_file_in_latest_checkpoint_falls_back(reference, tmp_path, monkeypatch, capsys):
    path = tmp_path / "cut"
    run_dir = RunDir(path)
    run_dir.write_config(_cfg().to_dict())

    def stop(epoch, record, engine):
        if epoch == 1:
            raise Killed()

    with pytest.raises(Killed):
        Engine(_cfg(), InProcessTransport(), SOURCE, run_dir=run_dir, progress=False, on_epoch_end=stop).run()
    node = path / "checkpoints" / "epoch_00001" / "node_2.pt"
    node.write_bytes(node.read_bytes()[:100])
    (path / "checkpoints" / "latest").write_text("")
    _run(path, resume=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vfl: warning: checkpoint file") and "node_2.pt is truncated" in err[0]
    rows = run_dir.read_metrics()
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    for a, b in zip(reference, rows, strict=True):
        assert all(a[k] == b[k] for k in KEYS)
