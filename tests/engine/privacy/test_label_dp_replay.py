"""label_gp's label ε counts the epoch a failed attempt already released (play the passive party).

A party that dies mid-epoch and is resumed makes the server redo the epoch: the parties receive a
second, freshly noised gradient of every label of the steps the failed attempt finished. The
label ε must compose over every epoch attempt, not over ``train.epochs``. Control: the ε of
``train.epochs`` epochs (what the summary printed before) is below that of the attempts made."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from parties.defenses import label_gp
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.privacy.defenses import label_privacy
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.inprocess import InProcessTransport

SOURCE = BlobSource(num_parties=3, num_train=120, num_test=30)
GP = {"kind": "label_gp", "noise_multiplier": 2.0, "max_norm": 1.0}


def _cfg():
    return load_run_config({"num_parties": 3, "seed": 2, "strategy": "npq", "defenses": [GP],
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": 30, "lr": 0.05}})  # 4 steps an epoch


def _engine(path, cfg, *, resume):
    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(cfg.to_dict())
    return Engine(cfg, InProcessTransport(), SOURCE, run_dir=run_dir, progress=False)


def test_a_resumed_run_charges_the_label_releases_of_the_failed_attempt(tmp_path, monkeypatch):
    calls = []
    real = label_gp.private_backward
    monkeypatch.setattr(label_gp, "private_backward", lambda *a, **k: calls.append(1) or real(*a, **k))
    cfg, path = _cfg(), tmp_path / "run"
    monkeypatch.setenv(FAULT_ENV, "party1@1:2")  # dies in epoch 1 after 2 noised steps
    with pytest.raises(PartyFailure):
        _engine(path, cfg, resume=False).run()
    monkeypatch.delenv(FAULT_ENV)
    summary = _engine(path, cfg, resume=True).run(resume=True).summary
    steps_per_epoch = 4
    assert len(calls) > cfg.train.epochs * steps_per_epoch  # labels were noised in more than 2 epochs' worth
    attempts = -(-len(calls) // steps_per_epoch)  # epochs that touched every label at most once each
    old = label_privacy(cfg.defenses, epochs=cfg.train.epochs, delta=cfg.privacy.delta)["epsilon_label"]
    honest = label_privacy(cfg.defenses, epochs=attempts, delta=cfg.privacy.delta)["epsilon_label"]
    assert old < honest <= summary["epsilon_label"]  # control: the old figure under-counts
    assert summary["label_epochs_charged"] == cfg.train.epochs + 1


def test_an_uninterrupted_run_charges_its_epochs(tmp_path):
    cfg = _cfg()
    summary = _engine(tmp_path / "run", cfg, resume=False).run().summary
    assert summary["epsilon_label"] == label_privacy(cfg.defenses, epochs=2, delta=cfg.privacy.delta)["epsilon_label"]
    assert "label_epochs_charged" not in summary
