"""Announced participant sets (``secagg_mode: announced``): the server names a round's set S
before the parties mask, so no unmask exchange follows.

Party i masks its k-bit input with pair streams over S only (round-bound pair keys, HKDF as in the
other modes) and no self mask: y_i = x_i + sum_{j in S, j>i} PRG(k_ij) - sum_{j in S, j<i} PRG(k_ij)
mod 2^k. The server sums the |S| vectors and the pair streams cancel; nothing is revealed after
masking. A missing vector leaves pair streams nobody will remove: the round cannot be opened.

The party-side rules make a lying server learn at most sums of >= max(t, 2, c + 2) parties of one round, at
least two of them honest with c colluders (the guarantee of the other modes), checked by :func:`check_announcement`: S must hold the party,
name only parties of the authenticated roster and have at least max(t, 2, colluders + 2) members;
and each round is masked AT MOST ONCE (a second announcement of a round is refused), so no input
is ever masked over two different sets. The set travels in the forward request the server
already sends (signed/MACed with it), as a bitmask over the roster, and only when it differs from
the set the party accepted last (:func:`encode_set`, :func:`decode_set`).

With ``train.on_dropout: skip-party`` a round missing the vector of a party the driver declared dropped
stays closed (:class:`RoundSkipped`: no key is revealed, the step has no update) and the survivors are
announced for the rounds after it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

from vfl.core.errors import PartyFailure, ProtocolError
from vfl.secagg.consistency import AnnouncementRefused, quorum


class RoundSkipped(PartyFailure):
    """Mode announced with ``train.on_dropout: skip-party``: a round misses the vectors of parties declared
    dropped; it stays closed (nothing revealed, no update from its batch) and the survivors are announced next."""


def smallest_set(threshold: int, colluders: int) -> int:
    """The fewest parties an announced set may hold: ``quorum`` = max(t, 2, colluders + 2) (a set of the victim
    and colluders only would open the victim's input), as a survivor set of the other modes."""
    return quorum(threshold, colluders)


def check_announcement(*, me: int, rnd: str, members: Iterable[int], parties: Collection[int], threshold: int,
                       colluders: int, announced: Collection[str] = ()) -> frozenset[int]:
    """The set ``members`` if party ``me`` may mask round ``rnd`` over it; AnnouncementRefused otherwise.
    ``announced``: the rounds it already accepted (a round is masked at most once)."""
    live = frozenset(int(p) for p in members)
    if rnd in announced:
        raise AnnouncementRefused(rnd, me, f"round {rnd} was announced before; a party masks a round at most "
                                  f"once (a second set {sorted(live)} would open differences of sums)")
    strangers = sorted(live - frozenset(parties))
    if strangers:
        raise AnnouncementRefused(rnd, me, f"the announced set names parties {strangers} outside the roster "
                                  f"{sorted(parties)}")
    if me not in live:
        raise AnnouncementRefused(rnd, me, f"the announced set {sorted(live)} does not hold party {me}")
    need = smallest_set(threshold, colluders)
    if len(live) < need:
        raise AnnouncementRefused(rnd, me, f"the announced set {sorted(live)} has fewer than {need} parties "
                                  f"(max(t, 2) with t = {threshold}, colluders + 2 with colluders = {colluders}): "
                                  "its sum would expose an input")
    return live


def encode_set(members: Iterable[int], roster: Sequence[int]) -> bytes:
    """``members`` as a little-endian bitmask over the sorted ``roster`` (ceil(M/8) bytes)."""
    order = {p: i for i, p in enumerate(sorted(roster))}
    bits = 0
    for p in members:
        if int(p) not in order:
            raise ProtocolError(f"party {p} is not in the roster {sorted(roster)}")
        bits |= 1 << order[int(p)]
    return bits.to_bytes((len(order) + 7) // 8, "little")


def decode_set(mask: bytes, roster: Sequence[int]) -> frozenset[int]:
    """The parties of a bitmask made by :func:`encode_set`; ProtocolError for bits beyond the roster."""
    ids = sorted(roster)
    bits = int.from_bytes(bytes(mask), "little")
    if len(mask) != (len(ids) + 7) // 8 or bits >> len(ids):
        raise ProtocolError(f"announced set bitmask {bytes(mask).hex()} does not fit a roster of {len(ids)} parties")
    return frozenset(p for i, p in enumerate(ids) if bits >> i & 1)


__all__ = ["RoundSkipped", "check_announcement", "decode_set", "encode_set", "smallest_set"]
