"""Double masking (Bonawitz et al., CCS 2017): a self mask plus pairwise masks, all round-bound.

Party i sends y_i = x_i + PRG(self_i) + sum_{j>i} PRG(k_ij) - sum_{j<i} PRG(k_ij) mod 2^k, where
self_i and k_ij are the keys of this (round, tensor). Over the survivors S of a round the pair
streams between two survivors cancel; what is left is each survivor's self stream and, for every
dropped party d, the term each survivor put in for d. :func:`removal_terms` builds that sum from
the revealed round keys so the server can subtract it and keep exactly sum_{s in S} x_s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import numpy.typing as npt

from vfl.secagg.modular import check_bits, low_bits_mask, to_residues
from vfl.secagg.prg import accumulate_streams


def pair_sign(own_id: int, peer_id: int) -> int:
    """+1 if party ``own_id`` adds the pair stream with ``peer_id`` (peer > own), -1 if it subtracts."""
    return 1 if peer_id > own_id else -1


def apply_pairwise_masks(
    values: npt.ArrayLike,
    *,
    own_id: int,
    seeds: Mapping[int, bytes],
    round_id: int | str,
    name: str,
    k: int,
    self_key: bytes | None = None,
) -> npt.NDArray[np.uint32]:
    """y = x + PRG(self_key) + sum_{j>i} PRG(seeds[j]) - sum_{j<i} PRG(seeds[j]) mod 2^k.

    ``seeds`` maps each peer to the key of this (round, tensor); ``x`` are residues in [0, 2^k).
    """
    src = np.asarray(values)
    x = to_residues(src, k=k)
    y = x.reshape(-1)
    if np.shares_memory(y, src):  # to_residues returned the caller's own array: never write into it
        y = y.copy()
    # uint32 wrap-around is exact mod 2^k since 2^k | 2^32
    terms = [(seed, pair_sign(own_id, peer)) for peer, seed in seeds.items()]
    if self_key is not None:
        terms.append((self_key, 1))
    accumulate_streams(y, terms=terms, round_id=round_id, name=name)
    if k < 32:  # mod 2^32 is the uint32 wrap itself
        y &= low_bits_mask(k)
    return y.reshape(x.shape)


def removal_terms(
    *,
    self_keys: Iterable[bytes],
    pair_keys: Iterable[tuple[int, int, bytes]],
    round_id: int | str,
    name: str,
    n: int,
    k: int,
) -> npt.NDArray[np.uint32]:
    """Sum mod 2^k of the mask terms left in the survivors' aggregate.

    ``self_keys``: each survivor's self key of the round; ``pair_keys``: (survivor s, dropped d,
    k_sd) for every survivor/dropped pair. Survivor s added pair_sign(s, d) * PRG(k_sd).
    """
    check_bits(k)
    terms = [(key, 1) for key in self_keys]
    terms += [(key, pair_sign(s, d)) for s, d, key in pair_keys]
    total = np.zeros(n, dtype=np.uint32)
    accumulate_streams(total, terms=terms, round_id=round_id, name=name)
    total &= low_bits_mask(k)
    return total
