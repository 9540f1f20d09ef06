"""Encryption (public and CRT paths), decryption with its range check, and the homomorphic operations."""

from __future__ import annotations

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vfl.core.errors import DataError, ProtocolError
from vfl.he import HEOutOfRange, PrivateKey, PublicKey

SIGNED = st.integers(min_value=-(1 << 509), max_value=1 << 509)  # |m| < 2^max_plaintext_bits at 512 bits


@settings(max_examples=60, deadline=None)
@given(ms=st.lists(SIGNED, min_size=1, max_size=6))
def test_both_paths_decrypt_to_the_plaintexts(pk: PublicKey, sk: PrivateKey, ms: list[int]) -> None:
    crt, public = sk.encrypt(ms), pk.encrypt(ms)
    assert all(0 < c < pk.n2 for c in crt + public)
    assert sk.decrypt(crt, bound=1 << 509) == ms == sk.decrypt(public, bound=1 << 509)


def test_the_extremes_of_the_centred_range(pk: PublicKey, sk: PrivateKey) -> None:
    half = pk.n // 2
    ms = [half, -half, 0]
    assert sk.decrypt(sk.encrypt(ms), bound=half) == ms
    with pytest.raises(DataError, match="1 of 2 plaintexts have \\|m\\| >= n/2"):
        sk.encrypt([half + 1, 0])
    with pytest.raises(DataError):
        pk.encrypt([-half - 1])


def test_encryption_is_randomized(pk: PublicKey, sk: PrivateKey) -> None:
    a, b = sk.encrypt([5, 5])
    c, d = pk.encrypt([5, 5])
    assert len({a, b, c, d}) == 4
    r1, r2 = pk.rerandomize([a, a])
    assert len({a, r1, r2}) == 3 and sk.decrypt([r1, r2], bound=5) == [5, 5]


@settings(max_examples=60, deadline=None)
@given(x=st.integers(-(1 << 200), 1 << 200), y=st.integers(-(1 << 200), 1 << 200), k=st.integers(-(1 << 100), 1 << 100))
def test_homomorphic_add_sub_neg_mul_plain(pk: PublicKey, sk: PrivateKey, x: int, y: int, k: int) -> None:
    a, b = sk.encrypt([x, y])
    got = sk.decrypt([pk.add(a, b), pk.sub(a, b), pk.neg(a), pk.mul_plain(a, k)], bound=1 << 400)
    assert got == [x + y, x - y, -x, k * x]


def test_a_sum_out_of_the_honest_range_is_refused(pk: PublicKey, sk: PrivateKey) -> None:
    # a bin sum of 3 honest rows, each |m| <= 100, and a "malicious party" adding a planted value to it
    rows = sk.encrypt([100, -40, 7])
    honest = pk.add(pk.add(rows[0], rows[1]), rows[2])
    planted = pk.add(honest, pk.encrypt([1 << 300])[0])
    assert sk.decrypt([honest], bound=300) == [67]
    with pytest.raises(HEOutOfRange) as err:
        sk.decrypt([honest, planted, planted], bound=300)
    assert "2 of 3 decrypted values exceed the bound |m| <= 300" in str(err.value) and "\n" not in str(err.value)
    assert isinstance(err.value, ProtocolError)
    with pytest.raises(HEOutOfRange):  # negative side too
        sk.decrypt([pk.neg(planted)], bound=300)


def test_malformed_ciphertexts_are_refused(pk: PublicKey, sk: PrivateKey) -> None:
    good = sk.encrypt([1])[0]
    for bad in (gmpy2.mpz(0), pk.n2, pk.n2 + good, gmpy2.mpz(-1)):
        with pytest.raises(ProtocolError, match="outside \\[1, n\\^2\\)"):
            sk.decrypt([good, bad], bound=10)
    p = gmpy2.mpz.from_bytes(sk.secret_parts()[0], "big")
    for bad in (p, p * good % pk.n2, pk.n):  # not prime to n
        with pytest.raises(ProtocolError, match="not prime to n"):
            sk.decrypt([bad], bound=10)
    with pytest.raises(ProtocolError, match="no inverse"):
        pk.neg(p)


def test_decrypt_bound_must_be_meaningful(sk: PrivateKey, pk: PublicKey) -> None:
    c = sk.encrypt([3])
    for bound in (-1, pk.n, 1.5, None):
        with pytest.raises(ValueError, match="bound must be"):
            sk.decrypt(c, bound=bound)  # type: ignore[arg-type]
    assert sk.decrypt(c, bound=gmpy2.mpz(3)) == [3]
    assert sk.decrypt([], bound=0) == []


@pytest.mark.parametrize("exp_bits", [8, 13, 64])
def test_fixed_base_tables_match_powmod(pk: PublicKey, exp_bits: int) -> None:
    from vfl.he.fixedbase import FixedBase, draw_exponents, exponent_bytes

    table = FixedBase(pk.hs, pk.n2, exp_bits)
    raw = draw_exponents(50, exp_bits)
    width = exponent_bytes(exp_bits)
    exps = [int.from_bytes(raw[i:i + width], "little") for i in range(0, len(raw), width)]
    assert len(exps) == 50 and all(0 <= e < 1 << exp_bits for e in exps) and len(set(exps)) > 1
    assert table.pow_many(raw) == [gmpy2.powmod(pk.hs, e, pk.n2) for e in exps]
    assert table.pow((1 << exp_bits) - 1) == gmpy2.powmod(pk.hs, (1 << exp_bits) - 1, pk.n2)
