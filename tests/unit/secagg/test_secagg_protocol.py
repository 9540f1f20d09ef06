"""Secure aggregation end to end: masks cancel, dropouts recover, failures are loud."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.secagg_helpers import SESSION, inputs, make_session, mod_sum, run_round
from vfl.core.errors import ConfigError, PartyFailure, ProtocolError
from vfl.secagg import (
    SecAggClient,
    SecAggServer,
    ShareRequest,
    decode_fixed_sum,
    derive_pair_keys,
    encode_fixed,
    fixed_point_bits,
    round_key,
)
from vfl.secagg.keys import PAIR_LABEL, SELF_LABEL, generate_private_key


@st.composite
def protocol_case(draw: st.DrawFn) -> tuple[int, int, int, int, int, int]:
    num = draw(st.integers(3, 64))
    threshold = draw(st.integers(1, min(num - 1, 8)))
    drops = draw(st.integers(0, min(threshold - 1, num - max(threshold + 1, 2))))  # >= max(t, 2, c + 2), c = t - 1
    k = draw(st.integers(8, 32))
    n = draw(st.integers(0, 120))
    seed = draw(st.integers(0, 2**32 - 1))
    return num, threshold, drops, k, n, seed


@settings(max_examples=30, deadline=None)
@given(protocol_case(), st.data())
def test_masks_cancel_with_zero_to_t_minus_1_dropouts(case: tuple[int, ...], data: st.DataObject) -> None:
    num, threshold, drops, k, n, seed = case
    dropped = data.draw(st.lists(st.integers(0, num - 1), min_size=drops, max_size=drops, unique=True))
    clients, server = make_session(num, threshold, k)
    xs = inputs(range(num), n, k, seed)
    total, summed = run_round(clients, server, xs, rnd="r0", k=k, dropped=dropped)
    assert total.dtype == np.int64 and total.shape == (n,)
    assert summed == tuple(p for p in range(num) if p not in dropped)
    np.testing.assert_array_equal(total, mod_sum([xs[p] for p in summed], k, n))
    # the next round runs over the remaining parties without further recovery
    total2, summed2 = run_round(clients, server, xs, rnd="r1", k=k)
    assert summed2 == summed
    np.testing.assert_array_equal(total2, mod_sum([xs[p] for p in summed], k, n))


def test_vanished_survivor_keeps_its_input_via_seed_shares() -> None:
    # colluders declared 0: t + max(t, 2) > M, seed shares are safe to reveal (with c = t - 1 = 3 they are not:
    # t + max(t, 2, c + 2) = 9 <= M + c = 9, the round aborts instead; malicious mode rebuilds it)
    clients, server = make_session(6, 4, 12, colluders=0)
    xs = inputs(range(6), 40, 10, 1)
    total, summed = run_round(clients, server, xs, rnd="r", k=12, vanish=[4])
    assert summed == (0, 1, 2, 3, 4, 5)  # 4 sent its vector, its self mask came from 4 seed shares
    np.testing.assert_array_equal(total, mod_sum(xs.values(), 12, 40))
    assert server.dropped == {4}  # its seed is known now: it leaves the session


def test_vanished_survivor_with_a_dropout_aborts_the_round() -> None:
    """Its pair masks with the dropped party cannot be removed, and redeclaring it dropped is what
    honest clients refuse (it would open its input): the round aborts, naming party and round."""
    clients, server = make_session(6, 3, 12)
    xs = inputs(range(6), 40, 10, 2)
    with pytest.raises(PartyFailure) as info:
        run_round(clients, server, xs, rnd="r", k=12, dropped=[0], vanish=[4])
    assert info.value.party == "4" and info.value.round == "r"
    assert server.dropped == {0, 4}


def test_too_few_seed_shares_raises_party_failure_naming_party_and_round() -> None:
    clients, server = make_session(5, 3, 12, colluders=0)
    masked = {p: c.mask(np.arange(10), round_id=7, name="e", k=12) for p, c in clients.items()}
    request = server.open_round(masked, round_id=7, name="e")
    reveals = {p: clients[p].unmask(round_id=7, survivors=request.survivors, dropped=()) for p in (0, 1, 3, 4)}
    share_request = server.add_unmask(7, reveals)
    assert isinstance(share_request, ShareRequest) and share_request.owners == (2,)
    shares = {p: clients[p].reveal_shares(round_id=7, owners=[2]) for p in (0, 1)}  # 2 shares < t = 3
    with pytest.raises(PartyFailure) as info:
        server.add_shares(7, shares)
    assert info.value.party == "2" and info.value.round == "7"
    assert "party 2" in str(info.value) and "round 7" in str(info.value)


def test_a_sum_of_one_party_is_refused_not_zero_filled() -> None:
    clients, server = make_session(3, 1, 10)
    masked = {p: c.mask(np.ones(4, dtype=int), round_id=0, name="e", k=10) for p, c in clients.items()}
    with pytest.raises(PartyFailure, match="fewer than max"):
        server.open_round({0: masked[0]}, round_id=0, name="e")


def test_late_vector_from_dropped_party_is_refused_for_the_session() -> None:
    clients, server = make_session(4, 2, 10)
    xs = inputs(range(4), 6, 8, 3)
    late = clients[3].mask(xs[3], round_id="r", name="emb", k=10)
    masked = {p: clients[p].mask(xs[p], round_id="r", name="emb", k=10) for p in (0, 1, 2)}
    request = server.open_round(masked, round_id="r", name="emb")
    assert request.dropped == (3,)
    with pytest.raises(ProtocolError, match="declared dropped"):
        server.accept(3, round_id="r", name="emb")
    server.add_unmask("r", {p: clients[p].unmask(round_id="r", survivors=request.survivors, dropped=(3,))
                            for p in (0, 1, 2)})
    server.result("r")
    assert late.shape == (6,)
    with pytest.raises(ProtocolError, match="declared dropped"):  # the late vector, in any later round
        server.open_round({0: masked[0], 1: masked[1], 3: late}, round_id="r2", name="emb")
    with pytest.raises(ProtocolError, match="already aggregated"):
        server.open_round(masked, round_id="r", name="emb")


def test_a_new_session_readmits_a_dropped_party() -> None:
    clients, server = make_session(3, 1, 8)
    xs = {p: np.arange(5) for p in range(3)}
    run_round(clients, server, xs, rnd="a", k=8, dropped=[2])
    with pytest.raises(ProtocolError, match="declared dropped"):
        server.accept(2, round_id="b", name="emb")
    clients, server = make_session(3, 1, 8)  # new keys, new seeds, new server state
    total, summed = run_round(clients, server, xs, rnd="a", k=8)
    assert summed == (0, 1, 2)
    np.testing.assert_array_equal(total, 3 * np.arange(5))


def test_client_protocol_errors() -> None:
    clients, server = make_session(3, 2, 8)
    c = clients[0]
    c.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    with pytest.raises(ProtocolError, match="already masked"):
        c.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    c.mask(np.zeros(3, dtype=int), round_id=2, name="e", k=8)
    with pytest.raises(ProtocolError, match="go back"):
        c.mask(np.zeros(3, dtype=int), round_id=1, name="f", k=8)
    fresh = SecAggClient(0, [0, 1, 2], 2, SESSION)
    with pytest.raises(ProtocolError, match="public keys"):
        fresh.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    fresh.receive_public_keys({1: clients[1].public_key(), 2: clients[2].public_key()})
    with pytest.raises(ProtocolError, match="make_shares"):
        fresh.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    with pytest.raises(ProtocolError, match="lacks public keys"):
        SecAggClient(0, [0, 1, 2], 2, b"s").receive_public_keys({1: clients[1].public_key()})
    with pytest.raises(ConfigError):
        c.mask(np.array([256]), round_id=9, name="e", k=8)  # does not fit in Z_{2^8}


def test_tampered_or_misrouted_share_is_rejected() -> None:
    clients, _ = make_session(3, 2)
    sent = clients[1].make_shares()
    blob = bytearray(sent[0])
    blob[-1] ^= 1
    with pytest.raises(ProtocolError, match="authentication"):
        clients[0].receive_shares({1: bytes(blob)})
    with pytest.raises(ProtocolError):  # envelope for party 2 handed to party 0
        clients[0].receive_shares({1: sent[2]})


def test_server_refuses_wrong_reveals_and_forged_shares() -> None:
    clients, server = make_session(4, 2, 8)
    masked = {p: clients[p].mask(np.arange(3), round_id=0, name="e", k=8) for p in (0, 1, 2, 3)}
    request = server.open_round({p: masked[p] for p in (0, 1, 2)}, round_id=0, name="e")
    with pytest.raises(ProtocolError, match="not a survivor"):
        server.add_unmask(0, {3: clients[3].unmask(round_id=0, survivors=(0, 1, 2, 3), dropped=())})
    clients2, server2 = make_session(4, 3, 8, colluders=0)
    masked2 = {p: c.mask(np.arange(3), round_id=0, name="e", k=8) for p, c in clients2.items()}
    req2 = server2.open_round(masked2, round_id=0, name="e")
    share_req = server2.add_unmask(0, {p: clients2[p].unmask(round_id=0, survivors=req2.survivors, dropped=())
                                       for p in (0, 1, 2)})
    assert isinstance(share_req, ShareRequest)
    shares = {p: clients2[p].reveal_shares(round_id=0, owners=[3]) for p in (0, 1)}
    forged = bytearray(shares[0][3])
    forged[0] ^= 0xFF  # wrong x-coordinate
    shares[0] = {3: bytes(forged)}
    with pytest.raises(ProtocolError, match="index"):
        server2.add_shares(0, shares)
    assert request.dropped == (3,)


@pytest.mark.parametrize(("parties", "threshold"), [([0], 1), ([0, 1, 2], 0), ([0, 1, 2], 3)])
def test_bad_threshold_or_party_set_is_config_error(parties: list[int], threshold: int) -> None:
    with pytest.raises(ConfigError):
        SecAggServer(parties, threshold, 8, b"s")
    with pytest.raises(ConfigError):
        SecAggClient(parties[0], parties, threshold, b"s")


def test_pair_keys_are_symmetric_session_bound_and_round_keys_are_fresh() -> None:
    a, b = generate_private_key(), generate_private_key()
    ab = derive_pair_keys(own_key=a, peer_public=b.public_key(), own_id=1, peer_id=4, session=b"s")
    ba = derive_pair_keys(own_key=b, peer_public=a.public_key(), own_id=4, peer_id=1, session=b"s")
    other = derive_pair_keys(own_key=a, peer_public=b.public_key(), own_id=1, peer_id=4, session=b"t")
    assert ab == ba
    assert ab.mask_secret != ab.share_key
    assert other.mask_secret != ab.mask_secret
    keys = {round_key(ab.mask_secret, label=lab, session=b"s", round_id=r, name=n)
            for lab in (PAIR_LABEL, SELF_LABEL) for r in ("train:0:1", "train:0:2", 12, 1) for n in ("e", "2e")}
    assert len(keys) == 16  # every (label, round, name) gets its own key
    assert ab.mask_secret not in keys


def test_fixed_point_through_secure_aggregation() -> None:
    num, clip, scale = 6, 1.0, 2.0**12
    k = fixed_point_bits(num, clip, scale)
    clients, server = make_session(num, 3, k)
    rng = np.random.default_rng(5)
    emb = {i: rng.uniform(-1, 1, size=(4, 8)) for i in range(num)}
    codes = {i: encode_fixed(e, scale=scale, clip=clip, k=k) for i, e in emb.items()}
    total, _ = run_round(clients, server, codes, rnd="h", k=k)
    assert total.shape == (4, 8)
    got = decode_fixed_sum(total, scale=scale, k=k)
    np.testing.assert_allclose(got, sum(emb.values()), atol=num / (2 * scale))


def test_server_rejects_malformed_masked_vectors() -> None:
    _, server = make_session(2, 1, 8)
    with pytest.raises(ProtocolError, match="party 1"):
        server.open_round({0: np.zeros(3, dtype=np.uint32), 1: np.array([0, 300, 0])}, round_id=0, name="e")
    with pytest.raises(ProtocolError, match="shapes"):
        server.open_round({0: np.zeros(3, dtype=np.uint32), 1: np.zeros(4, dtype=np.uint32)}, round_id=1,
                          name="e")
