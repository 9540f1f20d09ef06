"""Play the server (or a passive party) past the failure paths: seeded noise replayed over other parties,
a lying server asking for forwards of its choosing, label-DP releases (label_gp gradients, label_rr draws)
across crashes and resumes. Each hole is a test with the old code as its control, or an xfail(strict)
test where it is open."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.release_audit import OneShotFaults, ReleaseAudit, check
from tests.support.release_runs import (
    MODES,
    SOURCE,
    STEPS,
    old_label_privacy,
    run,
    tiny_cfg,
)
from vfl.engine.engine import Engine

# ---- label DP (play a passive party: it receives the server's label-noised gradients) ----------------
GP = {"kind": "label_gp", "noise_multiplier": 2.0, "max_norm": 1.0}



@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-count"])
@pytest.mark.parametrize("strategy", ["npq+secagg", "pbm"])
def test_label_gp_two_resumes_of_the_same_epoch_charge_every_attempt(tmp_path, monkeypatch, strategy, control):
    """Epoch 1 is attempted three times (two crashes, two resumes): the parties received three freshly
    noised gradients of its first labels. The resumes' records live in checkpoints, and no checkpoint
    was written between the two crashes. Control: the old count charged 4 epochs for 5 received
    (ε_label 4.75 against 5.38)."""
    from vfl.privacy.defenses import label_privacy

    if control:
        import vfl.engine.engine as engine_module
        from tests.support.release_runs import OldRecovery

        monkeypatch.setattr(Engine, "_label_privacy", old_label_privacy)
        monkeypatch.setattr(engine_module, "Recovery", OldRecovery)  # the lists the old count read
    audit = ReleaseAudit().attach(monkeypatch)
    cfg, path = tiny_cfg(strategy, defenses=[GP]), tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:6")
    run(path, cfg, fails=True)
    OneShotFaults(monkeypatch, "party2@1:8")
    run(path, cfg, resume=True, fails=True)
    engine = run(path, cfg, resume=True)
    summary = engine.summary([])
    received = audit.decoded_count()
    assert received == cfg.train.epochs + 2
    observed = label_privacy(cfg.defenses, epochs=received, delta=cfg.privacy.delta)["epsilon_label"]
    if control:
        assert observed > summary["epsilon_label"] and summary["label_epochs_charged"] == cfg.train.epochs + 1
    else:
        assert observed <= summary["epsilon_label"], (received, summary.get("label_epochs_charged"))
        assert summary["label_epochs_charged"] == received


# ---- seeded noise: a redo is free only if it repeats the same sums ---------------------------------------
def test_seeded_resume_replays_the_same_sums_and_charges_nothing_new(tmp_path, monkeypatch):
    audit = ReleaseAudit().attach(monkeypatch)
    cfg, path = tiny_cfg(privacy={"noise_rng": "seeded"}), tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:6")
    run(path, cfg, fails=True)
    engine = run(path, cfg, resume=True)
    nums = check(audit, engine.strategy, engine.accountant)
    assert len(audit.decodes) > len(set(audit.decodes))  # steps 0-5 of epoch 1 decoded twice, bit for bit
    assert nums["observed_releases"] == cfg.train.epochs == nums["charged_releases"]


@pytest.mark.parametrize("mode", MODES)
def test_seeded_skip_party_then_crash_the_redo_sums_other_parties(tmp_path, monkeypatch, mode):
    """Seeded noise, party1 drops at step 4 of epoch 1, the server dies at step 7; resumed, all three
    parties are back. Step 4's sum was of parties {0, 2} in the failed attempt and of {0, 1, 2} in the
    redo, with the same seeded binomials on the same state: their difference is party1's counts alone.
    The failed attempt is not a replay: it must be charged."""
    audit = ReleaseAudit().attach(monkeypatch)
    cfg = tiny_cfg(params={"secagg_mode": mode}, train={"on_dropout": "skip-party"}, privacy={"noise_rng": "seeded"})
    path = tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@1:4,server@1:7")
    run(path, cfg, fails=True)
    engine = run(path, cfg, resume=True)
    sums = {(s, d) for ph, e, s, _, d in audit.decodes if (ph, e) == ("train", 1)}
    assert len(sums) > STEPS  # epoch 1 produced sums the redo did not repeat
    if mode != "announced":  # (announced skips the dropout's round: its step-4 sum does not exist)
        (two,), (three, *_) = audit.sums[("train", 1, 4, (1, 3))], audit.sums[("train", 1, 4, (1, 2, 3))]
        p = cfg.params  # the server's difference of the two step-4 sums, read as counts: party1's binomials
        counts = (three - two) * p.beta * p.b / cfg.model.tanh_c + p.b / 2
        assert np.allclose(counts, np.round(counts), atol=1e-3) and counts.min() > -0.5 and counts.max() < p.b + .5
    check(audit, engine.strategy, engine.accountant)


@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-begin"])
def test_seeded_dropout_in_an_earlier_epoch_then_crash(tmp_path, monkeypatch, control):
    """party1 drops in epoch 0 (skip-party); epoch 1 starts without it and the server crashes in it; the
    resume redoes epoch 1 with every party. Under seeded noise the two sums of a step differ by party1's counts: the
    short attempt is a release no redo repeats, so it is written fresh and charged. Control: the old
    begin (seeded = never fresh) charged only the redo."""
    from strategies.base.secure import SecureSumStrategy

    if control:
        monkeypatch.setattr(SecureSumStrategy, "replayable", lambda self: True)
    audit = ReleaseAudit().attach(monkeypatch)
    cfg = tiny_cfg(train={"on_dropout": "skip-party"}, privacy={"noise_rng": "seeded"})
    path = tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@0:4,server@1:7")
    run(path, cfg, fails=True)
    engine = run(path, cfg, resume=True)
    summed = {len(parties) for ph, e, _, parties, _ in audit.decodes if ph == "train" and e == 1}
    m = cfg.num_parties
    assert summed == {m - 1, m}  # epoch 1 was released short of party1, then as every party's sum
    if control:
        with pytest.raises(AssertionError, match="observed more than the accountant charged"):
            check(audit, engine.strategy, engine.accountant)
    else:
        check(audit, engine.strategy, engine.accountant)
        (resume,) = engine.summary([])["resumes"]
        assert resume["releases_charged"] >= 1


# ---- a server that asks for forwards of its own choosing -------------------------------------------------
def _lying_server(monkeypatch):
    """Every gradient reply becomes a forward request (no gradient) for a fresh 'epoch' f >= 1000, at the step
    whose batch holds sample 0; the last reply of an epoch asks for nothing, so the driver sees the usual hops.
    Each request is a new round (SecAgg masks it)."""
    from parties.vertical import wire as vw
    from parties.vertical.party import ActiveServer, step_config

    real, calls = ActiveServer.train_step, [0]

    def train_step(node, messages, epoch, step):
        out = real(node, messages, epoch, step)
        calls[0] += 1
        f = 1000 + calls[0]
        more = calls[0] % node.schedule.steps != 0
        s = next(s for s in range(node.schedule.steps) if 0 in node.schedule.train_ids(f, s))
        for m in out:
            m.content.config_records[vw.Record.STEP] = step_config(epoch=f, step=s, forward=more)
            del m.content.array_records[vw.Record.GRAD]
        return out

    monkeypatch.setattr(ActiveServer, "train_step", train_step)


LYING = [("pbm", "semi-honest"), ("pbm", "announced"), ("ldp", None)]


@pytest.mark.parametrize("cap", [None, 3], ids=["default-cap", "cap-epochs"])
@pytest.mark.parametrize("strategy,mode", LYING)
def test_a_lying_server_cannot_ask_for_more_releases_than_the_party_allows(tmp_path, monkeypatch, strategy, mode,
                                                                           cap):
    """Play a lying server (``_lying_server``). Each party counts its own releases per training sample and
    refuses the forward that would take one past its cap (``parties/vertical/release_guard.py``): the run fails naming
    the party, and the server observed at most the cap's releases of sample 0, at most the party's own
    worst-case ε. With ``privacy.max_epoch_attempts = train.epochs`` that is what an honest run is charged."""
    from parties.vertical.release_guard import release_cap
    from tests.support.release_runs import engine_at
    from vfl.core.errors import ReleaseRefused
    from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, epsilon_from_rdp

    audit = ReleaseAudit().attach(monkeypatch)
    _lying_server(monkeypatch)
    cfg = tiny_cfg(strategy, params={"secagg_mode": mode} if mode else None,
                   privacy={"max_epoch_attempts": cap})
    limit = release_cap(cfg)
    engine = engine_at(tmp_path / "run", cfg)
    with pytest.raises(ReleaseRefused, match=rf"party party\d refused .* released {limit} time\(s\), its cap is {limit}") as err:
        engine.run()
    assert err.value.sample == 0 and err.value.count == limit  # the chosen sample, at its cap
    got = audit.sample_releases(engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test), 0)
    assert got <= limit, f"sample 0: {got} releases observed, the parties' cap is {limit}"
    if cap == cfg.train.epochs:
        assert got <= cfg.train.epochs  # no more than an honest run's accountant charges
    grid = engine.grid
    reports = [engine.transport.call(grid.group_of[p], p, "release_report") for p in grid.party_ids]
    assert max(r["releases_max"] for r in reports) == limit
    sched = engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test)
    seen = audit.sample_rdp(engine.strategy, sched, 0)  # sample 0's releases, at the noise each really had
    observed = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=seen, delta=cfg.privacy.delta)[0]
    assert observed <= min(r["epsilon_worst_case"] for r in reports) * (1 + 1e-9)


@pytest.mark.parametrize("strategy,mode", LYING)
def test_a_lying_server_control_without_the_guard_collects_every_request(tmp_path, monkeypatch, strategy, mode):
    """Control: the parties without their release guard (the old code) answer every request: the server
    collects 27 releases of sample 0 in 3 epochs, charged as 3, past any cap the parties' config allows."""
    import strategies.base.vertical as sv
    from parties.vertical.release_guard import guard_for, release_cap
    from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, epsilon_from_rdp

    monkeypatch.setattr(sv, "guard_for", lambda strategy, party: None)
    audit = ReleaseAudit().attach(monkeypatch)
    _lying_server(monkeypatch)
    cfg = tiny_cfg(strategy, params={"secagg_mode": mode} if mode else None)
    engine = run(tmp_path / "run", cfg)
    got = audit.sample_releases(engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test), 0)
    charged = engine.accountant.events[0].count
    assert got == cfg.train.epochs * (STEPS - 1) and got > release_cap(cfg) > charged == cfg.train.epochs
    grid = engine.grid  # what a guarded party would have promised, against what this server observed
    party = engine.transport.hosts[grid.group_of[grid.party_ids[0]]].nodes[grid.party_ids[0]]
    promised = guard_for(engine.strategy, party).report()["epsilon_worst_case"]
    sched = engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test)
    observed = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=audit.sample_rdp(engine.strategy, sched, 0),
                                delta=cfg.privacy.delta)[0]
    assert observed > promised


