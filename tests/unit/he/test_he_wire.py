"""Ciphertexts as fixed-width big-endian rows of a uint8 array, and what from_wire refuses."""

from __future__ import annotations

import numpy as np
import pytest

from vfl.core.errors import ProtocolError
from vfl.he import PrivateKey, PublicKey, from_wire, to_wire


def test_wire_round_trip(pk: PublicKey, sk: PrivateKey) -> None:
    ms = [-5, 0, 1 << 300, 9]
    cs = sk.encrypt(ms)
    arr = to_wire(pk, cs)
    assert arr.dtype == np.uint8 and arr.shape == (4, pk.ciphertext_bytes) == (4, 128)
    assert int.from_bytes(arr[2].tobytes(), "big") == cs[2]
    back = from_wire(pk, arr)
    assert back == cs and sk.decrypt(back, bound=1 << 301) == ms
    assert from_wire(pk, to_wire(pk, [])) == [] and to_wire(pk, []).shape == (0, 128)
    assert from_wire(pk, np.asfortranarray(arr)) == cs  # a non-contiguous view reads the same


@pytest.mark.parametrize("bad", [
    np.zeros((2, 127), np.uint8), np.zeros((2, 129), np.uint8), np.zeros(128, np.uint8),
    np.zeros((2, 128), np.int8), np.zeros((2, 64), np.uint16), [[0] * 128],
])
def test_from_wire_refuses_other_shapes_and_dtypes(pk: PublicKey, bad: object) -> None:
    with pytest.raises(ProtocolError, match="uint8 array of shape \\(k, 128\\)"):
        from_wire(pk, bad)  # type: ignore[arg-type]


def test_from_wire_refuses_values_outside_the_ciphertext_space(pk: PublicKey, sk: PrivateKey) -> None:
    arr = to_wire(pk, sk.encrypt([1, 2])).copy()
    arr[1] = 0
    with pytest.raises(ProtocolError, match="1 of 2 received ciphertexts are outside"):
        from_wire(pk, arr)
    arr[1] = 255  # 2^1024 − 1 >= n^2
    with pytest.raises(ProtocolError, match="outside \\[1, n\\^2\\)"):
        from_wire(pk, arr)
    with pytest.raises(ProtocolError, match="None included"):
        to_wire(pk, [None])  # type: ignore[list-item]
