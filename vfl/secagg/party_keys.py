"""One party's SecAgg session secrets: its X25519 key, the pair secrets agreed with each peer, its self-mask
seed and the sealed Shamir shares of it, and the round keys derived from them. The session set-up of every
mode (``SecAggClient`` adds the round rules on top); the private key, seed and pair secrets never leave it.

Order of calls: ``public_key`` (with ``key_signature`` where auth is on) -> ``receive_public_keys`` ->
``make_shares`` -> ``receive_shares`` (mode announced stops after the public keys: no self mask, no seed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from vfl.core.errors import ProtocolError
from vfl.secagg.consistency import Identity, key_statement, verify_keys
from vfl.secagg.keys import (
    PAIR_LABEL,
    SELF_LABEL,
    PairKeys,
    derive_pair_keys,
    generate_private_key,
    load_public_key,
    new_seed,
    public_key_bytes,
    round_key,
    session_bytes,
)
from vfl.secagg.release import view_key
from vfl.secagg.rules import check_session_parties, share_threshold
from vfl.secagg.shares import SeedShare, decrypt_share, encrypt_share, share_index, split_secret

__all__ = ["PartyKeys"]


class PartyKeys:
    """Party ``party_id`` among ``peers`` (all party ids; including itself or not), threshold t for its seed
    shares. With an ``identity`` (its identity key; its peers' from a roster the server did not build) every
    SecAgg key must carry its party's signature. ``roster``: the run's number of parties where the session
    holds only some of them (``check_session_parties``)."""

    def __init__(self, party_id: int, peers: Iterable[int], threshold: int, session: bytes | str, *,
                 identity: Identity | None = None, roster: int = 0) -> None:
        self.party_id = int(party_id)
        self.identity = identity
        self.parties = check_session_parties([*peers, self.party_id], threshold, roster=roster)
        self.threshold = threshold
        self.session = session_bytes(session)
        self._key = generate_private_key()  # never shared, never leaves this object
        self._seed = new_seed()  # self-mask seed b; only Shamir shares of it leave
        self._pairs: dict[int, PairKeys] = {}
        self._peer_keys: dict[int, bytes] = {}
        self._envelopes: dict[int, bytes] | None = None
        self._held: dict[int, SeedShare] = {}

    @property
    def peers(self) -> tuple[int, ...]:
        """The other parties of the session, sorted."""
        return tuple(p for p in self.parties if p != self.party_id)

    def public_key(self) -> bytes:
        """My 32-byte X25519 public key for this session."""
        return public_key_bytes(self._key)

    def key_signature(self) -> bytes:
        """My identity signature on (session, my id, my public key)."""
        if self.identity is None:
            raise ProtocolError(f"party {self.party_id} has no identity key to sign its SecAgg key with")
        return self.identity.sign(key_statement(session=self.session, party=self.party_id, public_key=self.public_key()))

    def receive_public_keys(self, keys: Mapping[int, bytes], signatures: Mapping[int, bytes] | None = None) -> None:
        """Agree a mask secret and a share key with every peer from their public keys (with an
        identity each key must carry its party's identity signature: KeySwapDetected otherwise)."""
        if self.identity is not None:
            verify_keys(self.identity, me=self.party_id, session=self.session, keys=keys, signatures=signatures or {})
        unknown = sorted(set(keys) - set(self.parties))
        if unknown:
            raise ProtocolError(f"public keys from unknown parties {unknown}")
        missing = sorted(set(self.peers) - set(keys))
        if missing:
            raise ProtocolError(f"party {self.party_id} lacks public keys of parties {missing}")
        own = self.public_key()
        if self.party_id in keys and keys[self.party_id] != own:
            raise ProtocolError(f"the key listed for party {self.party_id} is not its own")
        for peer in self.peers:
            raw = keys[peer]
            if raw == own:
                raise ProtocolError(f"party {peer} presented party {self.party_id}'s public key")
            if peer in self._peer_keys:
                if self._peer_keys[peer] != raw:
                    raise ProtocolError(f"party {peer} changed its public key; start a new session")
                continue
            self._pairs[peer] = derive_pair_keys(
                own_key=self._key,
                peer_public=load_public_key(raw, party=peer),
                own_id=self.party_id,
                peer_id=peer,
                session=self.session,
            )
            self._peer_keys[peer] = raw

    def make_shares(self) -> dict[int, bytes]:
        """Shamir-share my self-mask seed (threshold t, or every peer in a session of t parties), one AES-GCM
        envelope per peer."""
        self._require_keys()
        if self._envelopes is None:
            shares = split_secret(self._seed, threshold=share_threshold(self.threshold, len(self.peers)),
                                  count=len(self.peers))
            self._envelopes = {
                peer: encrypt_share(
                    share,
                    key=self._pairs[peer].share_key,
                    sender=self.party_id,
                    recipient=peer,
                    session=self.session,
                )
                for peer, share in zip(self.peers, shares, strict=True)
            }
        return dict(self._envelopes)

    def receive_shares(self, shares: Mapping[int, bytes]) -> None:
        """Decrypt and keep the shares of other parties' seeds addressed to me (sender -> envelope)."""
        self._require_keys()
        for sender, blob in shares.items():
            if sender not in self.peers:
                raise ProtocolError(f"party {self.party_id} got a share from non-peer {sender}")
            share = decrypt_share(
                blob,
                key=self._pairs[sender].share_key,
                sender=sender,
                recipient=self.party_id,
                session=self.session,
            )
            expected = share_index(owner=sender, holder=self.party_id, parties=self.parties)
            if share.index != expected:
                raise ProtocolError(
                    f"share from party {sender} has index {share.index} != {expected}"
                )
            if sender in self._held and self._held[sender] != share:
                raise ProtocolError(f"party {sender} sent two different shares")
            self._held[sender] = share

    # ---- round keys -------------------------------------------------------------------------
    def _self_key(self, rnd: str, name: str) -> bytes:
        return round_key(self._seed, label=SELF_LABEL, session=self.session, round_id=rnd, name=name)

    def _view_key(self, peer: int, rnd: str, name: str) -> bytes:
        return view_key(self._pairs[peer].mask_secret, session=self.session, round_id=rnd, name=name)

    def _pair_key(self, peer: int, rnd: str, name: str) -> bytes:
        secret = self._pairs[peer].mask_secret
        return round_key(secret, label=PAIR_LABEL, session=self.session, round_id=rnd, name=name)

    def _require_keys(self) -> None:
        if set(self._pairs) != set(self.peers):
            raise ProtocolError(f"party {self.party_id} has not received all public keys yet")
