"""Server side of secure aggregation: opens a round, asks for round keys, returns only the sum.

One round at a time: ``open_round`` takes the masked vectors that arrived (their senders are the
survivors S, the other active parties are declared dropped for the rest of the session) and
returns the unmask request. ``add_unmask`` takes the survivors' reveals and returns the next
request, if any: a survivor that did not answer stays in S and has its seed rebuilt from >= t
shares when nobody else dropped (``ShareRequest``); otherwise its pair masks with the dropped
parties cannot be removed (the round aborts: a survivor is never redeclared dropped, honest clients refuse that).
In mode ``malicious`` the round opens with a ``ConsistencyRequest``: the survivors sign the
survivor set and the unmask request carries those signatures. Survivors release their self streams
masked with view streams over the survivors they were told (``vfl.secagg.release``), never self keys. ``result`` returns sum_{s in S} x_s mod 2^k. A vector from a
party declared dropped is refused for the rest of the session, and each (round, name) is
aggregated once; a sum over fewer than max(t, 2, colluders + 2) parties is refused (honest parties reveal
nothing for it: with the colluders' keys it would open one party's input).

Mode ``announced`` (``vfl.secagg.announce``): the parties masked over the set the server announced
(``current``, at first every party; ``announce`` changes it from the next forward request on), with pair streams
only. ``open_round`` needs a vector from every member (else ``PartyFailure``: the round cannot be
opened) and returns no request: ``result`` is the plain sum of the vectors mod 2^k. ``drop`` (skip-party)
names parties that left: a round missing only their vectors stays closed (``RoundSkipped``) and the
survivors are announced next (``PartyFailure`` if fewer than max(t, 2, colluders + 2) are left).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ConfigError, PartyFailure, ProtocolError
from vfl.secagg.announce import RoundSkipped, smallest_set
from vfl.secagg.consistency import check_mode, quorum, tolerated
from vfl.secagg.keys import SELF_LABEL, round_key, session_bytes
from vfl.secagg.masking import removal_terms
from vfl.secagg.modular import check_bits, low_bits_mask, to_residues
from vfl.secagg.release import read_release, split_share_reveal
from vfl.secagg.rules import Reveal, check_session_parties, share_threshold
from vfl.secagg.shares import SeedShare, combine_secret, share_index


@dataclass(frozen=True)
class UnmaskRequest:
    """Sent to every survivor: reveal your self key of ``round_id`` and pair keys for ``dropped``."""

    round_id: str
    survivors: tuple[int, ...]
    dropped: tuple[int, ...]
    signatures: tuple[tuple[int, bytes], ...] = ()  # malicious mode: (survivor, its signature on survivors)


@dataclass(frozen=True)
class ConsistencyRequest:
    """Malicious mode, sent to every survivor first: sign (round, ``survivors``)."""

    round_id: str
    survivors: tuple[int, ...]
    dropped: tuple[int, ...] = ()  # declared dropped in this round (the request is then a recovery)


@dataclass(frozen=True)
class ShareRequest:
    """Sent to ``holders``: reveal your shares of the seeds of ``owners`` (survivors that vanished)."""

    round_id: str
    owners: tuple[int, ...]
    holders: tuple[int, ...]


@dataclass
class _Round:
    round_id: str
    name: str
    shape: tuple[int, ...]
    vectors: dict[int, npt.NDArray[np.uint32]]
    survivors: set[int]
    dropped: set[int]
    self_keys: dict[int, bytes] = field(default_factory=dict)  # rebuilt from seed shares (vanished survivors)
    releases: dict[int, npt.NDArray[np.uint32]] = field(default_factory=dict)  # survivor -> self-mask release
    names: tuple[str, ...] = ()  # the tensors the survivors masked in this round
    view_keys: list[tuple[int, int, bytes]] = field(default_factory=list)  # (holder, vanished owner, key)
    pair_keys: dict[tuple[int, int], bytes] = field(default_factory=dict)
    answered: set[int] = field(default_factory=set)
    pending: UnmaskRequest | ShareRequest | ConsistencyRequest | None = None
    signatures: dict[int, bytes] = field(default_factory=dict)


def _names(parties: Iterable[int]) -> str:
    return ",".join(str(p) for p in sorted(parties))


class SecAggServer:
    """Aggregator for ``parties`` with Shamir threshold ``threshold`` over Z_{2^k}."""

    def __init__(self, parties: Iterable[int], threshold: int, k: int, session: bytes | str, *,
                 mode: str = "semi-honest", colluders: int | None = None, roster: int = 0) -> None:
        self.parties = check_session_parties(parties, threshold, roster=roster)
        self.colluders = tolerated(threshold, colluders)  # what honest parties guard against (None: t - 1)
        self.mode = check_mode(mode, key="mode")
        self.threshold = threshold
        self.k = check_bits(k)
        self.session = session_bytes(session)
        self._dropped: set[int] = set()
        self._done: set[tuple[str, str]] = set()
        self._open: _Round | None = None
        self.announced: tuple[int, ...] = self.parties  # mode announced: the set the next request announces
        self.current: tuple[int, ...] = self.parties  # ... and the set the parties were told last (they mask over it)

    def announce(self, members: Iterable[int]) -> tuple[int, ...]:
        """Mode announced: the set of the rounds after the next forward request (which must carry it:
        ``next_announcement``)."""
        live = tuple(sorted({int(p) for p in members}))
        if self.mode != "announced":
            raise ProtocolError("announced sets belong to secagg mode announced")
        if set(live) - set(self.parties) or len(live) < smallest_set(self.threshold, self.colluders):
            raise ProtocolError(f"cannot announce {list(live)}: honest parties refuse a set outside {list(self.parties)} "
                                f"or smaller than {smallest_set(self.threshold, self.colluders)}")
        self.announced = live
        return live

    def next_announcement(self) -> tuple[int, ...] | None:
        """The set a forward request must carry (None: it repeats the last one); from then on rounds expect it."""
        if self.announced == self.current:
            return None
        self.current = self.announced
        return self.current

    def drop(self, parties: Iterable[int]) -> None:
        """Mode announced, ``train.on_dropout: skip-party``: parties the driver declared gone; their vectors are
        refused from now on and a round missing only theirs is skipped (``open_round`` raises RoundSkipped)."""
        if self.mode != "announced":
            raise ProtocolError("only secagg mode announced is told of dropouts; the other modes find them in open_round")
        self._dropped |= {int(p) for p in parties} & set(self.parties)

    @property
    def seed_path(self) -> bool:
        """Whether honest parties reveal seed shares of a vanished survivor: always in mode malicious,
        in mode semi-honest only if t + quorum > M + colluders (else split survivor sets could open an input)."""
        return self.mode == "malicious" or self.threshold + self.quorum > len(self.parties) + self.colluders

    @property
    def quorum(self) -> int:
        """The fewest survivors honest parties reveal for: max(t, 2, colluders + 2)."""
        return quorum(self.threshold, self.colluders)

    @property
    def dropped(self) -> frozenset[int]:
        """Parties declared dropped in this session; none of their vectors is accepted again."""
        return frozenset(self._dropped)

    @property
    def active(self) -> tuple[int, ...]:
        return tuple(p for p in self.parties if p not in self._dropped)

    def accept(self, party: int, *, round_id: int | str, name: str) -> None:
        """Raise ProtocolError unless a masked vector from ``party`` for (round, name) may be used."""
        if party not in self.parties:
            raise ProtocolError(f"masked vector from unknown party {party}")
        if party in self._dropped:
            raise ProtocolError(
                f"party {party} was declared dropped in this session; its vector for round "
                f"{round_id} is refused (a new session is needed to readmit it)"
            )
        if (str(round_id), name) in self._done or (
            self._open is not None and (self._open.round_id, self._open.name) == (str(round_id), name)
        ):
            raise ProtocolError(f"{name!r} of round {round_id} was already aggregated or opened")

    def open_round(
        self, masked: Mapping[int, npt.ArrayLike], *, round_id: int | str, name: str
    ) -> UnmaskRequest | ConsistencyRequest | None:
        """Take the vectors that arrived; the active parties without one are dropped from now on
        (mode announced: every member of the announced set must have sent one; no request follows)."""
        rnd = str(round_id)
        if self._open is not None:
            raise ProtocolError(f"round {self._open.round_id} is still being unmasked; cannot open {rnd}")
        for party in masked:
            self.accept(party, round_id=rnd, name=name)
        vectors = self._check_vectors(masked, round_id=rnd)
        if self.mode == "announced":
            self._open_announced(vectors, rnd=rnd, name=name)
            return None
        survivors = set(vectors)
        dropped = set(self.active) - survivors
        self._dropped |= dropped
        shape = next(iter(vectors.values())).shape if vectors else ()
        r = _Round(rnd, name, shape, {p: v.reshape(-1) for p, v in vectors.items()}, survivors, dropped)
        self._open = r
        self._require_two(r)
        if self.mode == "malicious":
            r.pending = ConsistencyRequest(rnd, tuple(sorted(survivors)), tuple(sorted(dropped)))
            return r.pending
        return self._unmask_request(r)

    def add_signatures(self, round_id: int | str, signatures: Mapping[int, bytes]) -> UnmaskRequest:
        """Malicious mode: the survivors' signatures on the survivor set; the unmask request carries them."""
        r = self._require_pending(round_id, ConsistencyRequest)
        r.signatures = {int(p): bytes(s) for p, s in signatures.items() if int(p) in r.survivors}
        if len(r.signatures) < self.quorum:
            self._abort(r.round_id)
            raise PartyFailure(_names(r.survivors - set(r.signatures)), r.round_id,
                               f"only {len(r.signatures)} survivors signed the survivor set (need "
                               f"{self.quorum})")
        return self._unmask_request(r)

    def add_unmask(
        self, round_id: int | str, reveals: Mapping[int, Reveal]
    ) -> UnmaskRequest | ShareRequest | None:
        """Record the survivors' reveals; return the next request, or None when the sum is ready."""
        r = self._require_pending(round_id, UnmaskRequest)
        rnd = r.round_id
        for party, reveal in reveals.items():
            if party not in r.survivors:
                raise ProtocolError(f"round {rnd}: reveal from party {party}, not a survivor")
            if reveal.round_id != rnd or r.name not in reveal.self_keys:
                raise ProtocolError(f"round {rnd}: party {party} revealed keys of another round or tensor")
            if set(reveal.pair_keys) != r.dropped:
                raise ProtocolError(
                    f"round {rnd}: party {party} revealed pair keys for {sorted(reveal.pair_keys)}, "
                    f"asked for {sorted(r.dropped)}"
                )
            n = int(np.prod(r.shape)) if r.shape else 0
            r.releases[party] = read_release(reveal.self_keys[r.name], party=party, round_id=rnd, n=n, k=self.k)
            r.names = tuple(sorted(reveal.self_keys))
            for d, keys in reveal.pair_keys.items():
                r.pair_keys[(party, d)] = keys[r.name]
            r.answered.add(party)
        vanished = r.survivors - r.answered
        if not vanished:
            r.pending = None
            return None
        if not r.dropped and len(r.survivors) - len(vanished) >= self.quorum and self.seed_path:
            r.pending = ShareRequest(rnd, tuple(sorted(vanished)), tuple(sorted(r.survivors - vanished)))
            return r.pending
        # Honest clients never reveal pair keys for a party listed as a survivor: the round is lost.
        self._dropped |= vanished
        self._abort(rnd)
        raise PartyFailure(_names(vanished), rnd, "vanished before unmasking; its self mask cannot be "
                           f"rebuilt (dropped parties {sorted(r.dropped)}, fewer than max(t, 2, colluders + 2) = "
                           f"{self.quorum} holders answered, or seed shares are off in mode semi-honest "
                           "unless t + max(t, 2, colluders + 2) > M + colluders): the round is aborted")

    def add_shares(self, round_id: int | str, shares: Mapping[int, Mapping[int, bytes]]) -> None:
        """Rebuild the seeds of the vanished survivors from >= t shares (holder -> {owner -> share})."""
        r = self._require_pending(round_id, ShareRequest)
        rnd, request = r.round_id, r.pending
        if not isinstance(request, ShareRequest):  # checked by _require_pending; narrows the type
            raise ProtocolError(f"round {rnd} does not expect seed shares now")
        owners = request.owners
        short, index = [], r.names.index(r.name) if r.name in r.names else 0
        for owner in owners:
            got: list[SeedShare] = []
            for holder, revealed in shares.items():
                if holder not in request.holders:
                    raise ProtocolError(f"round {rnd}: seed shares from party {holder}, not asked")
                if owner in revealed:
                    raw, keys = split_share_reveal(revealed[owner], names=max(len(r.names), 1))
                    share = SeedShare.from_bytes(raw)
                    expected = share_index(owner=owner, holder=holder, parties=self.parties)
                    if share.index != expected:
                        raise ProtocolError(
                            f"round {rnd}: party {holder}'s share of party {owner} has index "
                            f"{share.index}, expected {expected}"
                        )
                    got.append(share)
                    r.view_keys.append((holder, owner, keys[index]))
            need = share_threshold(self.threshold, len(self.parties) - 1)
            if len(got) < need:
                short.append((owner, len(got)))
                continue
            seed = combine_secret(got[:need])
            r.self_keys[owner] = round_key(seed, label=SELF_LABEL, session=self.session, round_id=rnd, name=r.name)
        self._dropped |= set(owners)  # their seeds are known now: they leave the session
        if short:
            self._abort(rnd)
            counts = ", ".join(f"party {p}: {c}" for p, c in short)
            raise PartyFailure(
                _names(p for p, _ in short), rnd,
                f"vanished before unmasking and too few seed shares to recover ({counts}; "
                f"threshold {self.threshold})",
            )
        keyed = {(h, o) for h, o, _ in r.view_keys}
        keyless = sorted({h for h in shares for o in owners if (h, o) not in keyed} | set(request.holders) - set(shares))
        if keyless:  # their releases keep view streams with the vanished owners: the sum cannot be opened
            self._abort(rnd)
            raise PartyFailure(_names(keyless), rnd, "released a self mask but did not reveal its view keys with "
                               f"the vanished parties {sorted(owners)}: the round is aborted")
        r.pending = None

    def result(self, round_id: int | str) -> tuple[npt.NDArray[np.int64], tuple[int, ...]]:
        """(sum over the survivors mod 2^k, the survivors summed); closes the round."""
        rnd = str(round_id)
        r = self._open
        if r is None or r.round_id != rnd or r.pending is not None:
            raise ProtocolError(f"round {rnd} is not ready to be unmasked")
        n = int(np.prod(r.shape)) if r.shape else 0
        total = np.zeros(n, dtype=np.uint32)
        for party in sorted(r.survivors):
            total += r.vectors[party]  # wraps mod 2^32, exact mod 2^k
        if self.mode == "announced":  # pair streams over the announced set only: they cancel in the sum
            return self._close(r, total, n)
        for party in sorted(r.releases):
            total -= r.releases[party]  # self streams; the view streams cancel over the survivors
        total -= removal_terms(
            self_keys=[r.self_keys[s] for s in sorted(r.survivors) if s not in r.releases],
            pair_keys=[(s, d, r.pair_keys[(s, d)]) for s in sorted(r.survivors) for d in sorted(r.dropped)],
            round_id=rnd, name=r.name, n=n, k=self.k,
        )
        # each survivor's release carried its view stream with every vanished owner: add those back
        total += removal_terms(self_keys=[], pair_keys=r.view_keys, round_id=rnd, name=r.name, n=n, k=self.k)
        return self._close(r, total, n)

    # ---- internals --------------------------------------------------------------------------
    def _close(self, r: _Round, total: npt.NDArray[np.uint32], n: int) -> tuple[npt.NDArray[np.int64], tuple[int, ...]]:
        total &= low_bits_mask(self.k)
        self._done.add((r.round_id, r.name))
        self._open = None
        return total.astype(np.int64).reshape(r.shape), tuple(sorted(r.survivors))

    def _open_announced(self, vectors: dict[int, npt.NDArray[np.uint32]], *, rnd: str, name: str) -> None:
        """Mode announced: the round opens only with a vector from every member of the announced set."""
        extra, missing = sorted(set(vectors) - set(self.current)), sorted(set(self.current) - set(vectors))
        if extra:
            raise ProtocolError(f"round {rnd}: vectors from parties {extra} outside the announced set "
                                f"{list(self.current)}")
        if missing:
            self._done.add((rnd, name))
            if set(missing) <= self._dropped:  # skip-party: the round stays closed, the survivors go on
                self._skip(missing, rnd=rnd)
            raise PartyFailure(_names(missing), rnd, "no masked vector in secagg mode announced: the pair streams "
                               "of the announced set cannot cancel, so the round cannot be opened (the epoch "
                               "attempt is lost; train.max_restarts redoes it)")
        shape = next(iter(vectors.values())).shape
        self._open = _Round(rnd, name, shape, {p: v.reshape(-1) for p, v in vectors.items()}, set(vectors), set())

    def _skip(self, missing: list[int], *, rnd: str) -> None:
        """Announce the survivors for the rounds after the next request; RoundSkipped (PartyFailure if too few)."""
        live = [p for p in self.announced if p not in self._dropped]
        need = smallest_set(self.threshold, self.colluders)
        if len(live) < need:
            raise PartyFailure(_names(missing), rnd, f"only {live} left; honest parties mask over no announced set "
                               f"smaller than max(t, 2, colluders + 2) = {need}: the run cannot go on without them")
        self.announce(live)
        raise RoundSkipped(_names(missing), rnd, "no masked vector in secagg mode announced: the round stays "
                           f"closed (nothing revealed, its step skipped); the survivors {live} are announced next")

    def _unmask_request(self, r: _Round) -> UnmaskRequest:
        r.answered = set()
        r.pending = UnmaskRequest(r.round_id, tuple(sorted(r.survivors)), tuple(sorted(r.dropped)),
                                  tuple(sorted(r.signatures.items())))
        return r.pending

    def _require_two(self, r: _Round) -> None:
        if len(r.survivors) < self.quorum:
            self._abort(r.round_id)
            gone = r.dropped or set(self.parties)
            raise PartyFailure(
                _names(gone), r.round_id,
                f"only {sorted(r.survivors) or 'no party'} left; honest parties reveal nothing for "
                f"fewer than max(t, 2, colluders + 2) = {self.quorum} survivors (t = {self.threshold}, "
                f"colluders = {self.colluders}: privacy.colluders, or t - 1 when not declared)",
            )

    def _abort(self, rnd: str) -> None:
        if self._open is not None:
            self._done.add((rnd, self._open.name))
        self._open = None

    def _require_pending(self, round_id: int | str, kind: type) -> _Round:
        rnd = str(round_id)
        r = self._open
        if r is None or r.round_id != rnd:
            raise ProtocolError(f"no open round {rnd}")
        if not isinstance(r.pending, kind):
            raise ProtocolError(f"round {rnd} does not expect a {kind.__name__} answer now")
        return r

    def _check_vectors(
        self, masked: Mapping[int, npt.ArrayLike], *, round_id: str
    ) -> dict[int, npt.NDArray[np.uint32]]:
        try:
            arrays = {p: to_residues(masked[p], k=self.k, key=f"party {p}") for p in sorted(masked)}
        except ConfigError as exc:  # a malformed message, not a bad setting
            raise ProtocolError(f"round {round_id}: masked vector of {exc}") from exc
        if len({a.shape for a in arrays.values()}) > 1:
            raise ProtocolError(f"round {round_id}: masked vectors have different shapes")
        return arrays
