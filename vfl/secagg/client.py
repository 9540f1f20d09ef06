"""One party's side of secure aggregation, as a state object exchanging only bytes and arrays.

Order of calls: ``public_key`` -> ``receive_public_keys`` -> ``make_shares`` -> ``receive_shares``
-> per round: ``mask`` (once per (round, name)) -> ``unmask`` (the server's request: my round
self stream masked with view streams over the survivors it names (``vfl.secagg.release``), plus
round pair keys for the parties it declares dropped) -> ``reveal_shares`` only if a survivor
vanished before releasing. A new session is a new client.

The honest-client rules are enforced here and raise :class:`RevealRefused`: keys only for the
round masked last; never both a peer's round pair keys and shares of its seed; never anything
about its own seed; no masking after it was declared dropped or its seed was rebuilt; no seed
shares in mode semi-honest unless t + max(t, 2) > M + colluders (below that a server telling
parties different survivor sets could rebuild a self mask whose pair keys it also got); with ``rows`` (exact
codes) no sample's row is released under two survivor sets (``RowReleaseRefused``, ``_check_release``).

Mode ``announced`` (``vfl.secagg.announce``): ``announce`` (the set S the server named for a round,
before masking) -> ``mask`` over S with pair streams only; each round is announced and masked at
most once, one input is never masked over two different sets (an evaluation batch asked again under
another round tag), and ``unmask``, ``reveal_shares`` and ``sign_survivors`` are refused: nothing is revealed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vfl.errors import ProtocolError, RevealRefused
from vfl.secagg.announce import check_announcement
from vfl.secagg.consistency import (
    AnnouncementRefused,
    Identity,
    RowReleaseRefused,
    SurvivorCheck,
    check_mode,
    key_statement,
    quorum,
    verify_keys,
)
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
from vfl.secagg.masking import apply_pairwise_masks
from vfl.secagg.memory import Memory, first_conflict, input_digest, row_digests
from vfl.secagg.modular import to_residues
from vfl.secagg.release import self_release, share_reveal, view_key
from vfl.secagg.rules import Reveal, check_parties, check_view
from vfl.secagg.shares import SeedShare, decrypt_share, encrypt_share, share_index, split_secret

__all__ = ["Reveal", "SecAggClient", "check_parties"]


class SecAggClient:
    """Party ``party_id`` among ``peers`` (all party ids; including itself or not). With an
    ``identity`` (its identity key; its peers' from a roster the server did not build) every SecAgg
    key must carry its party's signature; ``mode`` ``malicious`` needs one and adds the per-round
    survivor consistency check. ``masked_before`` (mode announced): the input digests of the party's earlier
    sessions, kept and extended in place (one input is never masked over two sets, across sessions too)."""

    def __init__(
        self, party_id: int, peers: Iterable[int], threshold: int, session: bytes | str, *,
        mode: str = "semi-honest", identity: Identity | None = None, colluders: int = 0,
        masked_before: Memory | None = None,
    ) -> None:
        self.party_id = int(party_id)
        self.mode = check_mode(mode, key="mode")
        if self.mode == "malicious" and identity is None:
            raise ProtocolError(f"party {party_id}: secagg mode malicious needs an identity key (auth on)")
        self.identity = identity
        self.parties = check_parties([*peers, self.party_id], threshold)
        self.threshold = threshold
        self.colluders = int(colluders)  # parties assumed to collude with the server (privacy.colluders)
        self.session = session_bytes(session)
        self._key = generate_private_key()  # never shared, never leaves this object
        self._seed = new_seed()  # self-mask seed b; only Shamir shares of it leave
        self._pairs: dict[int, PairKeys] = {}
        self._peer_keys: dict[int, bytes] = {}
        self._envelopes: dict[int, bytes] | None = None
        self._held: dict[int, SeedShare] = {}
        self._active = set(self.parties)
        self._leaving: set[int] = set()  # leave the active set when the next round starts
        self._used: set[tuple[str, str]] = set()
        self._rounds: set[str] = set()
        self._round: str | None = None  # the round masked last
        self._names: list[str] = []
        self._sizes: dict[str, tuple[int, int]] = {}  # name -> (values, k) masked in the current round
        self._view: tuple[frozenset[int], frozenset[int]] | None = None  # (survivors, dropped) of it
        self._row_digests: list[tuple[str, bytes]] = []  # (sample, row digest) masked in the current round
        self.check = None if identity is None or self.mode != "malicious" else SurvivorCheck(
            identity, me=self.party_id, threshold=threshold, session=self.session)
        self._pair_revealed: set[int] = set()
        self._shares_revealed: set[int] = set()
        self._retired = False
        self._announced: dict[str, frozenset[int]] = {}  # mode announced: round -> the set it accepted
        self._accepted = frozenset(self.parties)  # the set accepted last (a request naming none repeats it)
        # mode announced: digest of each input masked -> its set; ``masked_before`` is the party's memory of its
        # earlier sessions (a new set-up must not let the server ask an input again over another set)
        self._inputs: Memory = {} if masked_before is None else masked_before

    @property
    def peers(self) -> tuple[int, ...]:
        """The other parties of the session, sorted."""
        return tuple(p for p in self.parties if p != self.party_id)

    @property
    def active(self) -> frozenset[int]:
        """The parties (me included) whose masks I use in the next round."""
        return frozenset(self._active - self._leaving)

    def public_key(self) -> bytes:
        """My 32-byte X25519 public key for this session."""
        return public_key_bytes(self._key)

    def key_signature(self) -> bytes:
        """My identity signature on (session, my id, my public key)."""
        if self.identity is None:
            raise ProtocolError(f"party {self.party_id} has no identity key to sign its SecAgg key with")
        return self.identity.sign(key_statement(session=self.session, party=self.party_id, public_key=self.public_key()))

    def sign_survivors(self, *, round_id: int | str, survivors: Iterable[int]) -> bytes:
        """My signature on the round's survivor set (malicious mode; one set per round)."""
        rnd = self._check_round(round_id, "a survivor signature")
        if self.check is None:
            raise ProtocolError(f"party {self.party_id}: survivor signatures belong to secagg mode malicious")
        return self.check.sign(rnd, survivors)

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
        """Shamir-share my self-mask seed (threshold t), one AES-GCM envelope per peer."""
        self._require_keys()
        if self._envelopes is None:
            shares = split_secret(self._seed, threshold=self.threshold, count=len(self.peers))
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

    def announce(self, *, round_id: int | str, members: Iterable[int] | None = None) -> frozenset[int]:
        """Mode announced: accept the server's set S for ``round_id`` (None: the set accepted last, at first the
        roster) before masking it; AnnouncementRefused for a set too small, without me, naming strangers, or a
        round announced before (each round is masked at most once)."""
        if self.mode != "announced":
            raise ProtocolError(f"party {self.party_id}: announced sets belong to secagg mode announced")
        rnd = str(round_id)
        live = check_announcement(me=self.party_id, rnd=rnd, members=self._accepted if members is None else members,
                                  parties=self.parties, threshold=self.threshold, colluders=self.colluders,
                                  announced=self._announced.keys() | self._rounds)
        self._announced = {rnd: live}  # only the latest round can be masked; older ones stay refused by _rounds
        self._rounds.add(rnd)
        self._accepted = live
        return live

    def mask(
        self, values: npt.ArrayLike, *, round_id: int | str, name: str, k: int, rows: Sequence[str] | None = None
    ) -> npt.NDArray[np.uint32]:
        """Double-mask integer ``values`` in [0, 2^k) for (round, name) over the active parties. ``rows`` (mode
        announced): the sample of each row of ``values`` (equal slices), for the per-row rule of ``_check_rows``."""
        if self._retired:
            raise RevealRefused(
                f"party {self.party_id} left this session (declared dropped or its seed was "
                "rebuilt); masking again would expose its input: a new session is needed"
            )
        self._require_keys()
        rnd = str(round_id)
        if self.mode == "announced":
            return self._mask_announced(values, rnd=rnd, name=name, k=k, rows=rows)
        if self._envelopes is None:
            raise ProtocolError(
                "make_shares() must run before masking, or dropouts are unrecoverable"
            )
        if (rnd, name) in self._used:
            raise ProtocolError(f"party {self.party_id} already masked {name!r} in round {rnd}")
        if rnd != self._round:
            if rnd in self._rounds:
                raise ProtocolError(f"party {self.party_id} cannot go back to round {rnd}")
            self._active -= self._leaving
            self._leaving.clear()
            self._round, self._names, self._view, self._sizes, self._row_digests = rnd, [], None, {}, []
        elif self._view is not None:
            raise ProtocolError(f"round {rnd} is being unmasked; it takes no more tensors")
        if len(self._active) < 2:
            raise ProtocolError(f"party {self.party_id} has no active peer left to mask with")
        if rows:  # released rows are checked at unmask (``_check_release``)
            self._row_digests += zip(map(str, rows), row_digests(to_residues(values, k=k), rows, name=name, k=k,
                                                                  party=self.party_id),
                                     strict=True)
        masked = apply_pairwise_masks(
            values,
            own_id=self.party_id,
            seeds={p: self._pair_key(p, rnd, name) for p in sorted(self._active) if p != self.party_id},
            self_key=self._self_key(rnd, name),
            round_id=rnd,
            name=name,
            k=k,
        )
        self._used.add((rnd, name))
        self._rounds.add(rnd)
        self._names.append(name)
        self._sizes[name] = (int(masked.size), int(k))
        return masked

    def _mask_announced(self, values: npt.ArrayLike, *, rnd: str, name: str, k: int,
                        rows: Sequence[str] | None = None) -> npt.NDArray[np.uint32]:
        """Mode announced: pair streams over the round's announced set, no self mask; once per (round, name)."""
        live = self._announced.get(rnd)
        if live is None:
            raise ProtocolError(f"party {self.party_id}: round {rnd} was not announced (or is not the latest); "
                                "mode announced masks only over a set the server named before")
        if (rnd, name) in self._used:
            raise ProtocolError(f"party {self.party_id} already masked {name!r} in round {rnd}")
        x = to_residues(values, k=k)
        digest = input_digest(x, name=name, k=k)
        if (hit := first_conflict(self._inputs, [("", digest)], live)) is not None:  # e.g. an eval batch asked again
            raise AnnouncementRefused(rnd, self.party_id, f"this input was masked before over the set "
                                      f"{sorted(hit[1])}; masking it again over {sorted(live)} would "
                                      "open differences of sums")
        seen = self._check_rows(x, rows, rnd=rnd, name=name, k=k, live=live)
        self._inputs[digest] = live
        self._inputs.update(dict.fromkeys(seen, live))
        self._used.add((rnd, name))
        self._round = rnd
        return apply_pairwise_masks(x, own_id=self.party_id, round_id=rnd, name=name, k=k,
                                    seeds={p: self._pair_key(p, rnd, name) for p in sorted(live) if p != self.party_id})

    def _check_rows(self, x: npt.NDArray[np.uint32], rows: Sequence[str] | None, *, rnd: str, name: str, k: int,
                    live: frozenset[int]) -> list[bytes]:
        """Mode announced: one sample's row of codes is never masked over two different sets either (a server
        that freezes the bottom model, e.g. with zero gradients, sees each training sample again in another
        batch of a later epoch: per-row sums over {v, a}, {v, b}, {a, b} solve v's row). The row digests."""
        if not rows:
            return []
        seen = row_digests(x, rows, name=name, k=k, party=self.party_id)
        if (hit := first_conflict(self._inputs, zip(map(str, rows), seen, strict=True), live)) is not None:
            raise AnnouncementRefused(rnd, self.party_id, f"sample {hit[0]}'s row was masked before with these "
                                      f"codes over the set {sorted(hit[1])}; masking it again over "
                                      f"{sorted(live)} would open differences of sums")
        return seen

    def _check_release(self, rnd: str, live: frozenset[int]) -> None:
        """Modes semi-honest and malicious: no sample's row of exact codes is released under two survivor sets (a
        server that freezes the bottoms and declares v dropped in one round of a sample and not in another opens
        the sums over S and S minus v: their difference is v's row). Checked before anything is released."""
        if (hit := first_conflict(self._inputs, self._row_digests, live)) is not None:
            raise RowReleaseRefused(rnd, self.party_id, f"sample {hit[0]}'s row was released before with these "
                                    f"codes under the survivor set {sorted(hit[1])}; releasing it "
                                    f"under {sorted(live)} would open the difference of the two sums")

    def unmask(
        self, *, round_id: int | str, survivors: Iterable[int], dropped: Iterable[int],
        signatures: Mapping[int, bytes] | None = None,
    ) -> Reveal:
        """Answer the server's unmask request for the round masked last.

        I release my own self stream of that round masked with view streams over ``survivors`` (I
        am one; ``vfl.secagg.release``) and, for every party in ``dropped``, our pair key of that round; never keys of another round, never pair keys for
        a peer whose seed shares I revealed or that was listed a survivor this round, nothing for
        fewer than max(t, 2) survivors. A repeat request must repeat the view. In malicious mode
        ``signatures`` must hold >= max(t, 2) survivors' signatures on the set I signed.
        """
        rnd = self._check_round(round_id, "round keys")
        live, gone = frozenset(int(p) for p in survivors), frozenset(int(p) for p in dropped)
        if self.party_id in gone or self.party_id not in live:
            self._retired = True
            raise RevealRefused(f"party {self.party_id} is not a survivor of round {rnd}; it reveals nothing")
        both = sorted(gone & self._shares_revealed)
        if both:
            raise RevealRefused(
                f"party {self.party_id} revealed seed shares of parties {both}; it never also "
                "reveals their pair keys"
            )
        check_view(me=self.party_id, rnd=rnd, live=live, gone=gone, active=frozenset(self._active),
                   threshold=self.threshold, previous=self._view)
        if self.check is not None:
            self.check.check(rnd, live, signatures or {})
        self._check_release(rnd, live)
        self._inputs.update(dict.fromkeys((d for _, d in self._row_digests), live))
        self._view = (live, gone)
        self._pair_revealed |= gone
        self._leaving |= gone
        return Reveal(
            round_id=rnd,
            self_keys={n: self._release(rnd, n, live) for n in self._names},
            pair_keys={d: {n: self._pair_key(d, rnd, n) for n in self._names} for d in sorted(gone)},
        )

    def reveal_shares(self, *, round_id: int | str, owners: Iterable[int]) -> dict[int, bytes]:
        """Plaintext shares I hold of the seeds of ``owners``: survivors of the round being
        unmasked that vanished before revealing their own self key (owner -> share bytes)."""
        rnd = self._check_round(round_id, "seed shares")
        if self._view is None:
            raise RevealRefused(f"round {rnd}: seed shares come only after the unmask request")
        owners = sorted({int(p) for p in owners})
        if self.party_id in owners:
            self._retired = True
            raise RevealRefused(f"party {self.party_id} never reveals anything about its own seed")
        outside = sorted(set(owners) - self._view[0])
        if outside:
            raise RevealRefused(f"round {rnd}: parties {outside} are not survivors; no seed shares")
        both = sorted(set(owners) & self._pair_revealed)
        if both:
            raise RevealRefused(
                f"party {self.party_id} revealed pair keys of parties {both}; it never also "
                "reveals shares of their seeds"
            )
        left = self._view[0] - set(owners)
        if len(left) < quorum(self.threshold):  # each share comes with my view key with its owner
            raise RevealRefused(
                f"round {rnd}: party {self.party_id} refuses seed shares of {owners}: fewer than max(t, 2) = "
                f"{quorum(self.threshold)} survivors would remain, and its own view keys would open its release"
            )
        self._check_share_safety(rnd)
        self._shares_revealed |= set(owners)
        self._leaving |= set(owners)
        names = sorted(self._names)
        return {p: share_reveal(self._held[p].to_bytes(), [self._view_key(p, rnd, n) for n in names])
                for p in owners if p in self._held}

    # ---- internals --------------------------------------------------------------------------
    def _check_round(self, round_id: int | str, what: str) -> str:
        rnd = str(round_id)
        if self.mode == "announced":
            raise RevealRefused(f"party {self.party_id}: secagg mode announced reveals nothing after masking; "
                                f"{what} refused for round {rnd}")
        if self._retired:
            raise RevealRefused(f"party {self.party_id} left this session; it reveals nothing more")
        if rnd != self._round:
            raise RevealRefused(
                f"party {self.party_id} reveals {what} only for the round it masked last "
                f"({self._round}); refused for round {rnd}"
            )
        return rnd

    def _self_key(self, rnd: str, name: str) -> bytes:
        return round_key(self._seed, label=SELF_LABEL, session=self.session, round_id=rnd, name=name)

    def _view_key(self, peer: int, rnd: str, name: str) -> bytes:
        return view_key(self._pairs[peer].mask_secret, session=self.session, round_id=rnd, name=name)

    def _release(self, rnd: str, name: str, live: frozenset[int]) -> bytes:
        n, k = self._sizes[name]
        return self_release(own_id=self.party_id, self_key=self._self_key(rnd, name), round_id=rnd, name=name,
                            view_keys={p: self._view_key(p, rnd, name) for p in sorted(live) if p != self.party_id},
                            n=n, k=k)

    def _check_share_safety(self, rnd: str) -> None:
        """Semi-honest mode: seed shares only if no split of views can open an input (t + max(t, 2) > M + c)."""
        m, t = len(self.parties), self.threshold
        if self.check is None and t + quorum(t) <= m + self.colluders:
            raise RevealRefused(
                f"round {rnd}: party {self.party_id} refuses seed shares: with t = {t}, M = {m}, colluders = "
                f"{self.colluders} a server telling parties different survivor sets could rebuild a self mask "
                f"whose pair keys it also holds (needs t + max(t, 2) > M + colluders, or secagg_mode malicious)"
            )

    def _pair_key(self, peer: int, rnd: str, name: str) -> bytes:
        secret = self._pairs[peer].mask_secret
        return round_key(secret, label=PAIR_LABEL, session=self.session, round_id=rnd, name=name)

    def _require_keys(self) -> None:
        if set(self._pairs) != set(self.peers):
            raise ProtocolError(f"party {self.party_id} has not received all public keys yet")
