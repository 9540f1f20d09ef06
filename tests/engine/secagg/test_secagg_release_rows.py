"""SecAgg modes semi-honest and malicious, the per-row rule at release: a server that drives training freezes the
bottoms (forward requests without gradients, so npq+secagg's exact fixed-point codes repeat), keeps every party in
one epoch and declares party v dropped in the next (a legal dropout: the survivors reveal their pair keys with v and
release their self streams over S minus v, signed in mode malicious). The same samples' rows summed over S and over
S minus v differ by v's row. Played on real party nodes after a real npq+secagg run, the server's own SecAggServer
opening the sums; the control is the party without the rule (``SecAggClient._check_release`` patched out)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.mods.encoding import read_encoded
from parties.secagg import wire as sw
from parties.secagg.party import SecAggParty, _records, cfg_of, reveal_of
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from parties.vertical.wire import SERVER_ID
from simulations.benchmarks.secagg_dropout import AUDIT
from tests.support.helpers import BlobSource
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.faults import FAULT_ENV
from vfl.runtime.message import BROADCAST, round_tag
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg import SecAggClient
from vfl.secagg.consistency import RowReleaseRefused
from vfl.secagg.server import ConsistencyRequest, SecAggServer

M = 4


@contextmanager
def _finished(mode: str) -> Iterator[tuple[dict[int, SecAggParty], SecAggServer]]:
    """(party nodes, the server's SecAggServer) after a finished npq+secagg run in ``mode`` (M = 4)."""
    cfg = load_run_config({"num_parties": M, "seed": 5, "strategy": "npq+secagg-audited", "params": {"secagg_mode": mode},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 60, "lr": 0.05}})
    transport = InProcessTransport()
    try:
        Engine(cfg, transport, BlobSource(num_parties=M), progress=False).run()
        nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
        yield {nid: n for nid, n in nodes.items() if isinstance(n, SecAggParty)}, nodes[SERVER_ID].secagg
    finally:
        transport.shutdown()


def _ask(nodes: dict[int, SecAggParty], kind: str, rnd: str, who: list[int], dropped: bool, **values: object) -> dict:
    tag = round_tag(int(rnd.split(":")[1]), int(rnd.split(":")[2]), sw.Phase.RECOVERY) if dropped else rnd
    msg = wire.make(kind, src=SERVER_ID, dst=BROADCAST, round=tag, content=_records(**values))
    return {p: nodes[p].handle([msg])[0] for p in who}


def _round(nodes: dict[int, SecAggParty], srv: SecAggServer, epoch: int, step: int, group: list[int]) -> np.ndarray:
    """Forward only (no gradient: the bottoms stay frozen); the vectors of ``group`` open, the others dropped."""
    rnd = round_tag(epoch, step)
    req = wire.make(vw.Kind.TRAIN_FORWARD, src=SERVER_ID, dst=BROADCAST, round=rnd,
                    content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=step, forward=True)}))
    masked = {p: read_encoded(nodes[p].handle([req])[0]).values for p in sorted(nodes)}
    request = srv.open_round({p: masked[p] for p in group}, round_id=rnd, name=vw.Record.EMB)
    live, gone = list(request.survivors), list(request.dropped)
    signed = {}
    if isinstance(request, ConsistencyRequest):  # mode malicious: the survivors sign the (consistent) set
        sigs = _ask(nodes, sw.Kind.CONSISTENCY, rnd, live, bool(gone), **{sw.Key.ROUND: rnd, sw.Key.SURVIVORS: live})
        request = srv.add_signatures(rnd, {p: bytes(cfg_of(m)[sw.Key.SIG]) for p, m in sigs.items()})
        signed = {sw.Key.SIG_PARTIES: [p for p, _ in request.signatures], sw.Key.SIGS: [s for _, s in request.signatures]}
    replies = _ask(nodes, sw.Kind.UNMASK, rnd, live, bool(gone), **{sw.Key.ROUND: rnd, sw.Key.SURVIVORS: live,
                                                                     sw.Key.DROPPED: gone, **signed})
    assert srv.add_unmask(rnd, {p: reveal_of(m, round_id=rnd) for p, m in replies.items()}) is None
    total, summed = srv.result(rnd)
    assert list(summed) == group
    return np.asarray(total, dtype=np.int64) & (1 << srv.k) - 1


def _attack(nodes: dict[int, SecAggParty], srv: SecAggServer) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    """Epoch 10 over every party, epoch 11 with v declared dropped: (v's rows opened, v's true codes) by sample."""
    v, *rest = sorted(nodes)
    sched, full = nodes[v].schedule, (1 << srv.k) - 1
    sums: list[dict[int, np.ndarray]] = [{}, {}]
    truth: dict[int, np.ndarray] = {}
    for i, (epoch, group) in enumerate(((10, sorted(nodes)), (11, rest))):
        for step in range(sched.steps):
            total = _round(nodes, srv, epoch, step, group)
            ids = sched.train_ids(epoch, step).tolist()
            sums[i].update(zip(ids, total, strict=True))
            if i == 0:
                truth.update(zip(ids, np.asarray(nodes[v].mod_state[AUDIT][round_tag(epoch, step)], np.int64) & full,
                                 strict=True))
    return {s: (sums[0][s] - sums[1][s]) & full for s in sums[1]}, truth


@pytest.mark.parametrize("mode", ["semi-honest", "malicious"])
def test_a_claimed_dropout_over_frozen_bottoms_opens_every_row_of_v_without_the_rule_and_none_with_it(mode, monkeypatch):
    with monkeypatch.context() as old, _finished(mode) as (nodes, srv):  # the control: no rule at release
        old.setattr(SecAggClient, "_check_release", lambda self, rnd, live: None)
        opened, truth = _attack(nodes, srv)
    assert len(truth) == 240 and all(np.array_equal(opened[s], truth[s]) for s in truth)  # every row of v, exact
    with _finished(mode) as (nodes, srv), pytest.raises(RowReleaseRefused, match=r"sample train:\d+'s row was "
                                                                                r"released before with these codes"):
        _attack(nodes, srv)  # epoch 10 opens (one set per row); the first round of epoch 11 is refused


@pytest.mark.parametrize("mode", ["semi-honest", "malicious"])
def test_an_honest_run_with_a_real_dropout_still_finishes(mode, monkeypatch):
    """party2 dies in epoch 0 (skip-party): later rounds release over S minus party2; the bottoms move between
    epochs, so no row of exact codes was released before under S and no party refuses."""
    monkeypatch.setenv(FAULT_ENV, "party2@0:2")
    cfg = load_run_config({"num_parties": M, "seed": 1, "strategy": "npq+secagg-audited", "params": {"secagg_mode": mode},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 3, "batch_size": 50, "on_dropout": "skip-party"}})
    transport = InProcessTransport()
    try:
        res = Engine(cfg, transport, BlobSource(num_parties=M, num_train=300), progress=False).run()
        nodes = [n for h in transport.hosts.values() for n in h.nodes.values() if isinstance(n, SecAggParty)]
    finally:
        transport.shutdown()
    assert len(res.history) == 3
    assert len(nodes) == M - 1 and all(n.masked_before for n in nodes)  # the survivors kept their released rows
    sets = {frozenset(s) for n in nodes for s in n.masked_before.values()}  # rows released over S, then S minus party2
    everyone = frozenset(range(1, M + 1))
    assert sets == {everyone, frozenset(n.node_id for n in nodes)}
