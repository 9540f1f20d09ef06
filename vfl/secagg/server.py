"""Server side of secure aggregation: sums masked vectors and removes the masks of dropped parties.

It enforces the rules that keep an honest-but-curious server from learning one party's input:
a party declared dropped is refused for the rest of the session (its key gets reconstructed, so
its masked vector would be readable), and each (round, name) is aggregated at most once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from vfl.errors import ConfigError, PartyFailure, ProtocolError
from vfl.secagg.client import check_parties
from vfl.secagg.keys import (
    load_public_key,
    private_key_from_bytes,
    public_key_bytes,
    session_bytes,
)
from vfl.secagg.masking import dropped_party_terms
from vfl.secagg.modular import check_bits, low_bits_mask, to_residues
from vfl.secagg.shares import KeyShare, combine_key, share_index


class SecAggServer:
    """Aggregator for ``parties`` with Shamir threshold ``threshold`` over Z_{2^k}."""

    def __init__(
        self, parties: Iterable[int], threshold: int, k: int, session: bytes | str
    ) -> None:
        self.parties = check_parties(parties, threshold)
        self.threshold = threshold
        self.k = check_bits(k)
        self.rekey(session)

    def rekey(self, session: bytes | str) -> None:
        """Start a new session (clients re-key too): forget dropouts, recovered keys and rounds."""
        self.session = session_bytes(session)
        self._dropped: set[int] = set()
        self._recovered: dict[int, X25519PrivateKey] = {}
        self._done: set[tuple[str, str]] = set()

    @property
    def dropped(self) -> frozenset[int]:
        """Parties declared dropped in this session; none of their messages is accepted again."""
        return frozenset(self._dropped)

    def accept(self, party: int, *, round_id: int | str, name: str) -> None:
        """Raise ProtocolError unless a masked vector from ``party`` for (round, name) may be used."""
        if party not in self.parties:
            raise ProtocolError(f"masked vector from unknown party {party}")
        if party in self._dropped:
            raise ProtocolError(
                f"party {party} was declared dropped in this session; its message for "
                f"round {round_id} is refused (re-key to readmit it)"
            )
        if (str(round_id), name) in self._done:
            raise ProtocolError(f"{name!r} of round {round_id} was already aggregated")

    def declare_dropped(self, parties: Iterable[int], *, round_id: int | str) -> None:
        """Commit to a dropout set before asking survivors for shares; later messages are refused."""
        for party in parties:
            if party not in self.parties:
                raise ProtocolError(f"round {round_id}: cannot drop unknown party {party}")
            self._dropped.add(party)

    def aggregate(
        self,
        masked: Mapping[int, npt.ArrayLike],
        *,
        round_id: int | str,
        name: str,
        public_keys: Mapping[int, bytes],
        revealed_shares: Mapping[int, Mapping[int, bytes]] | None = None,
    ) -> npt.NDArray[np.int64]:
        """Sum mod 2^k of the true inputs of the parties in ``masked``.

        Parties absent from ``masked`` are declared dropped; their keys are rebuilt from
        ``revealed_shares`` (survivor -> {dropped -> share}) unless already known, and their
        mask terms removed. PartyFailure if any dropped key has fewer than ``threshold`` shares.
        """
        for party in masked:
            self.accept(party, round_id=round_id, name=name)
        survivors = sorted(masked)
        missing = sorted(set(self.parties) - set(masked))
        arrays = self._check_vectors(masked, round_id=round_id)
        revealed = revealed_shares or {}
        self._check_revealers(revealed, survivors=survivors, missing=missing, round_id=round_id)
        # From here on the round is spent and the missing parties are out, whatever happens.
        self._done.add((str(round_id), name))
        self.declare_dropped(missing, round_id=round_id)
        if not survivors:
            raise PartyFailure(_names(missing), str(round_id), "no party sent a masked vector")
        shape = arrays[0].shape
        total = np.zeros(arrays[0].size, dtype=np.uint32)
        for arr in arrays:
            total += arr.reshape(-1)  # wraps mod 2^32, exact mod 2^k
        if missing:
            keys = self._dropped_keys(missing, survivors, public_keys, revealed, round_id)
            survivor_keys = {
                s: load_public_key(_key_of(public_keys, s), party=s) for s in survivors
            }
            for party in missing:
                total -= dropped_party_terms(
                    dropped_id=party,
                    dropped_key=keys[party],
                    survivors=survivor_keys,
                    session=self.session,
                    round_id=round_id,
                    name=name,
                    n=total.size,
                    k=self.k,
                )
        total &= low_bits_mask(self.k)
        return total.astype(np.int64).reshape(shape)

    def _check_vectors(
        self, masked: Mapping[int, npt.ArrayLike], *, round_id: int | str
    ) -> list[npt.NDArray[np.uint32]]:
        try:
            arrays = [to_residues(masked[p], k=self.k, key=f"party {p}") for p in sorted(masked)]
        except ConfigError as exc:  # a malformed message, not a bad setting
            raise ProtocolError(f"round {round_id}: masked vector of {exc}") from exc
        if len({a.shape for a in arrays}) > 1:
            raise ProtocolError(f"round {round_id}: masked vectors have different shapes")
        return arrays

    def _check_revealers(
        self,
        revealed: Mapping[int, Mapping[int, bytes]],
        *,
        survivors: list[int],
        missing: list[int],
        round_id: int | str,
    ) -> None:
        for holder, shares in revealed.items():
            if holder not in survivors:
                raise ProtocolError(f"round {round_id}: shares from non-survivor {holder}")
            leaked = sorted(set(shares) - set(missing))
            if leaked:
                raise ProtocolError(
                    f"round {round_id}: party {holder} revealed shares of live parties {leaked}"
                )

    def _dropped_keys(
        self,
        missing: list[int],
        survivors: list[int],
        public_keys: Mapping[int, bytes],
        revealed: Mapping[int, Mapping[int, bytes]],
        round_id: int | str,
    ) -> dict[int, X25519PrivateKey]:
        """Private keys of the dropped parties: cached, or rebuilt from >= threshold shares."""
        short: list[tuple[int, int]] = []
        for party in missing:
            if party in self._recovered:
                continue
            shares = self._collect(party, survivors, revealed, round_id)
            if len(shares) < self.threshold:
                short.append((party, len(shares)))
                continue
            key = private_key_from_bytes(combine_key(shares[: self.threshold]))
            if public_key_bytes(key) != _key_of(public_keys, party):
                raise ProtocolError(
                    f"round {round_id}: key rebuilt for party {party} does not match its public key"
                )
            self._recovered[party] = key
        if short:
            counts = ", ".join(f"party {p}: {c}" for p, c in short)
            raise PartyFailure(
                _names([p for p, _ in short]),
                str(round_id),
                f"dropped after masking and too few key shares to recover "
                f"({counts}; threshold {self.threshold})",
            )
        return {party: self._recovered[party] for party in missing}

    def _collect(
        self,
        party: int,
        survivors: list[int],
        revealed: Mapping[int, Mapping[int, bytes]],
        round_id: int | str,
    ) -> list[KeyShare]:
        shares = []
        for holder in survivors:
            raw = revealed.get(holder, {}).get(party)
            if raw is None:
                continue
            share = KeyShare.from_bytes(raw)
            expected = share_index(owner=party, holder=holder, parties=self.parties)
            if share.index != expected:
                raise ProtocolError(
                    f"round {round_id}: party {holder}'s share of party {party} has index "
                    f"{share.index}, expected {expected}"
                )
            shares.append(share)
        return shares


def _names(parties: Iterable[int]) -> str:
    return ",".join(str(p) for p in parties)


def _key_of(public_keys: Mapping[int, bytes], party: int) -> bytes:
    if party not in public_keys:
        raise ProtocolError(f"no public key for party {party}")
    return public_keys[party]
