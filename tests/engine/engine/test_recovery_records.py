"""Every attempt is in the summary: ``restarts`` and ``resumes`` are the write-ahead ledger's records, which each
restart and resume appends before it redoes anything, not lists carried by the newest checkpoint (which never
sees the attempts of a process killed, or giving up, before its next checkpoint).

Control: ``OldRecovery`` (the lists kept in the Recovery object, saved with each checkpoint and loaded from the
newest one, as before) lists 1 resume for 2, and none of 3 restarts + 1 resume."""

from __future__ import annotations

from typing import Any

import pytest

import vfl.engine.engine as engine_module
from tests.support.release_audit import OneShotFaults
from tests.support.release_runs import OldRecovery, run, tiny_cfg


def _cfg(**train: Any):
    return tiny_cfg(train={"on_failure": "restart", "max_restarts": 3, **train})


@pytest.mark.parametrize("control", [False, True], ids=["from-ledger", "control-old-lists"])
def test_two_resumes_of_the_same_epoch_are_both_listed(tmp_path, monkeypatch, control):
    """Killed in epoch 1 twice (no checkpoint between), resumed twice: 2 resumes."""
    if control:
        monkeypatch.setattr(engine_module, "Recovery", OldRecovery)
    cfg, path = _cfg(on_failure="fail"), tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:6")
    run(path, cfg, fails=True)
    OneShotFaults(monkeypatch, "party2@1:8")
    run(path, cfg, resume=True, fails=True)
    summary = run(path, cfg, resume=True).summary([])
    got = [(r["checkpoint_epoch"], r["releases_charged"]) for r in summary["resumes"]]
    if control:
        assert got == [(0, 2)]  # the first resume's process died before the checkpoint that would carry it
    else:
        assert got == [(0, 1), (0, 2)]  # each charged every attempt of epoch 1 after checkpoint 0
        assert summary["restarts"] == []


@pytest.mark.parametrize("control", [False, True], ids=["from-ledger", "control-old-lists"])
def test_restarts_of_a_process_that_gave_up_and_a_killed_resume_are_listed(tmp_path, monkeypatch, control):
    """Process 1 restarts epoch 1 three times and gives up at the 4th failure (train.max_restarts 3);
    process 2 resumes and is killed in epoch 1 (on_failure fail); process 3 resumes and finishes."""
    if control:
        monkeypatch.setattr(engine_module, "Recovery", OldRecovery)
    path = tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:2,party2@1:3,party1@1:4,party2@1:5")
    first = run(path, _cfg(), fails=True)
    assert first.recovery.session == 3
    OneShotFaults(monkeypatch, "party1@1:6")
    run(path, _cfg(on_failure="fail"), resume=True, fails=True)
    summary = run(path, _cfg(), resume=True).summary([])
    restarts, resumes = summary["restarts"], summary["resumes"]
    if control:
        assert restarts == [] and len(resumes) == 1
        return
    assert [(r["party"], r["round"], r["epoch"], r["attempt"]) for r in restarts] == [
        ("party1", "train:1:2", 1, 1), ("party2", "train:1:3", 1, 2), ("party1", "train:1:4", 1, 3)]
    assert all(r["releases_charged"] == 1 and r["charged_epochs"] == [1] for r in restarts)
    # from checkpoint 0: the 4 attempts of process 1, then those and process 2's
    assert [(r["checkpoint_epoch"], r["releases_charged"]) for r in resumes] == [(0, 4), (0, 5)]
