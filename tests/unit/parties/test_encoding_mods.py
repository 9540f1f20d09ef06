"""``parties.mods.encoding``: what each mod puts on the wire and what ``read_encoded`` reads back,
after a real flwr serde round trip (dtype, shape, bit-packed sizes, masking, mod order)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from parties.mods.encoding import (
    fixed_point_mod,
    gaussian_mod,
    pack_counts_mod,
    pbm_mod,
    read_encoded,
    secagg_mod,
)
from tests.support.secagg_helpers import make_session
from vfl.core.errors import ProtocolError
from vfl.core.rng import NodeNoise
from vfl.runtime import message as wire
from vfl.runtime.mods import ModContext, apply_mods
from vfl.secagg import UnmaskRequest, decode_fixed_sum

ROUND = "train:0:3"


def emb_message(src: int = 1, **arrays: np.ndarray):
    return wire.make("train.embedding", src=src, dst=0, round=ROUND, content=wire.records(emb=wire.arrays(**arrays)))


def ctx(party: int = 0, secagg=None, **state) -> ModContext:
    return ModContext(party=party, num_parties=3, phase="train", epoch=0, step=3, seed=7,
                      node_noise=NodeNoise("seeded", seed=7, node=party + 1), state=dict(state), secagg=secagg)


def over_the_wire(message):
    """Serialize with flwr serde, decode again: what the server actually reads."""
    return wire.Wire.of(message).open()


shapes = st.tuples(st.integers(1, 6), st.integers(1, 9))


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float32, shapes, elements=st.floats(-1e6, 1e6, width=32)))
def test_float_embeddings_round_trip_exactly(e):
    got = read_encoded(over_the_wire(emb_message(e=e)))
    assert got.kind == "float" and got.values.dtype == np.float32 and got.values.shape == e.shape
    assert np.array_equal(got.values, e) and not got.masked


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 32).flatmap(lambda k: st.tuples(
    st.just(k), hnp.arrays(np.uint32, shapes, elements=st.integers(0, (1 << k) - 1)))))
def test_packed_counts_round_trip_with_k_bits_per_value(case):
    k, q = case
    m = apply_mods([pack_counts_mod(k=k)], emb_message(q=q), ctx())
    w = wire.Wire.of(m)
    got = read_encoded(w.open())
    assert got.kind == "packed" and got.k == k and not got.masked
    assert got.values.shape == q.shape and np.array_equal(got.values.astype(np.uint64), q.astype(np.uint64))
    assert w.payload == -(-q.size * k // 8)  # exactly ceil(n k / 8) bytes of array data


@settings(max_examples=40, deadline=None)
@given(hnp.arrays(np.float64, shapes, elements=st.floats(-2.0, 2.0)))
def test_fixed_point_codes_decode_to_the_clipped_rounded_value(x):
    scale, clip, k = 64.0, 1.0, 12
    m = apply_mods([fixed_point_mod(scale=scale, clip=clip, k=k)], emb_message(e=x.astype(np.float32)), ctx())
    got = read_encoded(over_the_wire(m))
    assert got.kind == "int" and got.values.shape == x.shape and got.values.max(initial=0) < 1 << k
    expected = np.rint(np.clip(x.astype(np.float32), -clip, clip) * scale) / scale
    assert np.allclose(decode_fixed_sum(got.values, scale=scale, k=k), expected)


def test_pbm_counts_are_binomial_in_0_b_with_the_mean_of_the_clamped_input():
    b, beta, c = 64, 0.25, 1.0
    e = np.repeat(np.array([[-5.0, 0.0, 0.5, 5.0]], np.float32), 400, axis=0)  # ±5 is clamped to ±c
    m = apply_mods([pbm_mod(b=b, beta=beta, c=c)], emb_message(e=e), ctx())
    got = read_encoded(over_the_wire(m))
    assert got.kind == "int" and got.values.shape == e.shape and got.values.dtype == np.uint32
    assert got.values.max() <= b
    mean = got.values.mean(axis=0)
    p = 0.5 + beta / c * np.clip(e[0], -c, c)
    assert np.all(np.abs(mean - b * p) < 1.0)  # sd of a 400-sample mean is < 0.2


def test_pbm_noise_is_the_senders_seeded_stream():
    e = np.zeros((5, 4), np.float32)
    one = read_encoded(pbm_mod(b=32, beta=0.2, c=1.0)(emb_message(e=e), ctx(0))).values
    again = read_encoded(pbm_mod(b=32, beta=0.2, c=1.0)(emb_message(e=e), ctx(0))).values
    other = read_encoded(pbm_mod(b=32, beta=0.2, c=1.0)(emb_message(e=e), ctx(1))).values
    assert np.array_equal(one, again) and not np.array_equal(one, other)


def test_gaussian_mod_adds_noise_of_the_configured_scale_and_keeps_the_shape():
    e = np.full((500, 8), 3.0, np.float32)
    got = read_encoded(over_the_wire(gaussian_mod(sigma=0.5)(emb_message(e=e), ctx())))
    assert got.kind == "float" and got.values.shape == e.shape and got.values.dtype == np.float32
    noise = got.values - e
    assert abs(noise.mean()) < 0.05 and 0.45 < noise.std() < 0.55


def test_mods_compose_left_to_right_and_the_wrong_order_names_what_is_missing():
    e = np.zeros((2, 3), np.float32)
    got = read_encoded(apply_mods([pbm_mod(b=8, beta=0.1, c=1.0), pack_counts_mod(k=4)], emb_message(e=e), ctx()))
    assert got.kind == "packed" and got.k == 4 and got.values.max() <= 8
    with pytest.raises(ProtocolError, match="no array emb/q"):
        apply_mods([pack_counts_mod(k=4), pbm_mod(b=8, beta=0.1, c=1.0)], emb_message(e=e), ctx())


def test_secagg_mod_masks_each_party_and_the_server_recovers_only_the_sum():
    k = 16
    clients, server = make_session(3, threshold=2, k=k)
    rng = np.random.default_rng(0)
    qs = {i: rng.integers(0, 1 << 10, size=(3, 4), dtype=np.uint32) for i in range(3)}
    sent = {}
    for i in range(3):
        m = secagg_mod(k=k)(emb_message(src=i + 1, q=qs[i]), ctx(i, secagg=clients[i]))
        sent[i] = read_encoded(over_the_wire(m))
    for i, enc in sent.items():
        assert enc.kind == "packed" and enc.masked and enc.k == k and enc.values.shape == (3, 4)
        assert not np.array_equal(enc.values, qs[i])  # one party's message alone is masked
    request = server.open_round({i: e.values.ravel() for i, e in sent.items()}, round_id=ROUND, name="emb")
    while isinstance(request, UnmaskRequest):  # nobody dropped: the survivors remove the masks
        reveals = {p: clients[p].unmask(round_id=ROUND, survivors=request.survivors, dropped=request.dropped)
                   for p in request.survivors}
        request = server.add_unmask(ROUND, reveals)
    total, summed = server.result(ROUND)
    assert tuple(summed) == (0, 1, 2)
    expected = sum(q.astype(np.uint64) for q in qs.values()) % (1 << k)
    assert np.array_equal(np.asarray(total).reshape(3, 4).astype(np.uint64), expected)


def test_secagg_mod_before_key_setup_is_a_protocol_error_naming_the_party():
    with pytest.raises(ProtocolError, match="party 2: secure aggregation used before key set-up"):
        secagg_mod(k=8)(emb_message(q=np.zeros((1, 2), np.uint32)), ctx(2))


def test_reader_refuses_a_message_without_an_embedding():
    m = wire.make("train.embedding", src=4, dst=0, round=ROUND)
    with pytest.raises(ProtocolError, match="node 4 has no embedding record"):
        read_encoded(m)
    with pytest.raises(ProtocolError, match="node 5 has no e/q/p array"):
        read_encoded(emb_message(src=5, z=np.zeros(2, np.float32)))
