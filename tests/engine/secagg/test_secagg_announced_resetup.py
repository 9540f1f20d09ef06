"""SecAgg mode ``announced``, the server's set-up message as the attack: a lying server that sends a live party
node a fresh ``query.secagg_setup`` (a new session) resets everything the party's client remembers (which rounds
and which inputs it masked over which set), and one whose set-up names weaker terms (a smaller roster, t = 1,
colluders = 0) shrinks the smallest set the party accepts. Played against real party nodes after a real run
(npq+secagg: deterministic fixed-point codes, so an evaluation batch asked again is the same input); the control
is a party node built without its own terms and memory (the behaviour before the fix)."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from parties.mods.encoding import read_encoded
from parties.secagg import wire as sw
from parties.secagg.party import SecAggParty, cfg_of
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from parties.vertical.wire import SERVER_ID
from simulations.benchmarks.secagg_dropout import AUDIT
from strategies.base.secure import SETUP_ROUND
from tests.support.helpers import BlobSource
from vfl.attacks.secagg import announced
from vfl.attacks.secagg.curious import _strip
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.message import BROADCAST, round_tag
from vfl.runtime.node import Node
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.secagg import SecAggClient, new_session_id
from vfl.secagg.announce import encode_set
from vfl.secagg.consistency import AnnouncementRefused, MaliciousServer
from vfl.secagg.masking import pair_sign

M, T, C = 4, 3, 1  # the run's terms: every announced set has >= max(t, 2, c + 2) = 3 parties


@pytest.fixture
def run(monkeypatch):
    """(party nodes, k, transport) of a finished announced run (M = 4, t = 3, one colluder assumed), the audit hook on."""
    cfg = load_run_config({"num_parties": M, "seed": 5, "strategy": "npq+secagg-audited",
                           "params": {"secagg_mode": "announced", "threshold": T},
                           "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                           "train": {"epochs": 1, "batch_size": 60, "lr": 0.05}, "privacy": {"colluders": C}})
    transport = InProcessTransport()
    try:
        Engine(cfg, transport, BlobSource(num_parties=M), progress=False).run()
        nodes = {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items()}
        yield {nid: n for nid, n in nodes.items() if isinstance(n, SecAggParty)}, nodes[SERVER_ID].k, transport
    finally:
        transport.shutdown()


def _forget(nodes: dict[int, SecAggParty]) -> None:
    """The control: party nodes as before the fix (the set-up's terms trusted, no memory across sessions)."""
    for n in nodes.values():
        n.terms = None
        n.masked_before = None


def _setup(nodes: dict[int, SecAggParty], *, ids: list[int], threshold: int, colluders: int) -> None:
    """The server's set-up of a new session over ``ids`` (messages 1-3; mode announced has no seed shares)."""
    start = wire.make(sw.Kind.SETUP, src=SERVER_ID, dst=BROADCAST, round=SETUP_ROUND, content=wire.records(**{
        sw.Record.SECAGG: wire.config(**{sw.Key.SESSION: new_session_id(), sw.Key.PARTIES: ids, sw.Key.THRESHOLD:
                                         threshold, sw.Key.MODE: "announced", sw.Key.COLLUDERS: colluders})}))
    replies = {p: cfg_of(nodes[p].handle([start])[0]) for p in ids}  # each party's key, signed by its identity
    roster = wire.make(sw.Kind.ROSTER, src=SERVER_ID, dst=BROADCAST, round=SETUP_ROUND, content=wire.records(**{
        sw.Record.SECAGG: wire.config(**{sw.Key.IDS: ids, sw.Key.KEYS: [bytes(replies[p][sw.Key.PUBLIC_KEY]) for p in ids],
                                         sw.Key.KEY_SIGS: [bytes(replies[p][sw.Key.KEY_SIG]) for p in ids]})}))
    for p in ids:
        nodes[p].handle([roster])


EVAL = round_tag(0, 0, "eval")


def _eval(node: SecAggParty, members: list[int], ids: list[int]) -> np.ndarray:
    """Party ``node``'s masked embedding of evaluation batch 0 (epoch 0), the set ``members`` announced."""
    req = wire.make(vw.Kind.EVAL_FORWARD, src=SERVER_ID, dst=BROADCAST, round=EVAL, content=wire.records(**{
        vw.Record.STEP: step_config(epoch=0, step=0, forward=True),
        sw.Record.SECAGG: wire.config(**{sw.Key.ANNOUNCED: encode_set(members, ids)})}))
    (reply,) = node.handle([req])
    return read_encoded(reply).values.astype(np.int64)


def _sessions(nodes: dict[int, SecAggParty], sets: list[list[int]], k: int) -> list[np.ndarray]:
    """One new session per set, each asking its members the same evaluation batch: the sums mod 2^k."""
    ids = sorted(nodes)
    sums = []
    for group in sets:
        _setup(nodes, ids=ids, threshold=T, colluders=C)
        sums.append(sum(_eval(nodes[p], group, ids) for p in group) & (1 << k) - 1)
    return sums


def _input(node: SecAggParty) -> np.ndarray:
    """The party's plain fixed-point codes of the evaluation batch (the audit hook)."""
    return np.asarray(node.mod_state[AUDIT][EVAL], dtype=np.int64)


def test_a_new_session_per_set_solves_one_input_without_the_memory_and_is_refused_with_it(run):
    parties, k, _ = run
    v, a, b, c = sorted(parties)
    sets = [[v, a, b], [v, a, c], [v, b, c], [a, b, c]]  # each >= max(t, 2, c + 2); s1 + s2 + s3 - 2 s4 = 3 x_v
    memory = {p: n.masked_before for p, n in parties.items()}
    terms = {p: n.terms for p, n in parties.items()}
    _forget(parties)
    s = _sessions(parties, sets, k)  # the control: each session accepts the same input over another set
    x_v = ((s[0] + s[1] + s[2] - 2 * s[3]) * pow(3, -1, 1 << k)) & (1 << k) - 1
    assert np.array_equal(x_v, _input(parties[v]) & (1 << k) - 1)  # one party's exact input
    for p, n in parties.items():  # the fixed nodes: their own terms, one memory over their sessions
        n.terms, n.masked_before = terms[p], memory[p]
    everyone = sorted(parties)  # the run masked this batch over every party; a new session may ask it again so
    assert len(_sessions(parties, [everyone], k)) == 1
    with pytest.raises(AnnouncementRefused, match=rf"party {v} .*masked before over the set \[{v}, {a}, {b}, {c}\]"):
        _sessions(parties, sets[:1], k)  # but never over another set


def test_a_setup_naming_weaker_terms_lets_a_colluder_open_the_victim_and_is_refused(run):
    parties, k, _ = run
    v, ally = sorted(parties)[:2]  # ally colludes with the server (privacy.colluders = 1): its pair keys are known
    terms = parties[v].terms
    _forget(parties)
    _setup(parties, ids=[v, ally], threshold=1, colluders=0)  # a session of two with t = 1: the smallest set is 2
    y = _eval(parties[v], [v, ally], [v, ally])
    key = parties[ally].client._pair_key(v, EVAL, vw.Record.EMB)
    opened = _strip(y.astype(np.uint32), [(key, pair_sign(v, ally))], rnd=EVAL, name=vw.Record.EMB, k=k)
    assert np.array_equal(opened.astype(np.int64), _input(parties[v]) & (1 << k) - 1)  # the control: x_v exact
    assert terms is not None and terms.threshold == T and terms.colluders == C
    parties[v].terms = terms
    for ids, t, c in (([v, ally], T, C), (sorted(parties), 1, C), (sorted(parties), T, 0)):
        with pytest.raises(MaliciousServer, match=rf"round setup: party {v} .*run config says"):
            _setup(parties, ids=ids, threshold=t, colluders=c)


def _restarted(transport: InProcessTransport) -> dict[int, SecAggParty]:
    """The driver (the server's) orders a restart: every host rebuilds its nodes (freshly initialised models)."""
    transport.restart({})
    return {nid: n for h in transport.hosts.values() for nid, n in h.nodes.items() if isinstance(n, SecAggParty)}


def _per_restart(transport: InProcessTransport, sets: list[list[int]], k: int, v: int) -> tuple[list[np.ndarray], np.ndarray]:
    """One restart and one session per set, each asking its members the rebuilt model's evaluation batch 0."""
    sums, x_v = [], np.zeros(0, dtype=np.int64)
    for group in sets:
        nodes = _restarted(transport)
        sums.extend(_sessions(nodes, [group], k))
        if v in group:
            x_v = _input(nodes[v])
    return sums, x_v


def test_a_restart_per_set_solves_one_input_without_the_kept_memory_and_is_refused_with_it(run, monkeypatch):
    parties, k, transport = run
    v, a, b, c = sorted(parties)
    sets = [[v, a, b], [v, a, c], [v, b, c], [a, b, c]]
    _per_restart(transport, [[v, a, b, c]], k, v)  # the rebuilt model's batch over every party: accepted
    with pytest.raises(AnnouncementRefused, match=rf"party {v} .*masked before over the set \[{v}, {a}, {b}, {c}\]"):
        _per_restart(transport, sets, k, v)  # the rebuilt node kept its memory (SecAggParty.keep_from)
    with monkeypatch.context() as old:  # the control: a rebuilt node starts with an empty memory
        old.setattr(SecAggParty, "keep_from", Node.keep_from)
        s, x_v = _per_restart(transport, sets, k, v)
    opened = ((s[0] + s[1] + s[2] - 2 * s[3]) * pow(3, -1, 1 << k)) & (1 << k) - 1
    assert np.array_equal(opened, x_v & (1 << k) - 1)  # one party's exact input


# ---- the same samples in other batches: the per-row rule ------------------------------------------------------
@pytest.mark.parametrize("m", [3, 4, 6])
def test_the_same_rows_in_other_batches_are_refused_and_solve_the_victim_without_the_rule(m):
    assert announced.same_rows(num=m, threshold=2) == (0, True)
    assert announced.same_rows(num=m, threshold=2, weak=True) == (1, False)  # control: v's rows, batch digests differ


def _train_epoch(nodes: dict[int, SecAggParty], epoch: int, group: list[int], k: int) -> dict[int, np.ndarray]:
    """The server asks ``group`` every step of ``epoch`` (forward only: no gradient, the bottoms stay frozen):
    the sum of each sample's row, by sample id."""
    ids, rows = sorted(nodes), {}
    steps = nodes[group[0]].schedule.steps
    for step in range(steps):
        req = wire.make(vw.Kind.TRAIN_FORWARD, src=SERVER_ID, dst=BROADCAST, round=round_tag(epoch, step),
                        content=wire.records(**{vw.Record.STEP: step_config(epoch=epoch, step=step, forward=True),
                                                sw.Record.SECAGG: wire.config(**{sw.Key.ANNOUNCED: encode_set(group, ids)})}))
        total = sum(read_encoded(nodes[p].handle([req])[0]).values.astype(np.int64) for p in group) & (1 << k) - 1
        rows.update(zip(nodes[group[0]].schedule.train_ids(epoch, step).tolist(), total, strict=True))
    return rows


def test_a_frozen_model_and_reshuffled_batches_solve_every_training_row_without_the_row_rule(run, monkeypatch):
    parties, k, _ = run
    v, a, b, c = sorted(parties)
    sets = [[v, a, b], [v, a, c], [v, b, c], [a, b, c]]
    with pytest.raises(AnnouncementRefused, match=r"sample train:\d+'s row was masked before"):
        for e, group in enumerate(sets):
            _train_epoch(parties, 10 + e, group, k)
    with monkeypatch.context() as old:  # the control: the party as before (no per-row rule, batch digests only)
        old.setattr(SecAggClient, "_check_rows", lambda self, *args, **kw: [])
        s = [_train_epoch(parties, 20 + e, group, k) for e, group in enumerate(sets)]
    inv3, full = pow(3, -1, 1 << k), (1 << k) - 1
    truth = {}
    for step in range(parties[v].schedule.steps):
        codes = parties[v].mod_state[AUDIT][round_tag(20, step)]
        truth.update(zip(parties[v].schedule.train_ids(20, step).tolist(), np.asarray(codes, dtype=np.int64), strict=True))
    opened = {i: ((s[0][i] + s[1][i] + s[2][i] - 2 * s[3][i]) * inv3) & full for i in truth}
    assert len(truth) == 240 and all(np.array_equal(opened[i], truth[i] & full) for i in truth)  # every row of v
