"""One party's side of secure aggregation, as a state object exchanging only bytes and arrays.

Order of calls: ``public_key`` -> ``receive_public_keys`` -> ``make_shares`` -> ``receive_shares``
-> per round: ``mask`` (once per (round, name)) -> ``unmask`` (the server's request: my round
self stream masked with view streams over the survivors it names (``vfl.secagg.release``), plus
round pair keys for the parties it declares dropped) -> ``reveal_shares`` only if a survivor
vanished before releasing. A new session is a new client.

The honest-client rules are enforced here and raise :class:`RevealRefused`: keys only for the
round masked last; never both a peer's round pair keys and shares of its seed; never anything
about its own seed; no masking after it was declared dropped or its seed was rebuilt; no seed
shares in mode semi-honest unless t + quorum > M + colluders (below that a server telling
parties different survivor sets could rebuild a self mask whose pair keys it also got); nothing for a
survivor set, or survivors left after its seed-share requests, under ``quorum`` = max(t, 2, c + 2), c the
colluders it guards against (``colluders``; None: t - 1, what the threshold tolerates); with ``rows`` (exact
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

from vfl.core.errors import ProtocolError, RevealRefused
from vfl.secagg.announce_client import AnnouncedMasking
from vfl.secagg.consistency import (
    Identity,
    RowReleaseRefused,
    SurvivorCheck,
    check_mode,
    quorum,
    tolerated,
)
from vfl.secagg.masking import apply_pairwise_masks
from vfl.secagg.memory import Memory, first_conflict, row_digests
from vfl.secagg.modular import to_residues
from vfl.secagg.release import self_release, share_reveal
from vfl.secagg.rules import Reveal, check_view

__all__ = ["Reveal", "SecAggClient"]


class SecAggClient(AnnouncedMasking):
    """Party ``party_id`` among ``peers`` (all party ids; including itself or not). With an
    ``identity`` (its identity key; its peers' from a roster the server did not build) every SecAgg
    key must carry its party's signature; ``mode`` ``malicious`` needs one and adds the per-round
    survivor consistency check. ``masked_before`` (mode announced): the input digests of the party's earlier
    sessions, kept and extended in place (one input is never masked over two sets, across sessions too).
    Session keys and seed shares: ``vfl.secagg.party_keys``; the announced path: ``vfl.secagg.announce_client``."""

    def __init__(
        self, party_id: int, peers: Iterable[int], threshold: int, session: bytes | str, *,
        mode: str = "semi-honest", identity: Identity | None = None, colluders: int | None = None,
        masked_before: Memory | None = None, roster: int = 0,
    ) -> None:
        party_id = int(party_id)
        self.mode = check_mode(mode, key="mode")
        if self.mode == "malicious" and identity is None:
            raise ProtocolError(f"party {party_id}: secagg mode malicious needs an identity key (auth on)")
        super().__init__(party_id, peers, threshold, session, identity=identity, roster=roster)
        # parties assumed to collude with the server (privacy.colluders; undeclared: t - 1)
        self.colluders = tolerated(threshold, colluders)
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
            identity, me=self.party_id, threshold=threshold, colluders=self.colluders, session=self.session)
        self._pair_revealed: set[int] = set()
        self._shares_revealed: set[int] = set()
        self._retired = False
        self._announced: dict[str, frozenset[int]] = {}  # mode announced: round -> the set it accepted
        self._accepted = frozenset(self.parties)  # the set accepted last (a request naming none repeats it)
        # mode announced: digest of each input masked -> its set; ``masked_before`` is the party's memory of its
        # earlier sessions (a new set-up must not let the server ask an input again over another set)
        self._inputs: Memory = {} if masked_before is None else masked_before

    @property
    def active(self) -> frozenset[int]:
        """The parties (me included) whose masks I use in the next round."""
        return frozenset(self._active - self._leaving)

    def sign_survivors(self, *, round_id: int | str, survivors: Iterable[int]) -> bytes:
        """My signature on the round's survivor set (malicious mode; one set per round)."""
        rnd = self._check_round(round_id, "a survivor signature")
        if self.check is None:
            raise ProtocolError(f"party {self.party_id}: survivor signatures belong to secagg mode malicious")
        return self.check.sign(rnd, survivors)

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
        fewer than max(t, 2, c + 2) survivors. A repeat request must repeat the view. In malicious mode
        ``signatures`` must hold >= max(t, 2, c + 2) survivors' signatures on the set I signed.
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
                   threshold=self.threshold, colluders=self.colluders, previous=self._view)
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
        # each share comes with my view key with its owner: over all my share answers of the round, at least
        # quorum survivors (two honest beyond c colluders) keep view keys the server lacks
        left = self._view[0] - self._shares_revealed - set(owners)
        need = quorum(self.threshold, self.colluders)
        if len(left) < need:
            raise RevealRefused(
                f"round {rnd}: party {self.party_id} refuses seed shares of {owners}: fewer than max(t, 2, "
                f"colluders + 2) = {need} survivors would remain, and its own view keys would open its release"
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

    def _release(self, rnd: str, name: str, live: frozenset[int]) -> bytes:
        n, k = self._sizes[name]
        return self_release(own_id=self.party_id, self_key=self._self_key(rnd, name), round_id=rnd, name=name,
                            view_keys={p: self._view_key(p, rnd, name) for p in sorted(live) if p != self.party_id},
                            n=n, k=k)

    def _check_share_safety(self, rnd: str) -> None:
        """Semi-honest mode: seed shares only if no split of views can open an input (t + quorum > M + c)."""
        m, t, c = len(self.parties), self.threshold, self.colluders
        if self.check is None and t + quorum(t, c) <= m + c:
            raise RevealRefused(
                f"round {rnd}: party {self.party_id} refuses seed shares: with t = {t}, M = {m}, colluders = "
                f"{self.colluders} a server telling parties different survivor sets could rebuild a self mask "
                f"whose pair keys it also holds (needs t + max(t, 2, colluders + 2) > M + colluders, or secagg_mode "
                "malicious)"
            )
