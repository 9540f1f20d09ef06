"""The curious server with everything it received: it cannot unmask (a) a dropped party's earlier
rounds, (b) its late vector, (c) a single survivor; the same attacks succeed when a rule is broken.
And fewer than t seed shares are consistent with ANY seed."""

from __future__ import annotations

import os

import numpy as np
from Crypto.Protocol.SecretSharing import Shamir, _Element
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.secagg_helpers import inputs, make_session, mod_sum, new_view, run_round
from vfl.attacks.secagg.curious import unmasked
from vfl.secagg import round_key
from vfl.secagg.keys import (
    PAIR_LABEL,
    SELF_LABEL,
    derive_pair_keys,
    load_public_key,
    private_key_bytes,
)

NUM, T, K, N, DEAD, R = 6, 3, 12, 32, 4, 3  # party DEAD dies in round R


def _session():
    """Rounds 0..R-1 with everyone, round R without DEAD (its vector is kept as a late one), R+1 after."""
    clients, server = make_session(NUM, T, K)
    view = new_view(server)
    xs = {r: inputs(range(NUM), N, K - 3, 100 + r) for r in range(R + 2)}
    for r in range(R + 2):
        total, summed = run_round(clients, server, xs[r], rnd=f"r{r}", k=K, dropped=[DEAD] if r == R else [],
                                  view=view)
        np.testing.assert_array_equal(total, mod_sum([xs[r][p] for p in summed], K, N))
    return clients, server, view, xs


def test_the_three_attacks_fail_and_the_sums_are_exact() -> None:
    clients, server, view, xs = _session()
    assert view.sums[f"r{R}"][1] == tuple(p for p in range(NUM) if p != DEAD)
    assert (f"r{R}", DEAD) in view.vectors  # the curious server kept the late vector
    # (a) the dropped party's earlier rounds
    assert not any(unmasked(view, DEAD, f"r{r}", xs[r][DEAD]) for r in range(R))
    # (b) its late vector of the round it was declared dropped in
    assert not unmasked(view, DEAD, f"r{R}", xs[R][DEAD])
    # (c) any single survivor, in the recovered round and around it
    for r in range(R + 2):
        for p in view.active[f"r{r}"]:
            if p != DEAD or r < R:
                assert not unmasked(view, p, f"r{r}", xs[r][p]), (r, p)


def test_control_seed_shares_of_the_dropped_party_unmask_its_late_vector() -> None:
    """If survivors broke the "never both" rule and also revealed shares of DEAD's seed..."""
    clients, server, view, xs = _session()
    for holder in range(T):
        share = clients[holder]._held[DEAD]  # what an honest client refuses to hand out
        view.seed_shares.setdefault(DEAD, {})[holder] = share.to_bytes()
    assert unmasked(view, DEAD, f"r{R}", xs[R][DEAD])


def test_control_the_old_design_rebuilt_the_private_key_and_unmasked_every_past_round() -> None:
    """The previous protocol Shamir-shared the X25519 private key; rebuilt, it opens every round."""
    clients, server, view, xs = _session()
    dead = clients[DEAD]
    for r in range(R):
        for peer in range(NUM):
            if peer != DEAD:
                pair = derive_pair_keys(own_key=dead._key, peer_public=load_public_key(clients[peer].public_key(),
                                        party=peer), own_id=DEAD, peer_id=peer, session=server.session)
                view.pair_keys[(f"r{r}", peer, DEAD)] = round_key(pair.mask_secret, label=PAIR_LABEL,
                                                                  session=server.session, round_id=f"r{r}", name="emb")
        view.self_keys[(f"r{r}", DEAD)] = dead._self_key(f"r{r}", "emb")  # then a survivor revealed its self key
    assert all(unmasked(view, DEAD, f"r{r}", xs[r][DEAD]) for r in range(R))


def test_control_pair_keys_of_live_peers_would_unmask_a_survivor() -> None:
    clients, server, view, xs = _session()
    target, rnd = 1, f"r{R}"
    for peer in view.active[rnd]:
        if peer != target:
            view.pair_keys[(rnd, peer, target)] = clients[peer]._pair_key(target, rnd, "emb")
    view.self_keys[(rnd, target)] = clients[target]._self_key(rnd, "emb")  # as survivors revealed before view-bound releases
    assert unmasked(view, target, rnd, xs[R][target])


def test_documented_limit_a_lying_server_that_tells_d_it_survived() -> None:
    """Outside the semi-honest threat model (an actively lying server, see docs/secagg.md): if DEAD
    itself revealed its round self key while the others revealed pair keys for it, its vector opens.
    No client reveals a raw self key any more: its release stays masked by view streams unless every
    party it was told survived was told the same (late_survivor, test_secagg_split_views)."""
    clients, server, view, xs = _session()
    view.self_keys[(f"r{R}", DEAD)] = round_key(clients[DEAD]._seed, label=SELF_LABEL, session=server.session,
                                                round_id=f"r{R}", name="emb")
    assert unmasked(view, DEAD, f"r{R}", xs[R][DEAD])


def test_no_long_lived_secret_is_ever_revealed() -> None:
    clients, server, view, _ = _session()
    revealed = [*view.self_keys.values(), *view.pair_keys.values()]
    revealed += [raw for shares in view.seed_shares.values() for raw in shares.values()]
    secrets = [private_key_bytes(c._key) for c in clients.values()] + [c._seed for c in clients.values()]
    secrets += [pair.mask_secret for c in clients.values() for pair in c._pairs.values()]
    blob = b"|".join(revealed)
    assert revealed and not any(s in blob for s in secrets)
    assert not view.seed_shares  # no survivor vanished: no seed share was revealed at all


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.data())
def test_t_minus_1_shares_are_consistent_with_any_secret(threshold: int, data: st.DataObject) -> None:
    """For t-1 Shamir shares (pycryptodome, GF(2^128)) of a secret s and ANY other s', there is a
    degree t-1 polynomial through those shares and s': build the t-th share it implies and check
    that ``Shamir.combine`` returns s'. So t-1 shares carry no information about s."""
    count = data.draw(st.integers(threshold, threshold + 5))
    secret, other = os.urandom(16), data.draw(st.binary(min_size=16, max_size=16))
    shares = Shamir.split(threshold, count, secret, False)
    held = data.draw(st.permutations(shares))[: threshold - 1]
    x_new = next(i for i in range(1, count + 2) if i not in {x for x, _ in held})
    base = Shamir.combine([*held, (x_new, bytes(16))], False)  # P(0) with y_new = 0: affine in y_new
    unit = Shamir.combine([*held, (x_new, (1).to_bytes(16, "big"))], False)
    lam = _Element(base) + _Element(unit)  # the Lagrange weight of the new point at 0 (non-zero)
    y_new = ((_Element(other) + _Element(base)) * lam.inverse()).encode()
    assert Shamir.combine([*held, (x_new, y_new)], False) == other
    assert Shamir.combine(shares[:threshold], False) == secret
