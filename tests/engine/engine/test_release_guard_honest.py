"""Honest runs never meet the parties' release guard (``parties/vertical/release_guard.py``): the same run with and
without it prints the same ε and trains bit for bit the same (seeded noise), across strategies and across
a restart and a resume; each party's count is one release per sample per epoch attempt it answered
(evaluation forwards not counted), and its own worst-case ε covers what the accountant charged."""

from __future__ import annotations

import pytest

import strategies.base.vertical as sv
from parties.vertical.release_guard import release_cap
from tests.support.release_audit import OneShotFaults
from tests.support.release_runs import run, tiny_cfg

CASES = [("npq", None), ("pbm", None), ("ldp", None), ("npq+secagg", None), ("pbm", "announced")]
SAME = ("epsilon", "final_train_loss", "final_test_acc", "total_bytes_up")


def _params(strategy, mode):
    return {"secagg_mode": mode} if mode else None


@pytest.mark.parametrize("strategy,mode", CASES)
def test_an_honest_run_is_unchanged_by_the_guard(tmp_path, monkeypatch, strategy, mode):
    cfg = tiny_cfg(strategy, params=_params(strategy, mode), privacy={"noise_rng": "seeded"})
    guarded = run(tmp_path / "guarded", cfg).summary([])
    with monkeypatch.context() as mp:  # control: the parties without their guard (the old code)
        mp.setattr(sv, "guard_for", lambda strategy, party: None)
        plain = run(tmp_path / "plain", cfg).summary([])
    assert {k: guarded.get(k) for k in SAME} == {k: plain.get(k) for k in SAME}
    assert not any(k.startswith("party_") for k in plain)
    if strategy == "npq" or strategy == "npq+secagg":  # releases without noise: nothing to bound, no guard
        assert not any(k.startswith("party_") for k in guarded)
        return
    assert guarded["party_releases_max"] == cfg.train.epochs  # once per epoch; the evaluations not counted
    assert guarded["party_release_cap"] == release_cap(cfg) > cfg.train.epochs
    assert guarded["party_epsilon_worst_case"] >= guarded["epsilon"]
    assert guarded["party_epsilon_released"] <= guarded["party_epsilon_worst_case"]


def _restart_then_resume(path, monkeypatch, cfg):
    """The server dies at step 6 of epoch 1 (restart: the parties' host is rebuilt, not replaced), then at
    step 3 of epoch 2 with no restart left; resumed, the run finishes."""
    OneShotFaults(monkeypatch, "server@1:6,server@2:3")
    run(path, cfg, fails=True)
    return run(path, cfg, resume=True)


@pytest.mark.parametrize("strategy,mode", [("pbm", None), ("ldp", None)])
def test_an_honest_run_with_a_restart_and_a_resume_is_unchanged(tmp_path, monkeypatch, strategy, mode):
    cfg = tiny_cfg(strategy, params=_params(strategy, mode), train={"on_failure": "restart", "max_restarts": 1},
                   privacy={"noise_rng": "seeded"})
    engine = _restart_then_resume(tmp_path / "guarded", monkeypatch, cfg)
    guarded = engine.summary([])
    with monkeypatch.context() as mp:
        mp.setattr(sv, "guard_for", lambda strategy, party: None)
        plain = _restart_then_resume(tmp_path / "plain", mp, cfg).summary([])
    assert len(guarded["restarts"]) == 1 and len(guarded["resumes"]) == 1
    assert {k: guarded.get(k) for k in SAME} == {k: plain.get(k) for k in SAME}
    # epoch 1's first six batches went out twice: the rebuilt party kept its counts (Node.keep_from) and the
    # checkpoint of epoch 1 carried them into the resumed process (epoch 2's failed attempt died with it)
    # (seeded noise: the redo repeated the same sums and the accountant charged nothing new; the party counts
    # every forward, conservative)
    assert guarded["party_releases_max"] == cfg.train.epochs + 1 < guarded["party_release_cap"]
