"""The honest-but-curious server as an attacker: everything it received, and every way it has to
turn one masked vector back into an input. Used by the tests and the dropout benchmark.

``unmask_attempts`` builds every candidate the server can compute for party p's input of round
r from its ``ServerView``: remove all mask terms whose keys it holds (revealed round keys, or
self keys from a seed rebuilt out of >= t shares), also trying pair keys revealed in OTHER rounds
(what would work if keys were not bound to rounds), and the difference between the full sum of a
round (with a late vector) and the survivors' sum (what would work without self masks). A self
stream comes from a raw self key (what clients revealed before view-bound releases: the controls),
a seed rebuilt from >= t shares, or a survivor's release whose view streams it can all remove. An
attack succeeds if any candidate equals the true input; the same code succeeds on a transcript
in which a client broke a rule, so a test with it can fail.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from vfl.secagg.keys import SELF_LABEL, round_key
from vfl.secagg.masking import pair_sign
from vfl.secagg.modular import low_bits_mask
from vfl.secagg.packing import unpack_bits
from vfl.secagg.prg import accumulate_streams
from vfl.secagg.shares import SHARE_BYTES, SeedShare, combine_secret


@dataclass
class ServerView:
    """What the server holds at the end of a session (it keeps everything it received)."""

    parties: tuple[int, ...]
    threshold: int
    k: int
    session: bytes
    name: str = "emb"
    vectors: dict[tuple[str, int], npt.NDArray[np.uint32]] = field(default_factory=dict)  # (round, party)
    active: dict[str, tuple[int, ...]] = field(default_factory=dict)  # round -> parties masking in it
    self_keys: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (round, party): raw self keys
    # (round, party) -> (the survivors it was told, its packed self-mask release)
    releases: dict[tuple[str, int], tuple[tuple[int, ...], bytes]] = field(default_factory=dict)
    view_keys: dict[tuple[str, int, int], bytes] = field(default_factory=dict)  # (round, holder, other)
    pair_keys: dict[tuple[str, int, int], bytes] = field(default_factory=dict)  # (round, holder, other)
    seed_shares: dict[int, dict[int, bytes]] = field(default_factory=dict)  # owner -> holder -> share
    sums: dict[str, tuple[npt.NDArray[np.int64], tuple[int, ...]]] = field(default_factory=dict)

    def rebuilt_seed(self, party: int) -> bytes | None:
        """The party's seed if the server holds at least t distinct shares of it."""
        shares = [SeedShare.from_bytes(raw[:SHARE_BYTES]) for raw in self.seed_shares.get(party, {}).values()]
        unique = list({s.index: s for s in shares}.values())
        return combine_secret(unique[: self.threshold]) if len(unique) >= self.threshold else None

    def self_key(self, party: int, rnd: str) -> bytes | None:
        key = self.self_keys.get((rnd, party))
        if key is not None:
            return key
        seed = self.rebuilt_seed(party)
        if seed is None:
            return None
        return round_key(seed, label=SELF_LABEL, session=self.session, round_id=rnd, name=self.name)

    def self_stream(self, party: int, rnd: str, n: int) -> npt.NDArray[np.uint32] | None:
        """PRG(self key of ``party`` in ``rnd``) mod 2^32 if the server can compute it, else None."""
        key = self.self_key(party, rnd)
        out = np.zeros(n, dtype=np.uint32)
        if key is not None:
            accumulate_streams(out, terms=[(key, 1)], round_id=rnd, name=self.name)
            return out
        if (rnd, party) not in self.releases:
            return None
        told, raw = self.releases[(rnd, party)]
        keys = [(self.view_keys.get((rnd, party, j)) or self.view_keys.get((rnd, j, party)), pair_sign(party, j))
                for j in told if j != party]
        if any(key is None for key, _ in keys):
            return None  # a view stream it cannot remove: the release stays masked
        out += unpack_bits(raw, self.k, n)
        accumulate_streams(out, terms=[(key, -sign) for key, sign in keys if key is not None], round_id=rnd,
                           name=self.name)
        return out

    def pair_key(self, a: int, b: int, rnd: str) -> bytes | None:
        return self.pair_keys.get((rnd, a, b)) or self.pair_keys.get((rnd, b, a))

    def any_round_pair_keys(self, a: int, b: int) -> list[bytes]:
        """Pair keys of (a, b) revealed in any round (useful only if keys were not round-bound)."""
        return [key for (_, x, y), key in self.pair_keys.items() if {x, y} == {a, b}]


