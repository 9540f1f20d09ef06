"""One party's side of secure aggregation, as a state object exchanging only bytes and arrays.

Order of calls: ``public_key`` -> ``receive_public_keys`` -> ``make_shares`` ->
``receive_shares`` -> ``mask`` (once per (round, name)) -> ``reveal_shares`` if the server
reports dropouts. ``rekey`` starts a new session with a fresh key pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from vfl.errors import ConfigError, ProtocolError
from vfl.secagg.keys import (
    PairKeys,
    derive_pair_keys,
    generate_private_key,
    load_public_key,
    new_session_id,
    private_key_bytes,
    public_key_bytes,
    session_bytes,
)
from vfl.secagg.masking import apply_pairwise_masks
from vfl.secagg.shares import (
    KeyShare,
    decrypt_share,
    encrypt_share,
    share_index,
    split_key,
)


def check_parties(parties: Iterable[int], threshold: int) -> tuple[int, ...]:
    """Sorted distinct party ids (at least 2) with 1 <= threshold <= M-1; ConfigError otherwise."""
    ids = tuple(sorted({int(p) for p in parties}))
    if len(ids) < 2:
        raise ConfigError("parties", f"secure aggregation needs at least 2 parties, got {ids}")
    if isinstance(threshold, bool) or not isinstance(threshold, int):
        raise ConfigError("threshold", f"must be an integer, got {threshold!r}")
    if not 1 <= threshold <= len(ids) - 1:
        raise ConfigError(
            "threshold", f"must be in [1, {len(ids) - 1}] for {len(ids)} parties, got {threshold}"
        )
    return ids


class SecAggClient:
    """Party ``party_id`` among ``peers`` (all party ids; including itself or not)."""

    def __init__(
        self, party_id: int, peers: Iterable[int], threshold: int, session: bytes | str
    ) -> None:
        self.party_id = int(party_id)
        self.parties = check_parties([*peers, self.party_id], threshold)
        self.threshold = threshold
        self.rekey(session)

    @property
    def peers(self) -> tuple[int, ...]:
        """The other parties, sorted."""
        return tuple(p for p in self.parties if p != self.party_id)

    def rekey(self, session: bytes | str | None = None) -> bytes:
        """Fresh key pair and session (random id if None); forgets all pair state. Returns the public key."""
        self.session = session_bytes(session) if session is not None else new_session_id()
        self._key = generate_private_key()
        self._pairs: dict[int, PairKeys] = {}
        self._peer_keys: dict[int, bytes] = {}
        self._envelopes: dict[int, bytes] | None = None
        self._held: dict[int, KeyShare] = {}
        self._used: set[tuple[str, str]] = set()
        return self.public_key()

    def public_key(self) -> bytes:
        """My 32-byte X25519 public key for this session."""
        return public_key_bytes(self._key)

    def receive_public_keys(self, keys: Mapping[int, bytes]) -> None:
        """Agree a mask seed and a share key with every peer from their public keys."""
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
                    raise ProtocolError(f"party {peer} changed its public key; re-key first")
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
        """Shamir-share my private key (threshold t), one AES-GCM envelope per recipient."""
        self._require_keys()
        if self._envelopes is None:
            shares = split_key(
                private_key_bytes(self._key), threshold=self.threshold, count=len(self.peers)
            )
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
        """Decrypt and keep the shares of other parties' keys addressed to me (sender -> envelope)."""
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

    def mask(
        self, values: npt.ArrayLike, *, round_id: int | str, name: str, k: int
    ) -> npt.NDArray[np.uint32]:
        """Mask integer ``values`` in [0, 2^k) for (round, name); each pair may be used once."""
        self._require_keys()
        if self._envelopes is None:
            raise ProtocolError(
                "make_shares() must run before masking, or dropouts are unrecoverable"
            )
        slot = (str(round_id), name)
        if slot in self._used:
            raise ProtocolError(
                f"party {self.party_id} already masked {name!r} in round {round_id}"
            )
        masked = apply_pairwise_masks(
            values,
            own_id=self.party_id,
            seeds={peer: pair.mask_seed for peer, pair in self._pairs.items()},
            round_id=round_id,
            name=name,
            k=k,
        )
        self._used.add(slot)
        return masked

    def reveal_shares(self, dropped: Iterable[int]) -> dict[int, bytes]:
        """Plaintext shares I hold of the dropped parties' keys (dropped -> share bytes).

        Parties whose share never reached me are left out; the server decides whether the rest
        meets the threshold.
        """
        out: dict[int, bytes] = {}
        for party in dropped:
            if party == self.party_id:
                raise ProtocolError(f"party {self.party_id} was asked to reveal its own key")
            if party not in self.peers:
                raise ProtocolError(f"cannot reveal a share of unknown party {party}")
            if party in self._held:
                out[party] = self._held[party].to_bytes()
        return out

    def _require_keys(self) -> None:
        if set(self._pairs) != set(self.peers):
            raise ProtocolError(f"party {self.party_id} has not received all public keys yet")
