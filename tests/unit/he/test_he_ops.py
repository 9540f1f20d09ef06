"""Histogram sums over ciphertexts (grouped_sum) and packing several sums into one ciphertext."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.core.errors import DataError
from vfl.he import (
    HEOutOfRange,
    PrivateKey,
    PublicKey,
    SlotLayout,
    grouped_sum,
    identity,
    pack_ciphertexts,
)

N_ROWS = 40


@pytest.fixture(scope="module")
def data(sk: PrivateKey) -> tuple[list[int], list]:
    rng = np.random.default_rng(0)
    ms = rng.integers(-(1 << 40), 1 << 40, size=N_ROWS).tolist()
    return ms, sk.encrypt(ms)


@settings(max_examples=40, deadline=None)
@given(groups=st.lists(st.integers(0, 5), min_size=N_ROWS, max_size=N_ROWS),
       rows=st.none() | st.lists(st.integers(0, N_ROWS - 1), max_size=N_ROWS))
def test_grouped_sum_equals_the_plaintext_group_sums(pk: PublicKey, sk: PrivateKey, data: tuple, groups: list[int],
                                                     rows: list[int] | None) -> None:
    ms, cs = data
    g = np.array(groups)
    sums = grouped_sum(pk, cs, g, 7, rows=None if rows is None else np.array(rows, dtype=np.int64))
    idx = range(N_ROWS) if rows is None else rows
    want = [sum(ms[i] for i in idx if groups[i] == k) for k in range(7)]
    present = [k for k in range(7) if any(groups[i] == k for i in idx)]
    assert len(sums) == 7 and [k for k in range(7) if sums[k] is not None] == present
    assert sk.decrypt([sums[k] for k in present], bound=1 << 60) == [want[k] for k in present]
    assert sums[6] is None  # group 6 never occurs: None, not E(0)


def test_grouped_sum_refuses_bad_groups_and_rows(pk: PublicKey, data: tuple) -> None:
    _, cs = data
    with pytest.raises(DataError, match="in \\[0, 3\\)"):
        grouped_sum(pk, cs, np.full(N_ROWS, 3), 3)
    with pytest.raises(DataError, match="in \\[0, 3\\)"):
        grouped_sum(pk, cs, np.full(N_ROWS, -1), 3)
    with pytest.raises(DataError, match="39 group labels for 40"):
        grouped_sum(pk, cs, np.zeros(N_ROWS - 1, dtype=np.int64), 3)
    with pytest.raises(DataError, match="integer array"):
        grouped_sum(pk, cs, np.zeros(N_ROWS), 3)
    with pytest.raises(DataError, match="rows must be"):
        grouped_sum(pk, cs, np.zeros(N_ROWS, dtype=np.int64), 3, rows=np.array([N_ROWS]))
    assert grouped_sum(pk, cs, np.zeros(N_ROWS, dtype=np.int64), 2, rows=np.array([], dtype=np.int64)) == [None, None]


def test_pack_ciphertexts_decrypts_to_the_shifted_sum(pk: PublicKey, sk: PrivateKey) -> None:
    # three bins of (gradient, hessian) sums, each field 20 bits, one bin empty (None)
    cell = SlotLayout((20, 20))
    sums = [(-1000, 5000), None, (77, 1)]
    cts = [None if s is None else sk.encrypt(cell.pack(np.array([s])))[0] for s in sums]
    packed = pack_ciphertexts(pk, cts, cell.total_bits)
    layout = cell.repeat(3)
    (m,) = sk.decrypt([packed], bound=layout.bound())
    assert layout.unpack(m) == (-1000, 5000, 0, 0, 77, 1)
    assert pack_ciphertexts(pk, [None, None], 8) == identity() == 1
    top_empty = pack_ciphertexts(pk, [cts[0], None], cell.total_bits)
    assert layout.unpack(sk.decrypt([top_empty], bound=layout.bound())[0])[:4] == (-1000, 5000, 0, 0)


def test_pack_ciphertexts_refuses_more_slots_than_a_plaintext_holds(pk: PublicKey) -> None:
    with pytest.raises(DataError, match="a plaintext holds 511"):
        pack_ciphertexts(pk, [identity()] * 6, 100)  # 600 bits > 511 at 512 bits
    assert pack_ciphertexts(pk, [identity()] * 5, 102) == 1  # 5 * 102 - 1 = 509 <= 510
    with pytest.raises(ValueError):
        pack_ciphertexts(pk, [identity()], 0)


def test_a_planted_value_in_a_packed_bin_is_refused(pk: PublicKey, sk: PrivateKey) -> None:
    cell = SlotLayout((24, 24))
    rows = sk.encrypt(cell.pack(np.array([[10, 3], [-4, 2], [7, 5]])))
    honest = grouped_sum(pk, rows, np.array([0, 0, 1]), 2)
    layout = cell.repeat(2)
    caps = (100, 100) * 2  # what 3 honest rows of |v| <= 33 can reach
    bound = layout.bound(caps)
    ok = sk.decrypt([pack_ciphertexts(pk, honest, cell.total_bits)], bound=bound)
    assert layout.unpack_many(ok, max_abs=caps).tolist() == [[6, 5, 7, 5]]

    def planted(value: int) -> list[int]:  # a malicious party adds ``value`` to the first bin's hessian
        bad = pk.add(honest[0], pk.encrypt([value << 24])[0])  # type: ignore[arg-type]
        return [pack_ciphertexts(pk, [bad, honest[1]], cell.total_bits)]

    with pytest.raises(HEOutOfRange, match="decrypted values"):  # the packed whole leaves the honest range
        sk.decrypt(planted(1 << 100), bound=bound)
    inside = sk.decrypt(planted(1 << 40), bound=bound)  # within the whole's range: it carries into bin 1's field
    with pytest.raises(HEOutOfRange, match="1 of 4 unpacked fields"):
        layout.unpack_many(inside, max_abs=caps)