# ---- label_rr: a label is drawn once per run ---------------------------------------------------------------
@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-count"])
@pytest.mark.parametrize("how", ["resume", "restart"])
def test_label_rr_charges_every_draw_across_a_crash_before_the_first_checkpoint(tmp_path, monkeypatch, how, control):
    """Play a passive party: the gradients of epoch 0's first 6 batches (failed attempt) were computed
    from one randomized-response draw of their labels, the redo's from another (the draws live only in
    the server's checkpointed state: resume without a checkpoint, restart to the start-of-run snapshot).
    Two independent draws of a label cost two ε; the old summary charged one (83 / 92 of the 144 reached
    labels differ between the draws)."""
    from parties.vertical.labels import ServerLabels

    if control:
        monkeypatch.setattr(Engine, "_label_privacy", old_label_privacy)

    draws: list = []
    real = ServerLabels.train_labels

    def train_labels(self, y_train, *, num_classes):
        out = real(self, y_train, num_classes=num_classes)
        if not any(d is out for d in draws):
            draws.append(out)
        return out

    monkeypatch.setattr(ServerLabels, "train_labels", train_labels)
    cfg = tiny_cfg("npq", defenses=[{"kind": "label_rr", "epsilon": 1.0}],
               train={"on_failure": "restart"} if how == "restart" else None)
    path = tmp_path / "run"
    OneShotFaults(monkeypatch, "party1@0:6")
    if how == "resume":
        run(path, cfg, fails=True)
        engine = run(path, cfg, resume=True)
    else:
        engine = run(path, cfg)
    sched = engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test)
    reached = np.concatenate([sched.train_ids(0, s) for s in range(6)])  # their gradients went out in both attempts
    first, *later = draws
    assert later and all(not np.array_equal(first[reached], d[reached]) for d in later)  # independent draws
    summary = engine.summary([])
    if control:
        assert summary["epsilon_label"] == pytest.approx(1.0)  # one draw charged
    else:
        assert summary["epsilon_label"] >= len(draws) * 1.0 and summary["label_draws_charged"] == len(draws)


def test_seeded_skip_party_control_old_amend(tmp_path, monkeypatch):
    """Control: an amended seeded release that stays not fresh (the old amend) is not charged on resume."""
    from vfl.privacy.accounting.events import event_to_dict
    from vfl.privacy.accounting.wal import ReleaseLedger

    def old_amend(self, seq, events):
        if tuple(events) != self._releases[seq].events:
            self._write({"record": "amend", "seq": seq, "events": [event_to_dict(e) for e in events]})

    monkeypatch.setattr(ReleaseLedger, "amend", old_amend)
    with pytest.raises(AssertionError, match="observed more than the accountant charged"):
        test_seeded_skip_party_then_crash_the_redo_sums_other_parties(tmp_path, monkeypatch, "semi-honest")

