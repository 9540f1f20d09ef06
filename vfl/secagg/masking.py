"""Pairwise masks of Bonawitz et al. "Protocol 0": party i adds PRG(s_ij) for j > i, subtracts for j < i.

Summed over all parties every pair's stream appears once with + and once with -, so the masks
cancel exactly mod 2^k. For a dropped party d the server rebuilds the terms that the survivors
added for d (from d's reconstructed key) and takes them out of the survivors' aggregate.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from vfl.secagg.keys import derive_mask_seed
from vfl.secagg.modular import check_bits, low_bits_mask, to_residues
from vfl.secagg.prg import accumulate_streams


def apply_pairwise_masks(
    values: npt.ArrayLike,
    *,
    own_id: int,
    seeds: Mapping[int, bytes],
    round_id: int | str,
    name: str,
    k: int,
) -> npt.NDArray[np.uint32]:
    """y = x + sum_{j>i} PRG(s_ij) - sum_{j<i} PRG(s_ij) mod 2^k, for residues x in [0, 2^k)."""
    x = to_residues(values, k=k)
    y = np.array(x, dtype=np.uint32, copy=True).reshape(-1)
    # uint32 wrap-around is exact mod 2^k since 2^k | 2^32
    terms = [(seed, 1 if peer > own_id else -1) for peer, seed in seeds.items()]
    accumulate_streams(y, terms=terms, round_id=round_id, name=name)
    y &= low_bits_mask(k)
    return y.reshape(x.shape)


def dropped_party_terms(
    *,
    dropped_id: int,
    dropped_key: X25519PrivateKey,
    survivors: Mapping[int, X25519PublicKey],
    session: bytes,
    round_id: int | str,
    name: str,
    n: int,
    k: int,
) -> npt.NDArray[np.uint32]:
    """Sum (mod 2^k) of the mask terms the survivors put in their vectors for ``dropped_id``.

    Survivor j added +PRG(s_jd) if d > j and -PRG(s_jd) if d < j; subtracting this sum from
    the survivors' aggregate leaves exactly their true sum.
    """
    check_bits(k)
    terms = []
    for peer, public in survivors.items():
        seed = derive_mask_seed(
            own_key=dropped_key,
            peer_public=public,
            own_id=dropped_id,
            peer_id=peer,
            session=session,
        )
        terms.append((seed, 1 if dropped_id > peer else -1))
    total = np.zeros(n, dtype=np.uint32)
    accumulate_streams(total, terms=terms, round_id=round_id, name=name)
    total &= low_bits_mask(k)
    return total
