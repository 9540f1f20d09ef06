"""The honest-but-curious server as an attacker: everything it received, and every way it has to
turn one masked vector back into an input. Used by the tests and the dropout benchmark.

``unmask_attempts`` builds every candidate the server can compute for party p's input of round
r from its ``ServerView``: remove all mask terms whose keys it holds (revealed round keys, or
self keys from a seed rebuilt out of >= t shares), also trying pair keys revealed in OTHER rounds
(what would work if keys were not bound to rounds), and the difference between the full sum of a
round (with a late vector) and the survivors' sum (what would work without self masks). An
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
from vfl.secagg.prg import accumulate_streams
from vfl.secagg.shares import SeedShare, combine_secret


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
    self_keys: dict[tuple[str, int], bytes] = field(default_factory=dict)  # (round, party)
    pair_keys: dict[tuple[str, int, int], bytes] = field(default_factory=dict)  # (round, holder, other)
    seed_shares: dict[int, dict[int, bytes]] = field(default_factory=dict)  # owner -> holder -> share
    sums: dict[str, tuple[npt.NDArray[np.int64], tuple[int, ...]]] = field(default_factory=dict)

    def rebuilt_seed(self, party: int) -> bytes | None:
        """The party's seed if the server holds at least t distinct shares of it."""
        shares = [SeedShare.from_bytes(raw) for raw in self.seed_shares.get(party, {}).values()]
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
        own = view.self_key(party, rnd)
        base: list[tuple[bytes, int]] = [(own, 1)] if own is not None else []
        exact = [(key, pair_sign(party, p)) for p in peers if (key := view.pair_key(party, p, rnd))]
        out.append(_strip(y, base + exact, rnd=rnd, name=view.name, k=view.k))
        # Key reuse: pair keys revealed in other rounds, as if they applied to this one.
        reused = [(key, pair_sign(party, p)) for p in peers for key in view.any_round_pair_keys(party, p)[:1]]
        if reused:
            out.append(_strip(y, base + reused, rnd=rnd, name=view.name, k=view.k))
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
    keys = [(key, 1) for p in members if (key := view.self_key(p, rnd)) is not None]
    rest = _strip(acc, keys, rnd=rnd, name=view.name, k=view.k)
    diff = (rest.astype(np.int64) - total.reshape(-1)) & int(low_bits_mask(view.k))
    return [diff.astype(np.uint32).reshape(total.shape)]


def unmasked(view: ServerView, party: int, rnd: str, truth: npt.ArrayLike) -> bool:
    """True if any candidate of :func:`unmask_attempts` equals the true input (mod 2^k)."""
    want = np.asarray(truth, dtype=np.int64).reshape(-1) & int(low_bits_mask(view.k))
    return any(np.array_equal(c.reshape(-1).astype(np.int64), want) for c in unmask_attempts(view, party, rnd))
