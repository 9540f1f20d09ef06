"""Fixed point and balanced slot packing: round trips, sums of packed values, the sizing helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.core.errors import DataError
from vfl.he import FixedPoint, HEOutOfRange, SlotLayout, slots_per_plaintext


def test_fixed_point_round_trip_and_rounding() -> None:
    fp = FixedPoint(16)
    x = np.array([0.0, 1.5, -2.25, 1e-9, -3.0000152587890625, 1000.123])
    v = fp.encode(x)
    assert v.dtype == np.int64 and v.tolist() == [0, 98304, -147456, 0, -196609, int(np.rint(1000.123 * 65536))]
    assert np.abs(fp.decode(v) - x).max() <= 2.0**-17
    assert fp.decode(int(v[1])) == 1.5 and isinstance(fp.decode(int(v[1])), float)
    big = (1 << 80) + 1  # a sum past 2^63: exact division, correctly rounded
    assert fp.decode(big) == big / 65536 and fp.decode(np.array([big, -big], dtype=object)).tolist() == [big / 65536, -big / 65536]


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_fixed_point_refuses_non_finite(bad: float) -> None:
    with pytest.raises(DataError, match="1 of 3 values are NaN or infinite"):
        FixedPoint(8).encode([1.0, bad, 2.0])


def test_fixed_point_refuses_overflow() -> None:
    with pytest.raises(DataError, match="do not fit 63 bits"):
        FixedPoint(40).encode([2.0**30])


def _rows(widths: tuple[int, ...]) -> st.SearchStrategy[list[list[int]]]:
    field = [st.integers(-(1 << (w - 1)) + 1, (1 << (w - 1)) - 1) for w in widths]
    return st.lists(st.tuples(*field).map(list), min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), widths=st.lists(st.integers(2, 40), min_size=1, max_size=4).map(tuple))
def test_pack_unpack_round_trip_with_negative_fields(data: st.DataObject, widths: tuple[int, ...]) -> None:
    layout = SlotLayout(widths)
    rows = data.draw(_rows(widths))
    packed = layout.pack(np.array(rows, dtype=object))
    assert [list(layout.unpack(m)) for m in packed] == rows
    assert all(abs(m) <= layout.bound() for m in packed) and layout.bound() < 1 << (layout.total_bits - 1)
    assert layout.unpack_many(packed).tolist() == rows


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_a_sum_of_packed_values_is_the_packed_sum(data: st.DataObject) -> None:
    # each field of 12 bits holds values |v| <= 50; 40 rows sum to |s| <= 2000 < 2^11: no row count needed
    layout = SlotLayout((12, 12, 12))
    rows = data.draw(st.lists(st.tuples(*[st.integers(-50, 50)] * 3).map(list), min_size=1, max_size=40))
    packed = layout.pack(np.array(rows, dtype=np.int64))
    assert list(layout.unpack(sum(packed))) == np.array(rows).sum(axis=0).tolist()


def test_pack_refuses_values_beyond_their_width_and_bad_shapes() -> None:
    layout = SlotLayout((4, 8))
    with pytest.raises(DataError, match="field 0 holds values with \\|v\\| >= 2\\^3"):
        layout.pack(np.array([[8, 0]]))
    with pytest.raises(DataError, match="field 1"):
        layout.pack(np.array([[0, -128]]))
    with pytest.raises(DataError, match="shape \\(n, 2\\)"):
        layout.pack(np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(DataError, match="integers"):
        layout.pack(np.zeros((3, 2)))
    for widths in ((), (1,), (True,)):
        with pytest.raises(ValueError):
            SlotLayout(widths)  # type: ignore[arg-type]


def test_unpack_many_refuses_fields_beyond_their_caps() -> None:
    layout = SlotLayout((10, 10))
    honest = layout.pack(np.array([[100, -200], [-3, 4]]))
    assert layout.unpack_many(honest, max_abs=(100, 200)).tolist() == [[100, -200], [-3, 4]]
    planted = honest[0] - (150 << 10)  # a party adding −150 to the second field: −350
    with pytest.raises(HEOutOfRange, match="1 of 4 unpacked fields exceed"):
        layout.unpack_many([planted, honest[1]], max_abs=(100, 200))
    assert layout.bound((100, 200)) == 100 + (200 << 10)


def test_slots_per_plaintext_is_the_largest_count_that_fits() -> None:
    assert slots_per_plaintext(100, 2046) == 20 and slots_per_plaintext(93, 2046) == 22
    for bits, mpb in ((100, 2046), (93, 2046), (64, 510), (7, 63)):
        k = slots_per_plaintext(bits, mpb)
        assert k * bits - 1 <= mpb < (k + 1) * bits - 1
    layout = SlotLayout((50, 50)).repeat(3)
    assert layout.widths == (50,) * 6 and layout.total_bits == 300
