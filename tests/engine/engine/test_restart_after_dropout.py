"""A restart after a skip-party dropout (``train.on_dropout: skip-party`` + ``train.on_failure: restart``): the
dropped party stays out, the rebuilt server learns again who left, and the new SecAgg session is set up over the
survivors with the run's t (each party checks its own terms: ``SetupTerms``). Before, the rebuilt server expected
every party: the set-up failed with "needs a public key from every party" (without SecAgg: "missing nodes")."""

from __future__ import annotations

import os

import pytest

import strategies  # noqa: F401
from parties.secagg.party import SecAggParty
from parties.vertical.wire import SERVER_ID
from tests.support.release_runs import SOURCE, tiny_cfg
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.runtime import faults
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg.consistency import MaliciousServer

FAULTS = "party1@0:4,server@1:3"  # party1 drops in epoch 0 (skip-party); the server's host dies in epoch 1


def _once(mp: pytest.MonkeyPatch, spec: str) -> None:
    """Each fault fires once (the redone epoch would otherwise die at the same round again)."""
    mp.setenv(faults.FAULT_ENV, spec)
    real = faults._die

    def die(fault, replies, *, in_driver):
        left = [f for f in os.environ.get(faults.FAULT_ENV, "").split(",") if faults.parse_faults(f) != (fault,)]
        os.environ[faults.FAULT_ENV] = ",".join(left)
        real(fault, replies, in_driver=in_driver)

    mp.setattr(faults, "_die", die)


def _run(monkeypatch, strategy: str, params: dict, **extra):
    _once(monkeypatch, FAULTS)
    cfg = tiny_cfg(strategy, params=params, train={"epochs": 2, "on_dropout": "skip-party", "on_failure": "restart"},
                   **extra)
    transport = InProcessTransport()
    try:
        result = Engine(cfg, transport, SOURCE, progress=False).run()
        nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
        return result, nodes
    finally:
        transport.shutdown()


@pytest.mark.parametrize(("strategy", "params"), [
    ("pbm", {"secagg": True, "secagg_mode": "semi-honest"}),
    ("npq+secagg", {"secagg_mode": "announced"}),
    ("pbm", {"secagg": True, "secagg_mode": "malicious"}),
    ("pbm", {"secagg": False}),
    ("ldp", {}),
], ids=["semi-honest", "announced", "malicious-auth", "no-secagg", "ldp"])
def test_a_restart_after_a_dropout_sets_up_over_the_survivors(monkeypatch, strategy, params):
    # tiny_cfg declares privacy.colluders: 0: 2 survivors of 3 reach max(t, 2) = 2. Undeclared (t - 1 = 1
    # colluder) every party refuses sets under 3, and the restart is refused (the next test)
    result, nodes = _run(monkeypatch, strategy, params, auth=params.get("secagg_mode") == "malicious")
    assert [d["party"] for d in result.summary["dropouts"]] == ["party1"]
    (restart,) = result.summary["restarts"]
    assert restart["party"] == "server" and restart["epoch"] == 1
    assert len(result.history) == 2
    server = nodes[SERVER_ID]
    survivors = sorted(n for n, node in nodes.items() if n != SERVER_ID)
    assert server.party_ids == survivors == [1, 3]  # the rebuilt server was told again: party1 (node 2) left
    if strategy != "ldp" and params.get("secagg", True):
        assert server.secagg.parties == tuple(survivors)  # the new session: the survivors, the run's t
        assert all(isinstance(nodes[p], SecAggParty) and nodes[p].client.parties == tuple(survivors)
                   for p in survivors)


@pytest.mark.parametrize("privacy", [{"colluders": 1}, {"colluders": None}], ids=["declared", "undeclared"])
def test_the_parties_refuse_a_restart_set_up_below_their_smallest_set(monkeypatch, privacy):
    """colluders = 1, declared or undeclared (t - 1 = 1): every party refuses sets under max(t, 2, colluders + 2)
    = 3; after party1 left only 2 survive, so the restart's set-up is refused (the run stops; a resume brings every
    party back)."""
    with pytest.raises((MaliciousServer, PartyFailure), match="at least 3 of them after dropouts|fewer than max"):
        _run(monkeypatch, "pbm", {"secagg": True}, privacy=privacy)
