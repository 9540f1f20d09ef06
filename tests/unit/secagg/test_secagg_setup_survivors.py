"""A set-up over fewer parties than the roster (a restart after skip-party dropouts sets up over the survivors),
played by a lying server: it declares honest parties "dropped" at set-up to shrink the session to the victim and
a colluder, whose pair key then strips the victim's masked input. A party cannot tell a real dropout from a
claimed one; what bounds the attack is its own smallest set, max(t, 2, colluders + 2) (``SetupTerms``). Real
party nodes after a real announced run (M = 4, t = 3, one colluder) and the pure SecAgg objects; the control is
the rule without the size
bound (semi-honest, where colluders + 2 exceeds t). Sets of the smallest size are accepted: the server then
gets sums of >= 3 parties, as it could per round anyway."""

from __future__ import annotations

import numpy as np
import pytest

from parties.secagg import party as secagg_nodes
from parties.secagg.party import SetupTerms
from tests.engine.secagg.test_secagg_announced_resetup import (  # noqa: F401 - the fixture `run`
    C,
    T,
    _eval,
    _input,
    _setup,
    run,
)
from tests.support.secagg_helpers import SESSION, inputs, make_session, run_round
from vfl.core.errors import ConfigError
from vfl.secagg import SecAggClient, SecAggServer
from vfl.secagg.consistency import MaliciousServer


def _session(ids: list[int], *, threshold: int, roster: int, k: int) -> tuple[dict[int, SecAggClient], SecAggServer]:
    """Clients of a session over ``ids`` drawn from a roster of ``roster`` parties, keys and seed shares exchanged."""
    return make_session(len(ids), threshold, k, ids=ids, roster=roster)


def test_semi_honest_honest_parties_declared_dropped_open_the_victim_without_the_size_rule():
    """Semi-honest, M = 4, t = 2, one colluder: a session of {victim, colluder} is refused at set-up (3 needed). The
    control (the rule without the size bound accepts it; the library takes t = |S|): one round's sum minus the
    colluder's input is the victim's input."""
    terms = SetupTerms(parties=(0, 1, 2, 3), threshold=2, colluders=1, mode="semi-honest")
    with pytest.raises(MaliciousServer, match="round setup: party 0 .*at least 3 of them after dropouts"):
        terms.check(me=0, parties=[0, 1], threshold=2, colluders=1, mode="semi-honest")
    assert secagg_nodes.smallest_set(2, 1) == 3
    k, n = 16, 8
    # the control: what a party accepting {0, 1} runs (guarding against no colluder: quorum max(t, 2) = 2)
    clients, server = make_session(2, 2, k, ids=[0, 1], roster=4, colluders=0)
    xs = inputs(range(2), n, k, seed=3)
    total, summed = run_round(clients, server, xs, rnd="train:0:0", k=k)
    assert summed == (0, 1)
    victim = (total - xs[1].astype(np.int64)) % (1 << k)
    assert np.array_equal(victim, xs[0].astype(np.int64))  # x_victim exact


@pytest.mark.parametrize(("ids", "threshold", "colluders", "mode", "ok"), [
    ([1, 2, 3], 3, 1, "semi-honest", True),  # the survivors of a dropout, the run's terms
    ([1, 2, 3, 4], 3, 1, "semi-honest", True),  # the whole roster
    ([1, 2], 3, 1, "semi-honest", False),  # below max(t, 2, colluders + 2) = 3
    ([2, 3, 4], 3, 1, "semi-honest", False),  # leaves this party (1) out
    ([1, 2, 3, 5], 3, 1, "semi-honest", False),  # a party outside the roster
    ([1, 2, 3], 2, 1, "semi-honest", False),  # a smaller t
    ([1, 2, 3], 3, 0, "semi-honest", False),  # fewer colluders
    ([1, 2, 3], 3, 1, "announced", False),  # another mode
])
def test_setup_terms_accept_only_a_large_enough_subset_with_the_own_terms(ids, threshold, colluders, mode, ok):
    terms = SetupTerms(parties=(1, 2, 3, 4), threshold=3, colluders=1, mode="semi-honest")
    if ok:
        terms.check(me=1, parties=ids, threshold=threshold, colluders=colluders, mode=mode)
    else:
        with pytest.raises(MaliciousServer, match="round setup: party 1"):
            terms.check(me=1, parties=ids, threshold=threshold, colluders=colluders, mode=mode)


@pytest.mark.parametrize(("ids", "threshold", "roster", "ok"), [
    ([0, 1], 2, 4, True),  # part of a roster of 4 keeps the run's t = |S|
    ([0, 1, 2], 3, 4, True),
    ([0, 1, 2], 3, 0, False),  # the whole roster: t <= M - 1 as before
    ([0, 1, 2], 3, 3, False),
    ([0, 1], 3, 4, False),  # t > |S|: no round could ever open
    ([0, 1, 2], 4, 5, False),  # t > |S|
])
def test_a_session_over_part_of_the_roster_keeps_the_runs_t(ids, threshold, roster, ok):
    if ok:
        clients, server = _session(ids, threshold=threshold, roster=roster, k=8)
        assert server.parties == tuple(ids) and all(c.threshold == threshold for c in clients.values())
    else:
        with pytest.raises(ConfigError, match="threshold"):
            SecAggServer(ids, threshold, 8, SESSION, roster=roster)
        with pytest.raises(ConfigError, match="threshold"):
            SecAggClient(ids[0], ids, threshold, SESSION, roster=roster)
