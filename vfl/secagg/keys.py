"""Pairwise key agreement: X25519 + HKDF-SHA256, symmetric in the two party ids.

One Diffie-Hellman secret per pair yields two independent 32-byte keys (different HKDF info):
the mask seed keying the PRG, and the share key encrypting Shamir shares between the pair.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from vfl.errors import ProtocolError

KEY_BYTES = 32
SESSION_BYTES = 16
_MASK_INFO = b"vfl-secagg|"
_SHARE_INFO = b"vfl-secagg-share|"


@dataclass(frozen=True)
class PairKeys:
    """The two keys a pair (i, j) derives from its X25519 secret."""

    mask_seed: bytes
    share_key: bytes


def new_session_id() -> bytes:
    """A fresh random session id (16 bytes); a new one is part of every re-key."""
    return os.urandom(SESSION_BYTES)


def session_bytes(session: bytes | str) -> bytes:
    """Normalise a session id given as bytes or text to bytes."""
    if isinstance(session, str):
        session = session.encode()
    if not isinstance(session, bytes) or not session:
        raise ProtocolError(f"session id must be non-empty bytes or str, got {session!r}")
    return session


def generate_private_key() -> X25519PrivateKey:
    """A fresh X25519 private key from the OS CSPRNG."""
    return X25519PrivateKey.generate()


def private_key_bytes(key: X25519PrivateKey) -> bytes:
    """The 32 raw bytes of an X25519 private key (what gets Shamir-shared)."""
    return key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


def private_key_from_bytes(raw: bytes) -> X25519PrivateKey:
    """Load a raw 32-byte X25519 private key; ProtocolError if malformed."""
    try:
        return X25519PrivateKey.from_private_bytes(raw)
    except ValueError as exc:
        raise ProtocolError(f"malformed X25519 private key: {exc}") from exc


def public_key_bytes(key: X25519PrivateKey | X25519PublicKey) -> bytes:
    """The 32 raw bytes of the public key of ``key`` (or of ``key`` itself if public)."""
    pub = key.public_key() if isinstance(key, X25519PrivateKey) else key
    return pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def load_public_key(raw: bytes, *, party: int) -> X25519PublicKey:
    """Parse a raw 32-byte X25519 public key sent by ``party``; ProtocolError if malformed."""
    if not isinstance(raw, bytes) or len(raw) != KEY_BYTES:
        raise ProtocolError(f"public key of party {party} must be {KEY_BYTES} bytes")
    try:
        return X25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise ProtocolError(f"malformed public key of party {party}: {exc}") from exc


def _pair_info(label: bytes, session: bytes, i: int, j: int) -> bytes:
    """HKDF info: label | len(session) | session | min(i,j) | max(i,j) (fixed-width ids)."""
    lo, hi = sorted((int(i), int(j)))
    return (
        label
        + len(session).to_bytes(2, "big")
        + session
        + lo.to_bytes(8, "big", signed=True)
        + hi.to_bytes(8, "big", signed=True)
    )


def _hkdf(secret: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=None, info=info).derive(secret)


def _shared_secret(
    *, own_key: X25519PrivateKey, peer_public: X25519PublicKey, own_id: int, peer_id: int
) -> bytes:
    """Raw X25519 secret of the pair; ProtocolError for self-pairs and low-order keys."""
    if own_id == peer_id:
        raise ProtocolError(f"party {own_id} cannot agree a pair key with itself")
    try:
        return own_key.exchange(peer_public)
    except ValueError as exc:  # all-zero shared secret: low-order public key
        raise ProtocolError(f"key agreement with party {peer_id} failed: {exc}") from exc


def derive_pair_keys(
    *,
    own_key: X25519PrivateKey,
    peer_public: X25519PublicKey,
    own_id: int,
    peer_id: int,
    session: bytes,
) -> PairKeys:
    """Mask seed and share key of the pair (own_id, peer_id); both sides derive the same ones."""
    secret = _shared_secret(
        own_key=own_key, peer_public=peer_public, own_id=own_id, peer_id=peer_id
    )
    return PairKeys(
        mask_seed=_hkdf(secret, _pair_info(_MASK_INFO, session, own_id, peer_id)),
        share_key=_hkdf(secret, _pair_info(_SHARE_INFO, session, own_id, peer_id)),
    )


def derive_mask_seed(
    *,
    own_key: X25519PrivateKey,
    peer_public: X25519PublicKey,
    own_id: int,
    peer_id: int,
    session: bytes,
) -> bytes:
    """Only the mask seed of the pair (what the server recomputes for a dropped party)."""
    secret = _shared_secret(
        own_key=own_key, peer_public=peer_public, own_id=own_id, peer_id=peer_id
    )
    return _hkdf(secret, _pair_info(_MASK_INFO, session, own_id, peer_id))
