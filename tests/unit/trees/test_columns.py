"""A party's columns: XGBoost's cut rule computed locally, bins, sparse-aware slots, exact sums."""

from __future__ import annotations

import numpy as np
import pytest

from parties.trees.binning import MISSING, bin_matrix, compute_cuts
from parties.trees.codec import Codec, check_sums, exact_sums, make_codec
from parties.trees.columns import Columns, pack_mask, unpack_mask
from vfl.core.errors import ProtocolError

xgb = pytest.importorskip("xgboost")


@pytest.mark.parametrize("n,max_bin", [(30, 4), (300, 256), (120, 16)])
def test_cuts_are_xgboosts_where_its_sketch_is_exact(n, max_bin):
    rng = np.random.default_rng(n)
    x = rng.normal(size=(n, 4)).astype(np.float32)
    x[:, 1] = np.round(x[:, 1] * 3)  # few distinct values
    x[rng.random(x.shape) < 0.1] = np.nan
    ptr, values = xgb.QuantileDMatrix(x, max_bin=max_bin).get_quantile_cut()
    ours = compute_cuts(x, max_bin=max_bin)
    checked = 0
    for f in range(x.shape[1]):
        theirs = values[ptr[f]:ptr[f + 1]]  # xgboost lists the feature's minimum first
        if f == 1 or n <= 8 * max_bin:
            assert np.array_equal(theirs[1:].astype(np.float32), ours.of(f))
            assert np.float32(theirs[0]) == ours.min_values[f]
            checked += 1
    assert checked >= 2


def test_bins_follow_xgboosts_search_and_missing_has_its_own_id():
    x = np.asarray([[0.0], [1.0], [2.0], [np.nan], [5.0]], dtype=np.float32)
    cuts = compute_cuts(x, max_bin=8)
    assert cuts.of(0).tolist()[:3] == [1.0, 2.0, 5.0]
    assert bin_matrix(x, cuts)[:, 0].tolist() == [0, 1, 2, MISSING, 3]
    beyond = np.asarray([[99.0]], dtype=np.float32)  # above the last cut: the last bin
    assert bin_matrix(beyond, cuts)[0, 0] == 3


def test_the_most_populated_bin_is_implicit_and_the_label_holder_recovers_it():
    rng = np.random.default_rng(0)
    x = np.where(rng.random((200, 3)) < 0.8, 0.0, rng.integers(1, 5, (200, 3))).astype(np.float32)
    x[rng.random(x.shape) < 0.05] = np.nan
    cols = Columns(x, x[:0], max_bin=16)
    assert (cols.layout.implicit == 0).all()  # the zeros' bin: sparse entries cost nothing
    slots, _ = cols.entries(np.arange(200))
    assert len(slots) == int(((x != 0) | np.isnan(x)).sum())
    g = rng.integers(-1000, 1000, 200)
    h = rng.integers(1, 1000, 200)
    rows = np.flatnonzero(rng.random(200) < 0.5)
    total = (int(g[rows].sum()), int(h[rows].sum()))
    hist, miss = cols.layout.expand(cols.plain_sums(rows, g, h), total)
    ref = np.zeros_like(hist)
    ptrs = cols.layout.ptrs
    for f in range(3):
        for r in rows:
            b = cols.binned[r, f]
            if b == MISSING:
                continue
            ref[ptrs[f] + b] += (g[r], h[r])
        assert tuple(miss[f]) == (int(g[rows][cols.binned[rows, f] == MISSING].sum()),
                                  int(h[rows][cols.binned[rows, f] == MISSING].sum()))
    assert np.array_equal(hist, ref)


def test_exact_sums_are_exact_beyond_float64():
    v = np.asarray([2**59 + 1, 2**59 + 3, -(2**58) + 7], dtype=np.int64)
    assert exact_sums(np.asarray([0, 0, 1]), v, 2).tolist() == [2**60 + 4, -(2**58) + 7]


def test_fixed_point_codec_bounds_and_refusal_of_impossible_sums():
    g = np.asarray([0.5, -0.25, 0.125], dtype=np.float32)
    codec, gi, hi = make_codec(g, np.asarray([0.25, 0.1875, 0.1], dtype=np.float32))
    assert codec.frac == 24 and gi.tolist() == [2**23, -(2**22), 2**21]
    assert Codec.from_config(codec.to_config()) == codec
    honest = np.asarray([[int(gi.sum()), int(hi.sum())]])
    check_sums(honest, np.asarray([3]), codec, "node 0")
    planted = honest + np.asarray([[0, 2**50]])  # a party adds a value no three rows can make
    with pytest.raises(ProtocolError, match="out of the range"):
        check_sums(planted, np.asarray([3]), codec, "node 0")


def test_masks_round_trip_and_refuse_a_wrong_length():
    m = np.asarray([True, False, True, True, False, False, True, False, True])
    assert unpack_mask(pack_mask(m), 9).tolist() == m.tolist()
    with pytest.raises(ProtocolError):
        unpack_mask(pack_mask(m), 20)
