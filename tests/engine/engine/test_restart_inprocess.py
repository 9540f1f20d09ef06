"""``train.on_failure: restart`` over the in-process transport: a host that died (``VFL_FAULT_INJECT``) is
rebuilt from its specs, as Ray replaces a dead actor, and the run finishes. Before, the restart reset the live
hosts and left the crashed one dead: the redone set-up failed with "its host died" until the budget ran out."""

from __future__ import annotations

import os

import pytest

import strategies  # noqa: F401
from tests.support.release_runs import SOURCE, tiny_cfg
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.runtime import faults
from vfl.runtime.host import NodeHost
from vfl.runtime.transport.inprocess import InProcessTransport


def _one_shot(mp: pytest.MonkeyPatch, spec: str) -> None:
    """The fault fires once (the redone epoch would otherwise die at the same round again)."""
    mp.setenv(faults.FAULT_ENV, spec)
    real = faults._die

    def die(fault, replies, *, in_driver):
        os.environ.pop(faults.FAULT_ENV, None)
        real(fault, replies, in_driver=in_driver)

    mp.setattr(faults, "_die", die)


def _cfg(strategy: str = "pbm", **params):
    return tiny_cfg(strategy, params=params, train={"epochs": 2, "on_failure": "restart", "max_restarts": 1})


@pytest.mark.parametrize(("strategy", "params"), [("pbm", {}), ("pbm", {"secagg": True}),
                                                  ("npq+secagg", {"secagg_mode": "announced"})])
def test_a_crashed_host_is_rebuilt_and_the_run_finishes(monkeypatch, strategy, params):
    _one_shot(monkeypatch, "party1@1:2")
    transport = InProcessTransport()
    kept: list[int] = []
    real_reset = NodeHost.reset

    def reset(self, states):  # which nodes a restart rebuilt from their old selves (Node.keep_from)
        kept.extend(s.node_id for s in self.specs)
        return real_reset(self, states)

    monkeypatch.setattr(NodeHost, "reset", reset)
    engine = Engine(_cfg(strategy, **params), transport, SOURCE, progress=False)
    try:
        hosts = dict(transport.hosts)

        def on_started(eng):
            hosts.update(transport.hosts)

        engine.on_started = on_started
        result = engine.run()
        (restart,) = result.summary["restarts"]
        assert "party1" in restart["party"] and restart["epoch"] == 1
        assert len(result.history) == 2 and not transport.dead
        party1 = next(n for n, g in transport.groups.items() if "party1" in [s.name for s in g.specs])
        assert transport.hosts[party1] is not hosts[party1]  # the dead host was replaced ...
        assert not set(transport.groups[party1].node_ids) & set(kept)  # ... and started empty, like a new actor
        live = [n for n in transport.hosts if n != party1]
        assert all(transport.hosts[n] is hosts[n] for n in live)  # live hosts rebuilt their nodes in place
        assert {i for n in live for i in transport.groups[n].node_ids} <= set(kept)
    finally:
        transport.shutdown()


def test_the_control_on_failure_fail_ends_the_run(monkeypatch):
    _one_shot(monkeypatch, "party1@1:2")
    cfg = tiny_cfg("pbm", train={"epochs": 2, "on_failure": "fail"})
    with pytest.raises(PartyFailure, match="party1"):
        Engine(cfg, InProcessTransport(), SOURCE, progress=False).run()
