"""Key material of a secure-aggregation session, and the round-bound keys derived from it.

Per session each party has an X25519 key pair and a random 32-byte self-mask seed b. One
Diffie-Hellman secret per pair yields two independent 32-byte keys (HKDF-SHA256, different
info): the pair mask secret s_ij and the share key that seals Shamir shares between the pair.
Masks never use s_ij or b directly: every (round, tensor) gets its own key,
HKDF-Expand(secret, label | session | round | tensor), so revealing one round's key exposes
nothing of another round. The private key and s_ij never leave their party.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF, HKDFExpand

from vfl.core.errors import ProtocolError

KEY_BYTES = 32
SESSION_BYTES = 16
_MASK_INFO = b"vfl-secagg|"
_SHARE_INFO = b"vfl-secagg-share|"
PAIR_LABEL = b"vfl-secagg-pair-round|"
SELF_LABEL = b"vfl-secagg-self-round|"


@dataclass(frozen=True)
class PairKeys:
    """The two keys a pair (i, j) derives from its X25519 secret."""

    mask_secret: bytes
    share_key: bytes


def new_session_id() -> bytes:
    """A fresh random session id (16 bytes); a new one is part of every key set-up."""
    return os.urandom(SESSION_BYTES)


def new_seed() -> bytes:
    """A fresh 32-byte self-mask seed b from the OS CSPRNG."""
    return os.urandom(KEY_BYTES)


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
    """The 32 raw bytes of an X25519 private key (for audits: it never goes on the wire)."""
    return key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )


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


def _length_prefixed(*parts: bytes) -> bytes:
    return b"".join(len(p).to_bytes(4, "big") + p for p in parts)


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


def derive_pair_keys(
    *,
    own_key: X25519PrivateKey,
    peer_public: X25519PublicKey,
    own_id: int,
    peer_id: int,
    session: bytes,
) -> PairKeys:
    """Mask secret and share key of the pair (own_id, peer_id); both sides derive the same ones."""
    if own_id == peer_id:
        raise ProtocolError(f"party {own_id} cannot agree a pair key with itself")
    try:
        secret = own_key.exchange(peer_public)
    except ValueError as exc:  # all-zero shared secret: low-order public key
        raise ProtocolError(f"key agreement with party {peer_id} failed: {exc}") from exc
    return PairKeys(
        mask_secret=_hkdf(secret, _pair_info(_MASK_INFO, session, own_id, peer_id)),
        share_key=_hkdf(secret, _pair_info(_SHARE_INFO, session, own_id, peer_id)),
    )


def round_key(secret: bytes, *, label: bytes, session: bytes, round_id: int | str, name: str) -> bytes:
    """HKDF-Expand-SHA256(secret, label | session | round | name): the key of one (round, tensor).

    ``secret`` is already uniformly random (an HKDF output or a CSPRNG seed), so the Expand step
    alone is a PRF (RFC 5869 section 3.3). Distinct (round, name) give independent keys.
    """
    if not isinstance(secret, bytes) or len(secret) != KEY_BYTES:
        raise ProtocolError(f"a round key needs a {KEY_BYTES}-byte secret")
    info = _length_prefixed(label, session, str(round_id).encode(), name.encode())
    return HKDFExpand(algorithm=hashes.SHA256(), length=KEY_BYTES, info=info).derive(secret)
