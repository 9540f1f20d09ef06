"""Secure aggregation end to end: masks cancel, dropouts recover, failures are loud."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.errors import ConfigError, PartyFailure, ProtocolError
from vfl.secagg import (
    SecAggClient,
    SecAggServer,
    decode_fixed_sum,
    derive_pair_keys,
    encode_fixed,
    fixed_point_bits,
)
from vfl.secagg.keys import generate_private_key

_rounds = itertools.count()


def make_session(
    num: int, threshold: int, session: bytes = b"test-session"
) -> tuple[list[SecAggClient], dict[int, bytes]]:
    """Clients 0..num-1 after key agreement and share exchange, plus the public-key table."""
    clients = [SecAggClient(i, range(num), threshold, session) for i in range(num)]
    keys = {c.party_id: c.public_key() for c in clients}
    for c in clients:
        c.receive_public_keys(keys)
    sent = {c.party_id: c.make_shares() for c in clients}
    for c in clients:
        c.receive_shares({s: env[c.party_id] for s, env in sent.items() if s != c.party_id})
    return clients, keys


def inputs(num: int, n: int, k: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i: rng.integers(0, 1 << k, size=n, dtype=np.uint64) for i in range(num)}


def mod_sum(xs: list[np.ndarray], k: int, n: int) -> np.ndarray:
    total = np.zeros(n, dtype=np.uint64)
    for x in xs:
        total += x
    return (total % (1 << k)).astype(np.int64)


@st.composite
def protocol_case(draw: st.DrawFn) -> tuple[int, int, int, int, int]:
    num = draw(st.integers(2, 64))
    threshold = draw(st.integers(1, min(num - 1, 8)))
    k = draw(st.integers(8, 32))
    n = draw(st.integers(0, 300))
    seed = draw(st.integers(0, 2**32 - 1))
    return num, threshold, k, n, seed


@settings(max_examples=25, deadline=None)
@given(protocol_case())
def test_masks_cancel_exactly(case: tuple[int, int, int, int, int]) -> None:
    num, threshold, k, n, seed = case
    clients, keys = make_session(num, threshold)
    xs = inputs(num, n, k, seed)
    rnd = next(_rounds)
    masked = {c.party_id: c.mask(xs[c.party_id], round_id=rnd, name="emb", k=k) for c in clients}
    server = SecAggServer(range(num), threshold, k, b"test-session")
    total = server.aggregate(masked, round_id=rnd, name="emb", public_keys=keys)
    assert total.dtype == np.int64 and total.shape == (n,)
    np.testing.assert_array_equal(total, mod_sum(list(xs.values()), k, n))


@settings(max_examples=25, deadline=None)
@given(protocol_case(), st.data())
def test_one_dropout_is_recovered(
    case: tuple[int, int, int, int, int], data: st.DataObject
) -> None:
    num, threshold, k, n, seed = case
    dropped = data.draw(st.integers(0, num - 1))
    clients, keys = make_session(num, threshold)
    xs = inputs(num, n, k, seed)
    masked = {c.party_id: c.mask(xs[c.party_id], round_id=0, name="emb", k=k) for c in clients}
    del masked[dropped]  # dropped after masking: its vector never reaches the server
    server = SecAggServer(range(num), threshold, k, b"test-session")
    server.declare_dropped([dropped], round_id=0)
    revealed = {c.party_id: c.reveal_shares([dropped]) for c in clients if c.party_id != dropped}
    total = server.aggregate(
        masked, round_id=0, name="emb", public_keys=keys, revealed_shares=revealed
    )
    survivors = [xs[i] for i in range(num) if i != dropped]
    np.testing.assert_array_equal(total, mod_sum(survivors, k, n))


def test_two_dropouts_and_cached_key_in_next_round() -> None:
    num, t, k, n = 7, 4, 16, 50
    clients, keys = make_session(num, t)
    server = SecAggServer(range(num), t, k, b"test-session")
    xs = inputs(num, n, k - 3, 1)
    masked = {c.party_id: c.mask(xs[c.party_id], round_id=1, name="e", k=k) for c in clients}
    for gone in (0, 5):
        del masked[gone]
    revealed = {c.party_id: c.reveal_shares([0, 5]) for c in clients if c.party_id in masked}
    total = server.aggregate(
        masked, round_id=1, name="e", public_keys=keys, revealed_shares=revealed
    )
    np.testing.assert_array_equal(total, mod_sum([xs[i] for i in masked], k, n))
    # Next round: the server already holds the dropped keys, no shares are needed.
    live = [c for c in clients if c.party_id not in (0, 5)]
    masked2 = {c.party_id: c.mask(xs[c.party_id], round_id=2, name="e", k=k) for c in live}
    total2 = server.aggregate(masked2, round_id=2, name="e", public_keys=keys)
    np.testing.assert_array_equal(total2, mod_sum([xs[c.party_id] for c in live], k, n))


def test_too_few_shares_raises_party_failure_naming_party_and_round() -> None:
    num, t, k = 5, 3, 12
    clients, keys = make_session(num, t)
    server = SecAggServer(range(num), t, k, b"test-session")
    masked = {c.party_id: c.mask(np.arange(10), round_id=7, name="e", k=k) for c in clients}
    del masked[2]
    revealed = {i: clients[i].reveal_shares([2]) for i in (0, 1)}  # 2 shares < threshold 3
    with pytest.raises(PartyFailure) as info:
        server.aggregate(masked, round_id=7, name="e", public_keys=keys, revealed_shares=revealed)
    assert info.value.party == "2" and info.value.round == "7"
    assert "party 2" in str(info.value) and "round 7" in str(info.value)


def test_no_shares_at_all_is_a_failure_not_a_zero_fill() -> None:
    clients, keys = make_session(3, 1)
    server = SecAggServer(range(3), 1, 10, b"test-session")
    masked = {
        c.party_id: c.mask(np.ones(4, dtype=int), round_id=0, name="e", k=10) for c in clients
    }
    del masked[1]
    with pytest.raises(PartyFailure, match="party 1 failed in round 0"):
        server.aggregate(masked, round_id=0, name="e", public_keys=keys)


def test_late_message_from_dropped_party_is_refused() -> None:
    num, t, k = 4, 2, 10
    clients, keys = make_session(num, t)
    server = SecAggServer(range(num), t, k, b"test-session")
    masked = {c.party_id: c.mask(np.arange(6), round_id=3, name="e", k=k) for c in clients}
    late = masked.pop(3)
    server.declare_dropped([3], round_id=3)
    with pytest.raises(ProtocolError, match="declared dropped"):
        server.accept(3, round_id=3, name="e")
    revealed = {c.party_id: c.reveal_shares([3]) for c in clients[:3]}
    server.aggregate(masked, round_id=3, name="e", public_keys=keys, revealed_shares=revealed)
    with pytest.raises(ProtocolError):  # the late vector for the same round
        server.aggregate({**masked, 3: late}, round_id=3, name="e", public_keys=keys)
    with pytest.raises(ProtocolError, match="already aggregated"):
        server.aggregate(masked, round_id=3, name="e", public_keys=keys)
    nxt = {c.party_id: c.mask(np.arange(6), round_id=4, name="e", k=k) for c in clients}
    with pytest.raises(ProtocolError, match="party 3"):  # and in any later round of the session
        server.aggregate(nxt, round_id=4, name="e", public_keys=keys)


def test_rekey_readmits_a_dropped_party() -> None:
    num, t, k = 3, 1, 8
    clients, keys = make_session(num, t)
    server = SecAggServer(range(num), t, k, b"test-session")
    masked = {c.party_id: c.mask(np.arange(5), round_id=0, name="e", k=k) for c in clients[:2]}
    revealed = {c.party_id: c.reveal_shares([2]) for c in clients[:2]}
    server.aggregate(masked, round_id=0, name="e", public_keys=keys, revealed_shares=revealed)
    old = keys[2]
    for c in clients:
        c.rekey(b"session-2")
    server.rekey(b"session-2")
    new_keys = {c.party_id: c.public_key() for c in clients}
    assert new_keys[2] != old
    for c in clients:
        c.receive_public_keys(new_keys)
        c.make_shares()
    masked = {c.party_id: c.mask(np.arange(5), round_id=0, name="e", k=k) for c in clients}
    total = server.aggregate(masked, round_id=0, name="e", public_keys=new_keys)
    np.testing.assert_array_equal(total, 3 * np.arange(5))


def test_client_protocol_errors() -> None:
    clients, keys = make_session(3, 2)
    c = clients[0]
    c.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    with pytest.raises(ProtocolError, match="already masked"):
        c.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    with pytest.raises(ProtocolError, match="own key"):
        c.reveal_shares([0])
    fresh = SecAggClient(0, [0, 1, 2], 2, b"test-session")
    with pytest.raises(ProtocolError, match="public keys"):
        fresh.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    fresh.receive_public_keys({1: keys[1], 2: keys[2]})
    with pytest.raises(ProtocolError, match="make_shares"):
        fresh.mask(np.zeros(3, dtype=int), round_id=1, name="e", k=8)
    with pytest.raises(ProtocolError, match="lacks public keys"):
        SecAggClient(0, [0, 1, 2], 2, b"s").receive_public_keys({1: keys[1]})
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


def test_server_refuses_shares_of_live_parties_and_forged_shares() -> None:
    clients, keys = make_session(4, 2)
    server = SecAggServer(range(4), 2, 8, b"test-session")
    masked = {c.party_id: c.mask(np.arange(3), round_id=0, name="e", k=8) for c in clients[:3]}
    peek = {0: clients[0].reveal_shares([1, 3])}  # share of live party 1 must not be combined
    with pytest.raises(ProtocolError, match="live parties"):
        server.aggregate(masked, round_id=0, name="e", public_keys=keys, revealed_shares=peek)
    server2 = SecAggServer(range(4), 2, 8, b"test-session")
    revealed = {c.party_id: c.reveal_shares([3]) for c in clients[:3]}
    forged = bytearray(revealed[0][3])
    forged[5] ^= 0xFF
    revealed[0] = {3: bytes(forged)}
    with pytest.raises(ProtocolError, match="does not match"):
        server2.aggregate(masked, round_id=0, name="e", public_keys=keys, revealed_shares=revealed)


@pytest.mark.parametrize(("parties", "threshold"), [([0], 1), ([0, 1, 2], 0), ([0, 1, 2], 3)])
def test_bad_threshold_or_party_set_is_config_error(parties: list[int], threshold: int) -> None:
    with pytest.raises(ConfigError):
        SecAggServer(parties, threshold, 8, b"s")
    with pytest.raises(ConfigError):
        SecAggClient(parties[0], parties, threshold, b"s")


def test_pair_keys_are_symmetric_and_session_bound() -> None:
    a, b = generate_private_key(), generate_private_key()
    ab = derive_pair_keys(own_key=a, peer_public=b.public_key(), own_id=1, peer_id=4, session=b"s")
    ba = derive_pair_keys(own_key=b, peer_public=a.public_key(), own_id=4, peer_id=1, session=b"s")
    other = derive_pair_keys(
        own_key=a, peer_public=b.public_key(), own_id=1, peer_id=4, session=b"t"
    )
    assert ab == ba
    assert ab.mask_seed != ab.share_key
    assert other.mask_seed != ab.mask_seed


def test_fixed_point_through_secure_aggregation() -> None:
    num, clip, scale = 6, 1.0, 2.0**12
    k = fixed_point_bits(num, clip, scale)
    clients, keys = make_session(num, 3)
    rng = np.random.default_rng(5)
    emb = {i: rng.uniform(-1, 1, size=(4, 8)) for i in range(num)}
    masked = {
        c.party_id: c.mask(
            encode_fixed(emb[c.party_id], scale=scale, clip=clip, k=k), round_id=0, name="h", k=k
        )
        for c in clients
    }
    server = SecAggServer(range(num), 3, k, b"test-session")
    total = server.aggregate(masked, round_id=0, name="h", public_keys=keys)
    assert total.shape == (4, 8)
    got = decode_fixed_sum(total, scale=scale, k=k)
    np.testing.assert_allclose(got, sum(emb.values()), atol=num / (2 * scale))


def test_server_rejects_malformed_masked_vectors() -> None:
    clients, keys = make_session(2, 1)
    server = SecAggServer(range(2), 1, 8, b"test-session")
    with pytest.raises(ProtocolError, match="party 1"):
        server.aggregate(
            {0: np.zeros(3, dtype=np.uint32), 1: np.array([0, 300, 0])},
            round_id=0,
            name="e",
            public_keys=keys,
        )
    with pytest.raises(ProtocolError, match="shapes"):
        server.aggregate(
            {0: np.zeros(3, dtype=np.uint32), 1: np.zeros(4, dtype=np.uint32)},
            round_id=1,
            name="e",
            public_keys=keys,
        )
