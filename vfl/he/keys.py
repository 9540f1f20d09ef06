"""Paillier keys (g = n + 1) with Damgård-Jurik-Nielsen encryption, and the ciphertext operations.

E(m) = (1 + m·n) · h_s^α mod n², with h_s = (−x²)^n mod n² for a random x (published with n) and α
uniform in [0, 2^⌈bits/2⌉) — DJN's short exponent (``docs/he.md`` states its assumption). Plaintexts
are signed integers with |m| < n/2, encoded as m mod n; decryption returns the centred
representative in (−n/2, n/2] and refuses any value beyond the caller's ``bound`` (:class:`HEOutOfRange`).

Two encryption paths give the same ciphertext distribution: :meth:`PublicKey.encrypt` (anyone with
the public key: a fixed-base table mod n²) and :meth:`PrivateKey.encrypt` (the key holder: the
randomizer mod p² and mod q², joined by the CRT, ~2x faster; from a :class:`~vfl.he.randomness.RandomizerPool`
when one is attached). A private key is never pickled: its factors reach its own pool workers as bytes.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import gmpy2
from gmpy2 import mpz

from vfl.core.errors import ConfigError, DataError, ProtocolError
from vfl.he.errors import HEOutOfRange
from vfl.he.fixedbase import CrtRandomizers, FixedBase, draw_exponents

MIN_KEY_BITS = 2048
"""Smallest modulus allowed outside tests (112-bit security, NIST SP 800-57 part 1)."""
_FLOOR_BITS = 256  # below this even a test key is meaningless


def _check_bits(bits: Any, test_only_small_key: bool) -> int:
    if isinstance(bits, bool) or not isinstance(bits, int) or bits < _FLOOR_BITS or bits % 2:
        raise ConfigError("params.key_bits", f"must be an even integer, allowed: >= {MIN_KEY_BITS}; got {bits!r}")
    if bits < MIN_KEY_BITS and not test_only_small_key:
        raise ConfigError("params.key_bits", f"{bits}-bit Paillier keys are too weak; allowed: >= {MIN_KEY_BITS} "
                                             "(112-bit security)")
    return bits


def _prime(bits: int) -> mpz:
    """A random prime of exactly ``bits`` bits with its top two bits set (so p·q has 2·bits bits)."""
    while True:
        p = gmpy2.next_prime(mpz(secrets.randbits(bits)) | (mpz(3) << (bits - 2)))
        if p.bit_length() == bits:
            return p


def _djn_base(n: mpz) -> mpz:
    """h_s = (−x²)^n mod n² for a random unit x of Z_n."""
    while True:
        x = mpz(secrets.randbelow(int(n) - 2) + 2)
        if gmpy2.gcd(x, n) == 1:
            return gmpy2.powmod(-(x * x) % n, n, n * n)


def generate_keypair(bits: int = 2048, *, test_only_small_key: bool = False) -> tuple[PublicKey, PrivateKey]:
    """A fresh key pair with an exactly ``bits``-bit modulus n = p·q (p != q, gcd(n, φ(n)) = 1).
    ``bits`` < 2048 raises ConfigError (params.key_bits) unless ``test_only_small_key`` (unit tests)."""
    bits = _check_bits(bits, test_only_small_key)
    while True:
        p, q = _prime(bits // 2), _prime(bits // 2)
        n = p * q
        if p != q and n.bit_length() == bits and gmpy2.gcd(n, (p - 1) * (q - 1)) == 1:
            break
    public = PublicKey(n, _djn_base(n), test_only_small_key=test_only_small_key)
    return public, PrivateKey(public, p, q)


def _be(x: mpz) -> bytes:
    return x.to_bytes((x.bit_length() + 7) // 8, "big")


def _plain(values: Sequence[Any], half: mpz) -> list[int]:
    """Plaintexts as Python ints, each with |m| <= (n−1)/2, i.e. |m| < n/2 (DataError otherwise)."""
    ms = [v if type(v) is int else int(v) for v in values]
    if ms and (max(ms) > half or min(ms) < -half):
        bad = sum(1 for m in ms if abs(m) > half)
        raise DataError(f"{bad} of {len(ms)} plaintexts have |m| >= n/2 (a {half.bit_length() + 1}-bit modulus "
                        f"holds signed values below 2^{half.bit_length() - 1} safely)")
    return ms


@dataclass(frozen=True)
class PublicKey:
    """n and the DJN base h_s; what a party without the key needs to encrypt and compute on ciphertexts."""

    n: mpz = field(repr=False)
    hs: mpz = field(repr=False)
    test_only_small_key: bool = field(default=False, repr=False, compare=False)
    n2: mpz = field(init=False, repr=False)
    bits: int = field(init=False)
    ciphertext_bytes: int = field(init=False, repr=False)
    max_plaintext_bits: int = field(init=False, repr=False)
    """A signed plaintext with |m| < 2^max_plaintext_bits is always in range (bits − 2)."""
    alpha_bits: int = field(init=False, repr=False)
    """Bits of the DJN exponent α: ⌈bits/2⌉."""
    _tables: dict[str, FixedBase] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        n, hs = mpz(self.n), mpz(self.hs)
        if n < (1 << (_FLOOR_BITS - 1)) or n % 2 == 0:
            raise ProtocolError(f"Paillier public key: n must be an odd modulus of >= {_FLOOR_BITS} bits")
        bits = n.bit_length()
        if bits < MIN_KEY_BITS and not self.test_only_small_key:
            raise ProtocolError(f"Paillier public key of {bits} bits refused; allowed: >= {MIN_KEY_BITS} bits")
        n2 = n * n
        if not 1 < hs < n2 or gmpy2.gcd(hs, n) != 1:
            raise ProtocolError("Paillier public key: h_s must be a unit of Z_{n^2} other than 1")
        for name, value in (("n", n), ("hs", hs), ("n2", n2), ("bits", bits),
                            ("ciphertext_bytes", (n2.bit_length() + 7) // 8), ("max_plaintext_bits", bits - 2),
                            ("alpha_bits", (bits + 1) // 2)):
            object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple[type, tuple[mpz, mpz, bool]]:  # the table is rebuilt, never shipped
        return (type(self), (self.n, self.hs, self.test_only_small_key))

    # ---- the record the key travels in (a flwr ConfigRecord holds bytes) ----
    def to_record(self) -> dict[str, bytes]:
        """``{"n": ..., "hs": ...}``, big-endian bytes."""
        return {"n": self.n.to_bytes((self.bits + 7) // 8, "big"), "hs": self.hs.to_bytes(self.ciphertext_bytes, "big")}

    @classmethod
    def from_record(cls, record: Any, *, test_only_small_key: bool = False) -> PublicKey:
        """The key of :meth:`to_record`'s mapping; ProtocolError (one line) when absent or malformed."""
        try:
            n, hs = record["n"], record["hs"]
        except (KeyError, TypeError):
            raise ProtocolError("Paillier public key record: needs the byte fields 'n' and 'hs'") from None
        if not isinstance(n, bytes) or not isinstance(hs, bytes):
            raise ProtocolError("Paillier public key record: 'n' and 'hs' must be bytes")
        return cls(mpz.from_bytes(n, "big"), mpz.from_bytes(hs, "big"), test_only_small_key=test_only_small_key)

    # ---- encryption without the factors ----
    def _table(self) -> FixedBase:
        table = self._tables.get("hs")
        if table is None:  # built once, on first use (~0.2 s and ~18 MB at 2048 bits)
            table = self._tables["hs"] = FixedBase(self.hs, self.n2, self.alpha_bits)
        return table

    def with_message(self, m: int, r: mpz) -> mpz:
        """(1 + m·n)·r mod n² for a randomizer r, as r + n·(m·r mod n): one 2048-bit product, not a 4096-bit one."""
        if not m:
            return r
        n = self.n
        return (r + n * (m * (r % n) % n)) % self.n2

    def encrypt(self, plaintexts: Sequence[int]) -> list[mpz]:
        """DJN encryptions of signed plaintexts (|m| < n/2), randomizers h_s^α from a table mod n²."""
        ms = _plain(plaintexts, self.n // 2)
        rs = self._table().pow_many(draw_exponents(len(ms), self.alpha_bits))
        wm = self.with_message
        return [wm(m, r) for m, r in zip(ms, rs, strict=True)]

    def rerandomize(self, ciphertexts: Sequence[mpz]) -> list[mpz]:
        """Each ciphertext times a fresh h_s^β: the same plaintext, unlinkable to its inputs for a key
        holder that made h_s honestly (what a sum looks like before it leaves the party that computed it)."""
        n2 = self.n2
        rs = self._table().pow_many(draw_exponents(len(ciphertexts), self.alpha_bits))
        return [c * r % n2 for c, r in zip(ciphertexts, rs, strict=True)]

    # ---- homomorphic operations (no validation: from_wire and decrypt check what crosses) ----
    def add(self, a: mpz, b: mpz) -> mpz:
        """E(x + y) from E(x), E(y)."""
        return a * b % self.n2

    def neg(self, a: mpz) -> mpz:
        """E(−x) from E(x)."""
        try:
            return gmpy2.invert(a, self.n2)
        except ZeroDivisionError:
            raise ProtocolError("ciphertext is not a unit of Z_{n^2}: it has no inverse") from None

    def sub(self, a: mpz, b: mpz) -> mpz:
        """E(x − y) from E(x), E(y)."""
        return a * self.neg(b) % self.n2

    def mul_plain(self, a: mpz, k: int) -> mpz:
        """E(k·x) from E(x) and a plaintext integer k (negative k through the inverse)."""
        if k < 0:
            return gmpy2.powmod(self.neg(a), -k, self.n2)
        return gmpy2.powmod(a, k, self.n2)


class RandomizerSource(Protocol):
    """What a private key draws randomizers from when a pool is attached (``vfl/he/randomness.py``)."""

    def take(self, k: int) -> list[mpz]: ...

    def close(self) -> None: ...


class PrivateKey:
    """The factors p, q with their CRT precomputation; encrypts fast and decrypts with a range check."""

    __slots__ = ("public", "_p", "_q", "_p2", "_q2", "_hp", "_hq", "_q_inv", "_half", "_crt", "_pool", "__weakref__")

    def __init__(self, public: PublicKey, p: int, q: int) -> None:
        p, q = mpz(p), mpz(q)
        if p * q != public.n or p == q:
            raise DataError("Paillier private key: p·q must equal the public modulus, with p != q")
        self.public = public
        self._p, self._q = p, q
        self._p2, self._q2 = p * p, q * q
        # L_p(c^(p−1) mod p²) = m·q·(p−1) = −m·q (mod p): hp undoes that factor (hq alike)
        self._hp = gmpy2.invert(-q % p, p)
        self._hq = gmpy2.invert(-p % q, q)
        self._q_inv = gmpy2.invert(q, p)
        self._half = public.n // 2
        self._crt: CrtRandomizers | None = None
        self._pool: RandomizerSource | None = None

    def __repr__(self) -> str:
        return f"PrivateKey(bits={self.public.bits})"

    def __reduce__(self) -> Any:
        raise TypeError("a Paillier private key is never pickled: it stays with the key holder")

    @property
    def bits(self) -> int:
        return self.public.bits

    def secret_parts(self) -> tuple[bytes, bytes, bytes, int]:
        """p, q, h_s (big-endian) and α's bits: what this key's randomizer workers rebuild their tables from."""
        pub = self.public
        return (_be(self._p), _be(self._q), _be(pub.hs), pub.alpha_bits)

    # ---- randomizers and encryption ----
    def randomizers(self, k: int) -> list[mpz]:
        """``k`` fresh h_s^α mod n², computed here (mod p² and q², joined by the CRT)."""
        if self._crt is None:  # two tables, built once (~0.1 s and ~20 MB at 2048 bits)
            self._crt = CrtRandomizers(self._p, self._q, self.public.hs, self.public.alpha_bits)
        return self._crt.make(k)

    def attach(self, pool: RandomizerSource | None) -> None:
        """Draw randomizers from ``pool`` (None: compute them inline); a pool attached before is closed."""
        old, self._pool = self._pool, pool
        if old is not None and old is not pool:
            old.close()

    def close(self) -> None:
        """Close the attached pool (its workers stop); encryption goes on inline."""
        self.attach(None)

    def encrypt(self, plaintexts: Sequence[int]) -> list[mpz]:
        """DJN encryptions of signed plaintexts (|m| < n/2): the pool's randomizers when one is attached."""
        ms = _plain(plaintexts, self._half)
        rs = self._pool.take(len(ms)) if self._pool is not None else self.randomizers(len(ms))
        wm = self.public.with_message
        return [wm(m, r) for m, r in zip(ms, rs, strict=True)]

    # ---- decryption ----
    def decrypt(self, ciphertexts: Sequence[mpz], *, bound: int) -> list[int]:
        """The plaintexts in (−n/2, n/2], CRT decryption. ProtocolError if a ciphertext is not a unit of
        Z_{n²}; :class:`HEOutOfRange` if any |m| > ``bound`` (the whole batch is refused)."""
        if isinstance(bound, bool) or not hasattr(bound, "__index__") or not 0 <= bound <= self._half:
            raise ValueError(f"bound must be an int in [0, (n-1)/2], got {bound!r}")
        bound = int(bound)
        cs = list(ciphertexts)
        n2 = self.public.n2
        bad = sum(1 for c in cs if not 0 < c < n2)
        if bad:
            raise ProtocolError(f"{bad} of {len(cs)} ciphertexts are outside [1, n^2): refused")
        p, q, p2, q2 = self._p, self._q, self._p2, self._q2
        xp = gmpy2.powmod_base_list([c % p2 for c in cs], p - 1, p2)  # releases the GIL
        xq = gmpy2.powmod_base_list([c % q2 for c in cs], q - 1, q2)
        hp, hq, q_inv, half, n = self._hp, self._hq, self._q_inv, self._half, self.public.n
        out: list[int] = []
        for a, b in zip(xp, xq, strict=True):
            tp, rp = divmod(a - 1, p)
            tq, rq = divmod(b - 1, q)
            if rp or rq:  # c^(p−1) = 1 mod p for every c prime to p (Fermat): c shares a factor with n
                raise ProtocolError(f"a ciphertext of {len(cs)} is not prime to n (not a Paillier ciphertext): refused")
            mp, mq = tp * hp % p, tq * hq % q
            m = mq + q * ((mp - mq) * q_inv % p)
            out.append(int(m - n) if m > half else int(m))
        over = sum(1 for m in out if m > bound or m < -bound)
        if over:
            raise HEOutOfRange(over, len(out), bound)
        return out
