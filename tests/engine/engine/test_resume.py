"""Resume: a run stopped after epoch 1 and resumed ends exactly where an uninterrupted run ends."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

KEYS = ("train_loss", "train_acc", "test_acc", "bytes_up", "bytes_down", "cum_bytes_up")


class Killed(Exception):
    pass


def _cfg():
    return load_run_config({"num_parties": 3, "seed": 3, "train": {"epochs": 3, "batch_size": 32, "lr": 0.05,
                                                                   "optimizer": "adam"}})


def _run(path, *, resume=False, kill_after=None):
    def cb(epoch, record, engine):
        if kill_after is not None and epoch == kill_after:
            raise Killed()

    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(_cfg().to_dict())
    engine = Engine(_cfg(), InProcessTransport(), BlobSource(num_parties=3), run_dir=run_dir, progress=False,
                    on_epoch_end=cb)
    return engine.run(resume=resume)


def test_resume_reaches_the_same_final_metrics(tmp_path):
    full = _run(tmp_path / "full")
    with pytest.raises(Killed):
        _run(tmp_path / "cut", kill_after=0)
    assert [r["epoch"] for r in RunDir(tmp_path / "cut").read_metrics()] == [0]
    resumed = _run(tmp_path / "cut", resume=True)
    lines = RunDir(tmp_path / "cut").read_metrics()
    assert [r["epoch"] for r in lines] == [0, 1, 2]
    for a, b in zip(full.history, lines, strict=True):
        for k in KEYS:
            assert a[k] == b[k], (k, a[k], b[k])
    assert resumed.summary["total_bytes_up"] == full.summary["total_bytes_up"]
    assert resumed.summary["final_test_acc"] == full.summary["final_test_acc"]


def test_checkpoint_survives_and_is_pruned(tmp_path):
    _run(tmp_path / "r")
    ckpts = sorted(p.name for p in (tmp_path / "r" / "checkpoints").glob("epoch_*"))
    assert ckpts == ["epoch_00001", "epoch_00002"]
    assert RunDir(tmp_path / "r").latest_checkpoint()[1]["epoch"] == 2
