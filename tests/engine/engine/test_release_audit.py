"""Play the server: every noisy release it observed is charged (failed attempts, restarts, resumes).

``tests/support/release_audit.py`` counts what the server node received (decoded sums with SecAgg, every
embedding without) over every process of a run, as the events of those releases at the noise they
really had, and checks the accountant's curve covers them at every Rényi order. Each test drives
one path that is easy to get wrong: a dropout (``train.on_dropout`` fail with a restart, or
skip-party) in each SecAgg mode, a restart, a resume after a crash at different points (mid-epoch,
after the last step, in evaluation, between the release and its checkpoint, past a damaged checkpoint),
FedBCD local steps, parties sharing a host. Seeded noise, a lying server and label DP:
``test_release_audit_attacks.py``.
"""

from __future__ import annotations

import pytest

from strategies.base.dropout import Dropouts
from tests.support.release_audit import OneShotFaults, ReleaseAudit, check
from tests.support.release_runs import (
    MODES,
    STEPS,
    engine_at,
    old_parties_summed,
    run,
    tiny_cfg,
)
from vfl.engine.rundir import RunDir

# ---- a) a party fails mid-epoch --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_dropout_fail_then_restart_redoes_the_epoch_and_charges_both_attempts(tmp_path, monkeypatch, mode):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6")
    cfg = tiny_cfg(params={"secagg_mode": mode}, train={"on_dropout": "fail", "on_failure": "restart"})
    engine = run(tmp_path / "run", cfg)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]  # the redo is charged


@pytest.mark.parametrize("mode", MODES)
def test_skip_party_charges_the_smaller_sums(tmp_path, monkeypatch, mode):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6")
    cfg = tiny_cfg(params={"secagg_mode": mode}, train={"on_dropout": "skip-party"})
    engine = run(tmp_path / "run", cfg)
    nums = check(audit, engine.strategy, engine.accountant)
    assert [d["party"] for d in engine.strategy.dropouts.dropped] == ["party1"]
    assert nums["observed_releases"] <= cfg.train.epochs



@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-default"])
@pytest.mark.parametrize("mode", MODES)
def test_skip_party_then_a_crash_early_in_the_next_epoch_charges_the_smaller_sums(tmp_path, monkeypatch, mode,
                                                                                 control):
    """party1 drops in epoch 0; the server's host dies at step 3 of epoch 1 (before the epoch's first sync);
    resumed. The write-ahead record of epoch 1's first attempt must already say 2 parties: its sums were of 2.
    Control: with the old default (M parties for an epoch not started) the server observed more
    (ε 78.4 against 73.9 charged)."""
    if control:
        monkeypatch.setattr(Dropouts, "parties_summed", old_parties_summed)
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@0:4,server@1:3")
    cfg = tiny_cfg(params={"secagg_mode": mode}, train={"on_dropout": "skip-party"})
    path = tmp_path / "run"
    first = run(path, cfg, fails=True)
    assert [d["party"] for d in first.strategy.dropouts.dropped] == ["party1"]
    assert {len(s) for ph, e, _, s, _ in audit.decodes if (ph, e) == ("train", 1)} == {2}  # what the server decoded
    engine = run(path, cfg, resume=True)
    if control:
        with pytest.raises(AssertionError, match="observed more than the accountant charged"):
            check(audit, engine.strategy, engine.accountant)
    else:
        check(audit, engine.strategy, engine.accountant)


def test_ldp_dropout_fail_then_restart_and_skip_party(tmp_path, monkeypatch):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6,party2@2:3")
    cfg = tiny_cfg("ldp", train={"on_dropout": "skip-party", "on_failure": "restart"})
    engine = run(tmp_path / "run", cfg)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] <= nums["charged_releases"]


def test_ldp_restart_counts_embeddings_that_arrived_in_the_failed_round(tmp_path, monkeypatch):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6")
    cfg = tiny_cfg("ldp", train={"on_failure": "restart"})
    engine = run(tmp_path / "run", cfg)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]


# ---- b) resume after a crash at different points -----------------------------------------------------
@pytest.mark.parametrize("fault", ["party1@1:6", "party2@1:9", "party1@eval:1:0", "party2@eval:2:0"],
                         ids=["mid-epoch", "last-step", "eval", "eval-last-epoch"])
@pytest.mark.parametrize("strategy", ["pbm", "ldp"])
def test_resume_after_a_crash_charges_what_went_out(tmp_path, monkeypatch, fault, strategy):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, fault)
    cfg, path = tiny_cfg(strategy), tmp_path / "run"
    run(path, cfg, fails=True)
    engine = run(path, cfg, resume=True)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]


def test_resume_after_a_crash_between_the_release_and_its_checkpoint(tmp_path, monkeypatch):
    """The epoch trained and evaluated, then the process died before its checkpoint was written."""
    audit = ReleaseAudit().attach(monkeypatch)
    cfg, path = tiny_cfg(), tmp_path / "run"
    real = RunDir.save_checkpoint

    def save(self, epoch, *a, **k):
        if epoch == 1:
            raise KeyboardInterrupt("killed before the checkpoint of epoch 1")
        return real(self, epoch, *a, **k)

    with monkeypatch.context() as mp:
        mp.setattr(RunDir, "save_checkpoint", save)
        with pytest.raises(KeyboardInterrupt):
            engine_at(path, cfg).run()
    engine = run(path, cfg, resume=True)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]