def _strip(
    y: npt.NDArray[np.uint32], terms: list[tuple[bytes, int]], *, rnd: str, name: str, k: int
) -> npt.NDArray[np.uint32]:
    """y minus sum(sign * PRG(key)) mod 2^k."""
    masks = np.zeros(y.size, dtype=np.uint32)
    accumulate_streams(masks, terms=terms, round_id=rnd, name=name)
    out = (y.reshape(-1) - masks) & low_bits_mask(k)
    return out.reshape(y.shape)


def unmask_attempts(view: ServerView, party: int, rnd: str) -> list[npt.NDArray[np.uint32]]:
    """Every candidate for ``party``'s input of round ``rnd`` the server can compute."""
    y = view.vectors.get((rnd, party))
    out: list[npt.NDArray[np.uint32]] = []
    if y is not None:
        peers = [p for p in view.active.get(rnd, view.parties) if p != party]
        own = view.self_stream(party, rnd, y.size)
        exact = [(key, pair_sign(party, p)) for p in peers if (key := view.pair_key(party, p, rnd))]
        if own is not None:  # mode announced adds no self mask: the server tries both
            out.append(_strip(y, exact, rnd=rnd, name=view.name, k=view.k))
        y = y if own is None else ((y.reshape(-1) - own) & low_bits_mask(view.k)).reshape(y.shape)
        out.append(_strip(y, exact, rnd=rnd, name=view.name, k=view.k))
        # Key reuse: pair keys revealed in other rounds, as if they applied to this one.
        reused = [(key, pair_sign(party, p)) for p in peers for key in view.any_round_pair_keys(party, p)[:1]]
        if reused:
            out.append(_strip(y, reused, rnd=rnd, name=view.name, k=view.k))
    out.extend(_sum_difference(view, party, rnd))
    return out


def _sum_difference(view: ServerView, party: int, rnd: str) -> list[npt.NDArray[np.uint32]]:
    """x_p = (sum of every vector of the round - known self masks) - (the survivors' sum)."""
    if rnd not in view.sums:
        return []
    total, summed = view.sums[rnd]
    members = view.active.get(rnd, view.parties)
    if party in summed or any((rnd, p) not in view.vectors for p in members):
        return []
    acc = np.zeros(total.size, dtype=np.uint32)
    for p in members:
        acc += view.vectors[(rnd, p)].reshape(-1)
    group = [view.releases.get((rnd, p)) for p in summed]
    if all(g is not None and tuple(sorted(g[0])) == tuple(sorted(summed)) for g in group):
        for g in group:  # told the same survivors: their view streams cancel, the self streams remain
            acc -= unpack_bits(g[1], view.k, total.size) if g is not None else 0
        members = tuple(p for p in members if p not in summed)
    for p in members:
        stream = view.self_stream(p, rnd, total.size)
        if stream is not None:
            acc -= stream
    rest = acc & low_bits_mask(view.k)
    diff = (rest.astype(np.int64) - total.reshape(-1)) & int(low_bits_mask(view.k))
    return [diff.astype(np.uint32).reshape(total.shape)]


def unmasked(view: ServerView, party: int, rnd: str, truth: npt.ArrayLike) -> bool:
    """True if any candidate of :func:`unmask_attempts` equals the true input (mod 2^k)."""
    want = np.asarray(truth, dtype=np.int64).reshape(-1) & int(low_bits_mask(view.k))
    return any(np.array_equal(c.reshape(-1).astype(np.int64), want) for c in unmask_attempts(view, party, rnd))
