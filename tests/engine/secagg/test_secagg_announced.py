"""SecAgg mode ``announced``: the tests through in-process engine runs."""

from __future__ import annotations

import os

import pytest
import torch

import strategies  # noqa: F401
from parties.secagg import wire as sw
from parties.secagg.party import announced_of
from parties.secagg.plan import secagg_round_plan
from parties.vertical import wire as vw
from tests.support.helpers import BlobSource
from vfl.core.errors import (
    PartyFailure,
)
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg.consistency import AnnouncementRefused

SOURCE = BlobSource(num_parties=3)


def _run(cfg, source=SOURCE, transport=None):
    transport = transport or InProcessTransport()
    try:
        engine = Engine(cfg, transport, source, progress=False)
        result = engine.run()
        nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
        params = [p.detach().clone() for nid in sorted(nodes)
                  for p in (nodes[nid].head if nid == 0 else nodes[nid].bottom).parameters()]
        return result, params, engine.ledger
    finally:
        transport.shutdown()


# ---- the runtime ------------------------------------------------------------------------------------------
def _cfg(mode: str, noise: str = "seeded", colluders: int | None = None, **train):
    return load_run_config({"num_parties": 3, "seed": 3, "strategy": "pbm",
                            "params": {"b": 8, "secagg_mode": mode},
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": 40, "lr": 0.05, **train},  # 6 steps an epoch
                            "privacy": {"noise_rng": noise, "colluders": colluders}})


class Reviving(InProcessTransport):
    """In-process hosts whose restart revives a crashed host, as Ray's restart of a dead actor does (the
    fault fires once: the replacement lives)."""

    def restart(self, states, *, timeout_s=120.0):
        os.environ.pop(FAULT_ENV, None)
        self.dead.clear()
        return super().restart(states, timeout_s=timeout_s)


def test_announced_trains_the_same_parameters_as_semi_honest_with_half_the_messages():
    (a, pa, la), (s, ps, ls) = _run(_cfg("announced")), _run(_cfg("semi-honest"))
    assert len(pa) == len(ps) and all(torch.equal(x, y) for x, y in zip(pa, ps, strict=True))
    assert a.summary["final_test_acc"] == s.summary["final_test_acc"]
    epochs, steps, evals, m = 2, 6, 1, 3  # 240 / 40 training steps, 60 test samples in one eval batch, M parties
    assert [h.kind for h in secagg_round_plan(mode="announced").hops] == [vw.Kind.TRAIN_FORWARD] * 2
    def msgs(ledger, phase):
        t = ledger.totals(phase)
        return t["messages_up"] + t["messages_down"]

    train_a, train_s = la.totals("train"), ls.totals("train")
    # per step M embeddings up and one broadcast down (+ each epoch's start broadcast)
    assert msgs(la, "train") == epochs * (1 + steps * (m + 1))
    assert msgs(ls, "train") == msgs(la, "train") + epochs * steps * (1 + m)  # the unmask exchange
    assert msgs(ls, "eval") - msgs(la, "eval") == epochs * evals * (1 + m)
    assert train_a["bytes_up"] + train_a["bytes_down"] < train_s["bytes_up"] + train_s["bytes_down"]
    assert "announces every party" in a.summary["epsilon_assumption"]


def test_a_failed_attempt_is_redone_and_its_releases_stay_charged(monkeypatch):
    clean = _run(_cfg("announced", "crypto"))[0]  # fresh noise: a redone step is a new release
    got = {}
    for mode in ("announced", "semi-honest"):
        monkeypatch.setenv(FAULT_ENV, "party1@1:3")  # party1 dies in epoch 1, step 3: its input is missing
        got[mode] = _run(_cfg(mode, "crypto", on_failure="restart", max_restarts=1), transport=Reviving())[0]
    (restart,) = got["announced"].summary["restarts"]
    assert restart["epoch"] == 1 and restart["releases_charged"] >= 1
    assert got["announced"].summary["epsilon"] == got["semi-honest"].summary["epsilon"]  # the same releases
    assert got["announced"].summary["epsilon"] > clean.summary["epsilon"]  # the failed attempt counts
    monkeypatch.setenv(FAULT_ENV, "party1@1:3")
    with pytest.raises(PartyFailure, match="party1"):
        _run(_cfg("announced", on_failure="fail"))


def test_the_servers_announcement_reaches_the_parties_in_its_signed_broadcast(monkeypatch):
    from parties.secagg.server import SecAggActiveServer
    from vfl.runtime.node import handles

    setup = SecAggActiveServer.on_setup
    told = []

    def announce_two(node, messages):  # a server that announces {party0, party1} from its first broadcast on
        out = setup(node, messages)
        node.secagg.announce([1, 2])
        return out

    real_train_step = SecAggActiveServer.train_step

    def spy(node, messages, epoch, step):
        out = real_train_step(node, messages, epoch, step)
        told.extend(announced_of(m, [1, 2, 3]) for m in out)
        return out

    monkeypatch.setattr(SecAggActiveServer, "on_setup", handles(sw.Kind.SETUP)(announce_two))
    monkeypatch.setattr(SecAggActiveServer, "train_step", spy)
    with pytest.raises(Exception, match=r"round train:0:1: party 3 .*does not hold party 3") as exc:
        _run(_cfg("announced", colluders=0))  # no colluder declared: a set of 2 is big enough, but not without me
    assert told == [frozenset({1, 2})]  # sent once, in step 0's broadcast (the forward of step 1)
    assert isinstance(exc.value, (AnnouncementRefused, PartyFailure))
