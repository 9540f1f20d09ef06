"""Paillier key generation, the key size floor, the public key's record, and what a key refuses."""

from __future__ import annotations

import pickle

import gmpy2
import pytest

from vfl.core.errors import ConfigError, ProtocolError
from vfl.he import MIN_KEY_BITS, PrivateKey, PublicKey, generate_keypair


@pytest.mark.parametrize("bits", [512, 768])
def test_keygen_gives_exact_bits_and_a_valid_djn_base(bits: int) -> None:
    pk, sk = generate_keypair(bits, test_only_small_key=True)
    assert pk.bits == bits and pk.n.bit_length() == bits
    assert pk.ciphertext_bytes == 2 * bits // 8 and pk.max_plaintext_bits == bits - 2 and pk.alpha_bits == bits // 2
    p, q = (gmpy2.mpz.from_bytes(b, "big") for b in sk.secret_parts()[:2])
    assert p != q and p * q == pk.n and p.bit_length() == q.bit_length() == bits // 2
    assert gmpy2.is_prime(p) and gmpy2.is_prime(q)
    assert gmpy2.gcd(pk.n, (p - 1) * (q - 1)) == 1
    # h_s is an n-th residue: it decrypts to 0
    assert sk.decrypt([pk.hs], bound=0) == [0]


def test_a_key_below_2048_bits_is_refused_without_the_test_flag() -> None:
    with pytest.raises(ConfigError) as err:
        generate_keypair(1024)
    assert err.value.key == "params.key_bits" and ">= 2048" in str(err.value) and "\n" not in str(err.value)
    assert MIN_KEY_BITS == 2048


@pytest.mark.parametrize("bits", [511, 128, 0, "2048", True, 2048.0])
def test_bad_key_sizes_are_refused(bits: object) -> None:
    with pytest.raises(ConfigError, match="params.key_bits"):
        generate_keypair(bits, test_only_small_key=True)  # type: ignore[arg-type]


def test_a_real_2048_bit_key_round_trips() -> None:
    pk, sk = generate_keypair()
    assert pk.bits == 2048 and pk.ciphertext_bytes == 512
    ms = [-(1 << 2040), -1, 0, 7, (1 << 2045) + 3]
    assert sk.decrypt(sk.encrypt(ms), bound=1 << 2046) == ms


def test_public_key_record_round_trips_and_drops_the_table(pk: PublicKey) -> None:
    rec = pk.to_record()
    assert set(rec) == {"n", "hs"} and all(isinstance(v, bytes) for v in rec.values())
    back = PublicKey.from_record(rec, test_only_small_key=True)
    assert back == pk and back.n2 == pk.n2
    pk.encrypt([1])  # builds the lazy table
    assert pk._tables
    clone = pickle.loads(pickle.dumps(pk))
    assert clone == pk and not clone._tables


def test_public_key_record_refusals(pk: PublicKey) -> None:
    rec = pk.to_record()
    with pytest.raises(ProtocolError, match="refused; allowed: >= 2048"):
        PublicKey.from_record(rec)  # a 512-bit key without the test flag
    with pytest.raises(ProtocolError, match="'n' and 'hs'"):
        PublicKey.from_record({"n": rec["n"]}, test_only_small_key=True)
    with pytest.raises(ProtocolError, match="must be bytes"):
        PublicKey.from_record({"n": 5, "hs": rec["hs"]}, test_only_small_key=True)
    with pytest.raises(ProtocolError, match="odd modulus"):
        PublicKey.from_record({"n": (pk.n + 1).to_bytes(64, "big"), "hs": rec["hs"]}, test_only_small_key=True)
    for hs in (1, pk.n2, pk.n):  # h_s = 1 would not randomize; n shares a factor with n
        with pytest.raises(ProtocolError, match="h_s"):
            PublicKey(pk.n, gmpy2.mpz(hs), test_only_small_key=True)


def test_private_key_is_never_pickled_nor_printed(sk: PrivateKey) -> None:
    with pytest.raises(TypeError, match="never pickled"):
        pickle.dumps(sk)
    assert repr(sk) == "PrivateKey(bits=512)"


def test_private_key_needs_the_factors_of_n(pk: PublicKey, sk: PrivateKey) -> None:
    p = gmpy2.mpz.from_bytes(sk.secret_parts()[0], "big")
    with pytest.raises(Exception, match="p·q must equal"):
        PrivateKey(pk, p, p + 2)
