"""Colluders in modes semi-honest and malicious (issue #39.1): the server tells a victim v and c colluders "you
alone survived"; the colluders sign and hand over every key they hold, and v's input opens. Each party now refuses
any survivor set (and signs none, and answers no seed-share request leaving a set) under max(t, 2, c + 2), c the
declared ``privacy.colluders`` or, undeclared, t - 1 (what the threshold tolerates).

The control plays clients whose quorum ignores the colluders (max(t, 2): the rule before) and opens the victim;
the property test plays real clients with arbitrary survivor views, colluder sets of at most c (and fewer than t)
and share requests, and checks by linear algebra that no honest input is determined.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from strategies.base.secure import shamir_threshold
from tests.support.secagg_helpers import determined_inputs
from vfl.attacks.secagg import colluders, lying
from vfl.core.errors import RevealRefused
from vfl.secagg.consistency import quorum, tolerated
from vfl.secagg.shares import SHARE_BYTES

CASES = [(m, shamir_threshold(m, 0)) for m in (4, 5, 7, 10)]  # the default t = ceil(2(M-1)/3)


@pytest.mark.parametrize("mode", ["semi-honest", "malicious"])
@pytest.mark.parametrize(("num", "threshold"), CASES)
def test_victim_and_t_minus_1_colluders_open_it_on_the_old_quorum_and_nothing_now(num: int, threshold: int,
                                                                                   mode: str) -> None:
    """t - 1 colluders, declared (c = t - 1) or not (the default is t - 1 now; it was 0): the control (quorum
    max(t, 2)) opens the victim's input exactly, every time; today's clients refuse the set."""
    c = threshold - 1
    for declared in (c, 0):  # the control: declared t - 1 or the old default 0, the quorum ignored them both
        assert colluders.colluder_split(num=num, threshold=threshold, mode=mode, colluders=c, declared=declared,
                                    weak=True, paths=("view",))[0] == 1
    for declared in (c, None):
        assert colluders.colluder_split(num=num, threshold=threshold, mode=mode, colluders=c, declared=declared,
                                    paths=("view",)) == (0, True)


def test_one_undeclared_colluder_opened_the_seed_share_path_and_the_default_now_refuses() -> None:
    """M = 5, t = 3, one colluder nobody declared: before, undeclared meant c = 0 (quorum 3, seed shares on since
    t + 3 > M): v told {v, colluder, r}, the holders rebuild v's seed with the colluder's share, r reveals its pair
    key with v. Undeclared is t - 1 = 2 now: quorum 4, no seed shares in semi-honest."""
    assert colluders.colluder_split(num=5, threshold=3, mode="semi-honest", colluders=1, declared=0,
                                paths=("seed",)) == (1, False)  # control: the old default
    assert colluders.colluder_split(num=5, threshold=3, mode="semi-honest", colluders=1, paths=("seed",)) == (0, True)
    assert colluders.colluder_split(num=5, threshold=3, mode="malicious", colluders=1, declared=0,
                                paths=("seed",)) == (0, True)  # the consistency check caught it even then


@pytest.mark.parametrize(("num", "threshold"), CASES)
def test_announced_refuses_the_victim_and_undeclared_colluders(num: int, threshold: int) -> None:
    c = threshold - 1
    assert colluders.colluder_split(num=num, threshold=threshold, mode="announced", colluders=c, declared=0,
                                weak=True) == (1, False)  # control: a client without the size rule
    assert colluders.colluder_split(num=num, threshold=threshold, mode="announced", colluders=c) == (0, True)


def test_the_quorum_counts_the_declared_colluders_or_t_minus_1() -> None:
    assert [tolerated(t) for t in (1, 2, 3, 6)] == [0, 1, 2, 5]
    assert tolerated(6, 1) == 1 and tolerated(2, 0) == 0  # a user may declare fewer
    assert quorum(1, 0) == 2 and quorum(3, 0) == 3 and quorum(3, 2) == 4 and quorum(2, 3) == 5


def test_share_requests_count_every_owner_of_the_round() -> None:
    """Two share requests of one round, each leaving a quorum, together leave fewer: the second is refused (each
    share comes with the holder's view key with its owner; all but its own would open its release)."""
    clients, _ = lying._clients(6, 5, "malicious", colluders=0)
    lying.honest_setup(clients)
    for c in clients.values():
        c.mask([1, 2], round_id="r", name="emb", k=8)
    sig = {p: clients[p].sign_survivors(round_id="r", survivors=range(6)) for p in clients}
    clients[0].unmask(round_id="r", survivors=range(6), dropped=(), signatures=sig)
    clients[0].reveal_shares(round_id="r", owners=[1])  # 5 left >= quorum 5
    with pytest.raises(RevealRefused, match="fewer than max\\(t, 2, colluders \\+ 2\\) = 5 survivors would remain"):
        clients[0].reveal_shares(round_id="r", owners=[2])


# ---- the property: no survivor view, colluder set or share request determines an honest input ----------------

def _play(*, num: int, threshold: int, mode: str, declared: int | None, allies: list[int],
          views: dict[int, set[int]], requests: dict[int, list[set[int]]], weak: bool = False) -> list[int]:
    """Real clients; each honest party in ``views`` told those survivors (the rest dropped), then asked for the
    seed shares of each set of owners in ``requests``; the colluders hand over everything. The honest parties
    whose input the server then determines."""
    clients, _ = lying._clients(num, threshold, mode, colluders=declared, cls=lying._ColluderBlind if weak else None)
    lying.honest_setup(clients)
    view = lying._view(clients, threshold, 12)
    lying._mask(clients, view, 12, seed=num)
    parties = sorted(clients)
    told = {p: (live | {p}, set(parties) - live - {p}) for p, live in views.items()}
    lying._ask(clients, view, told, [False], allies=allies)
    for h, asks in requests.items():
        for owners in asks:
            try:
                got = clients[h].reveal_shares(round_id=lying.ROUND, owners=sorted(owners - {h}))
            except RevealRefused:
                continue
            for owner, raw in got.items():
                view.seed_shares.setdefault(owner, {})[h] = raw
                view.view_keys[(lying.ROUND, h, owner)] = raw[SHARE_BYTES:SHARE_BYTES + 32]
    lying._hand_over(view, clients, allies)
    return determined_inputs(view, parties, colluders=allies)


def test_the_checker_finds_the_control() -> None:
    """Not vacuous: with the old quorum the checker flags the victim of ``colluder_split`` (M = 5, t = 3, 2
    colluders), and the victim alone; today's clients leave it undetermined."""
    for mode in ("semi-honest", "malicious"):
        play = {"num": 5, "threshold": 3, "mode": mode, "declared": None, "allies": [1, 2],
                "views": {0: {0, 1, 2}}, "requests": {}}
        assert _play(**play, weak=True) == [0]  # type: ignore[arg-type]
        assert _play(**play) == []  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 6), st.data())