def test_two_resumes_of_the_same_epoch_charge_three_attempts(tmp_path, monkeypatch):
    audit = ReleaseAudit().attach(monkeypatch)
    cfg, path = tiny_cfg(), tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:6")
    run(path, cfg, fails=True)
    OneShotFaults(monkeypatch, "party2@1:8")
    run(path, cfg, resume=True, fails=True)
    engine = run(path, cfg, resume=True)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 2 == nums["charged_releases"]


# ---- c) evaluation -----------------------------------------------------------------------------------
def test_evaluation_releases_no_training_sample(tmp_path, monkeypatch):
    """Evaluation rounds carry test rows only (``Schedule.test_ids``): no train-phase decode happens
    outside the training steps, and a test batch is released at most once per charged attempt."""
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@eval:1:0")
    cfg = tiny_cfg(train={"on_failure": "restart"})
    engine = run(tmp_path / "run", cfg)
    check(audit, engine.strategy, engine.accountant)
    train_rounds = {(e, s) for ph, e, s, _, _ in audit.decodes if ph == "train"}
    assert train_rounds == {(e, s) for e in range(cfg.train.epochs) for s in range(STEPS)}
    assert audit.worst_count(engine.strategy, phase="eval") <= engine.accountant.events[0].count


# ---- d) FedBCD local steps -------------------------------------------------------------------------------
def test_local_steps_release_once_per_exchange(tmp_path, monkeypatch):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6")
    cfg = tiny_cfg(train={"local_steps": 3, "on_failure": "restart"})
    engine = run(tmp_path / "run", cfg)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]



@pytest.mark.parametrize("faults,params,train,resume", [
    ("party1@eval:0:0,server@1:3", {}, {}, True),  # the dropout in evaluation: epoch 1 starts with 2 parties
    ("party1@0:4,server@1:3", {"secagg": False}, {}, True),  # no SecAgg: each party's counts seen alone
    ("party1@eval:1:0", {}, {}, False),  # a dropout in evaluation, no crash
], ids=["eval-drop-resume", "no-secagg", "eval-drop"])
def test_skip_party_variants(tmp_path, monkeypatch, faults, params, train, resume):
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, faults)
    cfg = tiny_cfg(params=params, train={"on_dropout": "skip-party", **train})
    path = tmp_path / "run"
    engine = run(path, cfg, fails=resume)
    if resume:
        engine = run(path, cfg, resume=True)
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] >= cfg.train.epochs


def test_skip_party_variants_control_old_default(tmp_path, monkeypatch):
    """Control of ``eval-drop-resume``: with the old default the crash before epoch 1's first sync left a
    write-ahead record of 3 parties for sums of 2."""
    monkeypatch.setattr(Dropouts, "parties_summed", old_parties_summed)
    with pytest.raises(AssertionError, match="observed more than the accountant charged"):
        test_skip_party_variants(tmp_path, monkeypatch, "party1@eval:0:0,server@1:3", {}, {}, True)


# ---- d) parties sharing a host (one fused backward: parties/vertical/party_batch.py) ---------------------------------
@pytest.mark.parametrize("resume", [False, True], ids=["restart", "resume"])
def test_party_batch_host_crash_charges_the_failed_attempt(tmp_path, monkeypatch, resume):
    from parties.vertical import party_batch

    calls = []
    real = party_batch.train_together
    monkeypatch.setattr("parties.vertical.party.train_together", lambda *a, **k: calls.append(1) or real(*a, **k))
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@1:6")  # its host holds two parties: both go
    cfg = tiny_cfg(transport={"max_actors": 2}, train=None if resume else {"on_failure": "restart"})
    path = tmp_path / "run"
    engine = run(path, cfg, fails=resume)
    if resume:
        engine = run(path, cfg, resume=True)
    assert calls  # the parties' host took their gradients together
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 1 == nums["charged_releases"]


def test_resume_past_a_damaged_newest_checkpoint_charges_every_later_attempt(tmp_path, monkeypatch):
    """Crash in epoch 2; epoch 1's checkpoint is damaged, so the resume goes back to epoch 0's and redoes
    epochs 1 and 2: the committed epoch 1 and the failed epoch 2 are both charged again."""
    audit = ReleaseAudit().attach(monkeypatch)
    OneShotFaults(monkeypatch, "party1@2:4")
    cfg, path = tiny_cfg(), tmp_path / "run"
    run(path, cfg, fails=True)
    (newest,) = [p for p in (path / "checkpoints").iterdir() if p.name.endswith("00001")]
    victim = next(f for f in sorted(newest.iterdir()) if f.name != "manifest.json")
    victim.write_bytes(victim.read_bytes()[:-1] + b"\0")
    engine = run(path, cfg, resume=True)
    assert engine.recovery.resumes[-1]["checkpoint_epoch"] == 0
    nums = check(audit, engine.strategy, engine.accountant)
    assert nums["observed_releases"] == cfg.train.epochs + 2 == nums["charged_releases"]

