"""With ``privacy.bottom_dp`` a party's own worst-case ε (``party_epsilon_worst_case``) covers the DP-SGD steps
of its bottom as well as its releases, each over its cap (``parties/vertical/release_guard.py``).

Play a greedy server: every reply carries the gradient of the party's pending forward (so the party takes a
DP-SGD step) and asks again for the forward of the batch that holds sample 0, in the same epoch. Each answer
is one more release of sample 0 and, with the next message, one more DP-SGD step of a bottom whose batch
held it: the server gets up to ``cap`` of each before the party refuses. Control: the old worst case
composed the releases alone over the cap, below what this server observed (and below the accountant's ε
of an honest run whose cap is ``train.epochs``)."""

from __future__ import annotations

import dataclasses

import pytest

from parties.vertical import release_guard
from parties.vertical.dp_bottom import NoiseSourceDPOptimizer
from parties.vertical.release_guard import release_cap
from tests.support.release_audit import ReleaseAudit
from tests.support.release_runs import SOURCE, engine_at, run, tiny_cfg
from vfl.core.errors import ReleaseRefused
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS, epsilon_from_rdp, event_rdp
from vfl.privacy.accounting.events import DPSGDEvent
from vfl.privacy.accounting.scope import bottom_dp_events

DP = {"noise_multiplier": 1.0, "max_grad_norm": 1.0}
real_party_release_events = release_guard.party_release_events


def old_party_release_events(strategy, *, terms=None):
    """Before: the release events only (the DP-SGD step of the bottom was left out of the worst case)."""
    return tuple(e for e in real_party_release_events(strategy, terms=terms) if not isinstance(e, DPSGDEvent))


def _greedy_server(monkeypatch):
    from parties.vertical import wire as vw
    from parties.vertical.party import ActiveServer, step_config

    real, calls = ActiveServer.train_step, [0]

    def train_step(node, messages, epoch, step):
        out = real(node, messages, epoch, step)  # the gradient of (epoch, step): the parties' pending forward
        calls[0] += 1
        more = calls[0] % node.schedule.steps != 0  # the driver sees its usual hops per epoch
        s = next(s for s in range(node.schedule.steps) if 0 in node.schedule.train_ids(epoch, s))
        for m in out:
            m.content.config_records[vw.Record.STEP] = step_config(epoch=epoch, step=s, forward=more, grad_step=step)
        return out

    monkeypatch.setattr(ActiveServer, "train_step", train_step)


def _dp_steps(monkeypatch):
    """(node, epoch, step) of every DP-SGD step a party's bottom took."""
    real, steps = NoiseSourceDPOptimizer.begin_step, []

    def begin_step(self, *, epoch, step, batch_size):
        steps.append((self.node_id, epoch, step))
        return real(self, epoch=epoch, step=step, batch_size=batch_size)

    monkeypatch.setattr(NoiseSourceDPOptimizer, "begin_step", begin_step)
    return steps


@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-worst-case"])
@pytest.mark.parametrize("strategy,params", [("ldp", None), ("pbm", {"secagg": False})])
def test_a_greedy_server_gets_releases_and_dp_sgd_steps_within_the_partys_worst_case(tmp_path, monkeypatch,
                                                                                      strategy, params, control):
    """(pbm without SecAgg: with it, a party refuses to mask a second forward in one round, which each repeat
    of this server is; without it the server reads each party's counts alone.)"""
    if control:
        monkeypatch.setattr(release_guard, "party_release_events", old_party_release_events)
    audit = ReleaseAudit().attach(monkeypatch)
    dp_steps = _dp_steps(monkeypatch)
    _greedy_server(monkeypatch)
    cfg = tiny_cfg(strategy, params=params, privacy={"bottom_dp": DP})
    limit = release_cap(cfg)
    engine = engine_at(tmp_path / "run", cfg)
    with pytest.raises(ReleaseRefused):
        engine.run()
    sched = engine.strategy.schedule(SOURCE.num_train, SOURCE.num_test)
    assert audit.sample_releases(sched, 0) == limit  # the cap still holds the releases
    held = {}  # per party node: the DP-SGD steps whose batch held sample 0
    for node, epoch, step in dp_steps:
        held[node] = held.get(node, 0) + int(0 in sched.train_ids(epoch, step))
    most = max(held.values())
    assert limit - 1 <= most <= limit  # the server got (nearly) as many DP-SGD steps of sample 0 as releases
    (dpsgd,) = bottom_dp_events(cfg.privacy.bottom_dp)
    seen = audit.sample_rdp(engine.strategy, sched, 0) + event_rdp(dataclasses.replace(dpsgd, count=most),
                                                                   DEFAULT_ORDERS)
    observed = epsilon_from_rdp(orders=DEFAULT_ORDERS, rdp=seen, delta=cfg.privacy.delta)[0]
    grid = engine.grid
    promised = min(engine.transport.call(grid.group_of[p], p, "release_report")["epsilon_worst_case"]
                   for p in grid.party_ids)
    if control:
        assert observed > promised, (observed, promised)
    else:
        assert observed <= promised * (1 + 1e-9), (observed, promised)


@pytest.mark.parametrize("control", [False, True], ids=["fixed", "control-old-worst-case"])
def test_an_honest_run_is_charged_no_more_than_the_partys_worst_case(tmp_path, monkeypatch, control):
    """``privacy.max_epoch_attempts = train.epochs``: the party allows exactly what an honest run does, so its
    worst case covers the accountant's end-to-end ε (releases and DP-SGD over the epochs)."""
    if control:
        monkeypatch.setattr(release_guard, "party_release_events", old_party_release_events)
    cfg = tiny_cfg("ldp", privacy={"bottom_dp": DP, "max_epoch_attempts": 3})
    s = run(tmp_path / "run", cfg).summary([])
    assert s["epsilon_scope"] == "end-to-end" and s["party_release_cap"] == cfg.train.epochs
    if control:
        assert s["party_epsilon_worst_case"] < s["epsilon"]
    else:
        assert s["party_epsilon_worst_case"] == pytest.approx(s["epsilon"], rel=1e-9)
