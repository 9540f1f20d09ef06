"""Shamir sharing of a party's 32-byte self-mask seed b, and the AES-GCM envelope of a share.

pycryptodome's Shamir works over GF(2^128) on 16-byte secrets, so the seed is split as two
independent 16-byte halves sharing one x-coordinate. A share travels encrypted under the pair's
share key, so the server relaying it learns nothing until a holder reveals it (only for a
survivor that vanished before revealing its own round key). Private keys are never shared.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from Crypto.Protocol.SecretSharing import Shamir
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from vfl.core.errors import ConfigError, ProtocolError

HALF_BYTES = 16
SECRET_BYTES = 2 * HALF_BYTES
SHARE_BYTES = 2 + SECRET_BYTES
GCM_NONCE_BYTES = 12
_AAD_LABEL = b"vfl-secagg-seed-share-envelope"


@dataclass(frozen=True)
class SeedShare:
    """One Shamir share of a 32-byte seed: x-coordinate and the y-values of both halves."""

    index: int
    first: bytes
    second: bytes

    def to_bytes(self) -> bytes:
        """Wire form: 2-byte big-endian index, then the two 16-byte halves."""
        return self.index.to_bytes(2, "big") + self.first + self.second

    @classmethod
    def from_bytes(cls, raw: bytes) -> SeedShare:
        """Parse the wire form; ProtocolError if the length or index is wrong."""
        if not isinstance(raw, bytes) or len(raw) != SHARE_BYTES:
            raise ProtocolError(f"a seed share must be {SHARE_BYTES} bytes")
        index = int.from_bytes(raw[:2], "big")
        if index < 1:
            raise ProtocolError("a seed share has index 0")
        return cls(index=index, first=raw[2:18], second=raw[18:])


def share_index(*, owner: int, holder: int, parties: Iterable[int]) -> int:
    """Shamir x-coordinate of ``holder``'s share of ``owner``'s seed: 1 + rank among the others."""
    others = sorted(p for p in set(parties) if p != owner)
    if holder not in others:
        raise ProtocolError(f"party {holder} holds no share of party {owner}'s seed")
    return 1 + others.index(holder)


def split_secret(secret: bytes, *, threshold: int, count: int) -> list[SeedShare]:
    """Split a 32-byte secret into ``count`` shares (indices 1..count), any ``threshold`` recover it."""
    if len(secret) != SECRET_BYTES:
        raise ConfigError("secret", f"must be {SECRET_BYTES} bytes, got {len(secret)}")
    if not 1 <= threshold <= count:
        raise ConfigError("threshold", f"must be in [1, {count}], got {threshold}")
    first = Shamir.split(threshold, count, secret[:HALF_BYTES], False)
    second = Shamir.split(threshold, count, secret[HALF_BYTES:], False)
    return [
        SeedShare(index=i, first=a, second=b) for (i, a), (_, b) in zip(first, second, strict=True)
    ]


def combine_secret(shares: Sequence[SeedShare]) -> bytes:
    """Recover the 32-byte secret from exactly ``threshold`` distinct shares."""
    if len({s.index for s in shares}) != len(shares) or not shares:
        raise ProtocolError("seed shares must be non-empty with distinct indices")
    first = Shamir.combine([(s.index, s.first) for s in shares], False)
    second = Shamir.combine([(s.index, s.second) for s in shares], False)
    return bytes(first) + bytes(second)


def _aad(*, sender: int, recipient: int, session: bytes) -> bytes:
    """Bind a share envelope to its session and direction (sender -> recipient)."""
    return (
        _AAD_LABEL
        + len(session).to_bytes(2, "big")
        + session
        + int(sender).to_bytes(8, "big", signed=True)
        + int(recipient).to_bytes(8, "big", signed=True)
    )


def encrypt_share(
    share: SeedShare, *, key: bytes, sender: int, recipient: int, session: bytes
) -> bytes:
    """AES-256-GCM envelope: random 12-byte nonce || ciphertext+tag, bound to the direction."""
    nonce = os.urandom(GCM_NONCE_BYTES)
    aad = _aad(sender=sender, recipient=recipient, session=session)
    return nonce + AESGCM(key).encrypt(nonce, share.to_bytes(), aad)


def decrypt_share(
    blob: bytes, *, key: bytes, sender: int, recipient: int, session: bytes
) -> SeedShare:
    """Open an envelope from ``sender``; ProtocolError if it was forged, altered or misrouted."""
    if not isinstance(blob, bytes) or len(blob) <= GCM_NONCE_BYTES:
        raise ProtocolError(f"share envelope from party {sender} is truncated")
    aad = _aad(sender=sender, recipient=recipient, session=session)
    try:
        plain = AESGCM(key).decrypt(blob[:GCM_NONCE_BYTES], blob[GCM_NONCE_BYTES:], aad)
    except InvalidTag as exc:
        raise ProtocolError(f"share envelope from party {sender} failed authentication") from exc
    return SeedShare.from_bytes(plain)
