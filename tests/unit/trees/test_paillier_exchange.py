"""The encrypted exchange gives the clear path's integers, and refuses what no honest party can send."""

from __future__ import annotations

import numpy as np
import pytest

from parties.trees.codec import make_codec
from parties.trees.columns import Columns
from parties.trees.grower import Grower, TreeParams
from parties.trees.paillier import PaillierParty, PaillierScheme
from parties.trees.schemes import PlainParty, PlainScheme
from parties.trees.wire import Array
from vfl.core.errors import ProtocolError
from vfl.he import HEOutOfRange, from_wire, to_wire


@pytest.fixture(scope="module")
def exchange():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(120, 4)).astype(np.float32)
    x[:, 2] = np.where(rng.random(120) < 0.7, 0.0, x[:, 2])  # sparse: its zeros' bin is implicit
    x[rng.random(x.shape) < 0.05] = np.nan
    cols = Columns(x, x[:0], max_bin=8)
    g = rng.uniform(-1, 1, 120).astype(np.float32)
    h = rng.uniform(0, 0.25, 120).astype(np.float32)
    codec, gi, hi = make_codec(g, h)
    lh = PaillierScheme(key_bits=768, workers=0, test_only_small_key=True)
    party = PaillierParty.from_public(lh.public())
    party.load_rows(lh.encode_rows(codec, gi, hi), codec)
    return cols, codec, gi, hi, lh, party


def test_encrypted_sums_are_the_plain_sums(exchange):
    cols, codec, gi, hi, lh, party = exchange
    nodes = [np.arange(0, 120, 2), np.arange(5, 60)]
    sizes, counts = [cols.layout.num_slots()] * 2, [len(n) for n in nodes]
    enc = lh.decode_sums(party.sums(cols, nodes), codec, sizes, counts)
    plain_party = PlainParty()
    plain_party.load_rows(PlainScheme().encode_rows(codec, gi, hi), codec)
    clear = PlainScheme().decode_sums(plain_party.sums(cols, nodes), codec, sizes, counts)
    assert len(enc) == 2 and all(np.array_equal(a, b) for a, b in zip(enc, clear, strict=True))
    assert np.any(enc[0] != 0)


def test_a_planted_sum_out_of_range_is_refused(exchange):
    cols, codec, gi, hi, lh, party = exchange
    reply = party.sums(cols, [np.arange(120)])
    cts = from_wire(lh.pk, reply[Array.CIPHER])
    cts[0] = lh.pk.add(cts[0], lh.pk.encrypt([1 << 760])[0])  # reverse-sum style: a huge value in a packed sum
    forged = {**reply, Array.CIPHER: to_wire(lh.pk, cts)}
    with pytest.raises(HEOutOfRange):
        lh.decode_sums(forged, codec, [cols.layout.num_slots()], [120])


def test_a_planted_field_beyond_what_its_rows_can_sum_is_refused_by_the_grower(exchange):
    cols, codec, gi, hi, lh, party = exchange
    gr = Grower(g=gi, h=hi, codec=codec, layouts={1: cols.layout}, params=TreeParams(max_depth=2))
    reply = party.sums(cols, [np.arange(120)])
    cts = from_wire(lh.pk, reply[Array.CIPHER])
    planted = (120 * codec.hmax + 1) << codec.width_g  # fits the hessian field, beyond what 120 honest rows sum to
    cts[0] = lh.pk.add(cts[0], lh.pk.encrypt([planted])[0])
    (slots,) = lh.decode_sums({**reply, Array.CIPHER: to_wire(lh.pk, cts)}, codec, [cols.layout.num_slots()], [120])
    with pytest.raises(ProtocolError, match="out of the range"):
        gr.add(1, 0, slots)


def test_a_small_key_is_refused_without_the_test_flag():
    from vfl.core.errors import ConfigError

    with pytest.raises(ConfigError, match="params.key_bits"):
        PaillierScheme(key_bits=1024, workers=0)


@pytest.mark.parametrize("nodes", [1, 3, 30])  # one node (sums packed k to a ciphertext), a few, more than a group
def test_hidden_rows_give_each_nodes_plain_sums(exchange, nodes):
    cols, codec, gi, hi, lh, _ = exchange
    pos = np.random.default_rng(nodes).integers(0, nodes + 2, 120)  # some rows in nodes not built
    build = list(range(nodes))
    party = PaillierParty.from_public(lh.public())
    party.load_rows(lh.encode_hidden(codec, gi, hi, pos, build), codec)
    reply = party.sums_hidden(cols, groups=party.loaded() // 120, nodes=nodes)
    got = lh.decode_hidden(reply, codec, cols.layout.num_slots(), build)
    assert len(got) == nodes
    for node, sums in zip(build, got, strict=True):
        assert np.array_equal(sums, cols.plain_sums(np.flatnonzero(pos == node), gi, hi))
