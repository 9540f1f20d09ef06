"""Wire encodings of secure aggregation: dense bit packing, modulus sizing, fixed point."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.core.errors import ConfigError, ProtocolError
from vfl.secagg import (
    decode_fixed_sum,
    encode_fixed,
    fixed_point_bits,
    pack_bits,
    packed_size,
    smallest_modulus_bits,
    unpack_bits,
)


@pytest.mark.parametrize("k", range(1, 33))
def test_pack_round_trip_every_k(k: int) -> None:
    rng = np.random.default_rng(k)
    for n in (0, 1, 7, 8, 1001):
        values = rng.integers(0, 1 << k, size=n, dtype=np.uint64)
        buf = pack_bits(values, k)
        assert isinstance(buf, bytes) and len(buf) == (n * k + 7) // 8 == packed_size(n, k)
        out = unpack_bits(buf, k, n)
        assert out.dtype == np.uint32
        np.testing.assert_array_equal(out, values)
        np.testing.assert_array_equal(unpack_bits(np.frombuffer(buf, np.uint8), k, n), values)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 32), st.data())
def test_pack_round_trip_property(k: int, data: st.DataObject) -> None:
    values = data.draw(st.lists(st.integers(0, (1 << k) - 1), max_size=300))
    buf = pack_bits(np.array(values, dtype=np.uint64), k)
    assert len(buf) == (len(values) * k + 7) // 8
    assert unpack_bits(buf, k, len(values)).tolist() == values


def test_pack_extremes_and_layout() -> None:
    assert pack_bits(np.array([1, 0, 1]), 1) == bytes([0b101])
    assert pack_bits(np.array([0xF, 0x1]), 4) == bytes([0x1F])
    top = np.array([(1 << 32) - 1, 0, (1 << 31)], dtype=np.uint64)
    np.testing.assert_array_equal(unpack_bits(pack_bits(top, 32), 32, 3), top)


def test_unpack_rejects_malformed_buffers() -> None:
    with pytest.raises(ProtocolError, match="need"):
        unpack_bits(b"\x00\x00", 3, 8)
    with pytest.raises(ProtocolError, match="padding"):
        unpack_bits(bytes([0b1000_0000]), 3, 2)  # bit 7 is padding after two 3-bit values
    with pytest.raises(ConfigError):
        pack_bits(np.array([8]), 3)
    with pytest.raises(ConfigError):
        pack_bits(np.array([-1]), 3)


@pytest.mark.parametrize(
    ("max_sum", "k"), [(0, 1), (1, 1), (2, 2), (255, 8), (256, 9), (16 * 10, 8), (4 * 5, 5)]
)
def test_smallest_modulus_bits(max_sum: int, k: int) -> None:
    assert smallest_modulus_bits(max_sum) == k
    assert 2**k > max_sum and (k == 1 or 2 ** (k - 1) <= max_sum)


def test_smallest_modulus_bits_limits() -> None:
    assert smallest_modulus_bits(2**32 - 1) == 32
    with pytest.raises(ConfigError):
        smallest_modulus_bits(2**32)
    with pytest.raises(ConfigError):
        smallest_modulus_bits(-1)


def modular_sum(parts: list[np.ndarray], k: int) -> np.ndarray:
    total = np.zeros(parts[0].shape, dtype=np.uint64)
    for p in parts:
        total += p
    return total % (1 << k)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-3.0, 3.0, allow_nan=False), min_size=1, max_size=50),
    st.lists(st.floats(-3.0, 3.0, allow_nan=False), min_size=1, max_size=50),
)
def test_fixed_point_sum_of_two_within_one_over_scale(a: list[float], b: list[float]) -> None:
    n = min(len(a), len(b))
    xa, xb = np.array(a[:n]), np.array(b[:n])
    clip, scale = 2.0, 1000.0
    k = fixed_point_bits(2, clip, scale)
    enc = [encode_fixed(x, scale=scale, clip=clip, k=k) for x in (xa, xb)]
    got = decode_fixed_sum(modular_sum(enc, k), scale=scale, k=k)
    want = np.clip(xa, -clip, clip) + np.clip(xb, -clip, clip)
    assert np.all(np.abs(got - want) <= 1 / scale + 1e-12)


def test_fixed_point_extremes_do_not_wrap() -> None:
    num, clip, scale = 10, 1.0, 2.0**10
    k = fixed_point_bits(num, clip, scale)
    assert num * clip * scale < 2 ** (k - 1) and num * clip * scale >= 2 ** (k - 2)
    for sign in (1.0, -1.0):
        parts = [encode_fixed(np.full(4, sign * 5.0), scale=scale, clip=clip, k=k)] * num
        np.testing.assert_allclose(
            decode_fixed_sum(modular_sum(parts, k), scale=scale, k=k), sign * num * clip
        )
    # one bit fewer wraps at the positive extreme: the reason for the bound
    parts = [encode_fixed(np.ones(1), scale=scale, clip=clip, k=k - 1)] * num
    assert decode_fixed_sum(modular_sum(parts, k - 1), scale=scale, k=k - 1)[0] < 0


def test_fixed_point_mixed_signs_many_parties() -> None:
    rng = np.random.default_rng(0)
    num, clip, scale = 16, 1.0, 2.0**14
    k = fixed_point_bits(num, clip, scale)
    xs = [rng.uniform(-1, 1, size=200) for _ in range(num)]
    enc = [encode_fixed(x, scale=scale, clip=clip, k=k) for x in xs]
    got = decode_fixed_sum(modular_sum(enc, k), scale=scale, k=k)
    np.testing.assert_allclose(got, np.sum(xs, axis=0), atol=num / (2 * scale))


def test_fixed_point_config_errors() -> None:
    with pytest.raises(ConfigError, match="scale"):
        fixed_point_bits(64, 1.0, 2.0**30)
    with pytest.raises(ConfigError):
        fixed_point_bits(0, 1.0, 10.0)
    with pytest.raises(ConfigError, match="k"):
        encode_fixed(np.zeros(2), scale=1000.0, clip=1.0, k=8)
    with pytest.raises(ConfigError, match="NaN"):
        encode_fixed(np.array([np.nan]), scale=10.0, clip=1.0, k=16)