def test_no_survivor_view_colluder_set_or_share_request_determines_an_honest_input(num: int,
                                                                                   data: st.DataObject) -> None:
    threshold = data.draw(st.integers(1, num - 1), label="t")
    mode = data.draw(st.sampled_from(["semi-honest", "malicious"]), label="mode")
    declared = data.draw(st.one_of(st.none(), st.integers(0, num - 2)), label="privacy.colluders")
    c = min(tolerated(threshold, declared), threshold - 1)  # colluders within the documented tolerance
    parties = list(range(num))
    allies = sorted(data.draw(st.sets(st.sampled_from(parties), max_size=c), label="colluders"))
    honest = [p for p in parties if p not in allies]
    victim = data.draw(st.sampled_from(honest), label="victim")
    # the sets that matter (all, all but v, v and the colluders) and random ones; each honest party told one
    sets = [set(parties), set(parties) - {victim}, {victim, *allies},
            *data.draw(st.lists(st.sets(st.sampled_from(parties)), max_size=2), label="sets")]
    views = {p: data.draw(st.sampled_from(sets), label=f"view {p}") for p in honest}
    requests = {p: data.draw(st.lists(st.sets(st.sampled_from(parties)), max_size=2), label=f"shares {p}")
                for p in honest}  # "they vanished": up to two seed-share requests each
    assert _play(num=num, threshold=threshold, mode=mode, declared=declared, allies=allies, views=views,
                 requests=requests) == []
