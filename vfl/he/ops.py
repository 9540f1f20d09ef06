"""The passive parties' hot loops on ciphertexts: histogram sums and packing sums into one ciphertext.

:func:`grouped_sum` walks the rows once, keeping a running product per group mod n²: one 4096-bit
product per row at 2048 bits (~5 µs, GMP's reduction costing more than its product). Measured against
it (``python -m simulations.benchmarks.paillier``, ``grouped_sum_variants``): sorting the rows by group
and multiplying each run was 4-7 % slower; products of two or four ciphertexts reduced once were
15-35 % slower (GMP divides a longer product no faster per limb, and the longer products cost more).
"""

from __future__ import annotations

from collections.abc import Sequence

import gmpy2
import numpy as np
import numpy.typing as npt
from gmpy2 import mpz

from vfl.core.errors import DataError
from vfl.he.keys import PublicKey

_ONE = mpz(1)


def identity() -> mpz:
    """E(0) with no randomness (1): the neutral element of ciphertext addition. Never send it as it is:
    anyone recognises it (:meth:`~vfl.he.keys.PublicKey.rerandomize` first)."""
    return _ONE


def _rows_and_groups(groups: npt.ArrayLike, n_groups: int, rows: npt.ArrayLike | None,
                     n_rows: int) -> tuple[list[int], list[int]]:
    """The row indices that count and their groups, as lists; DataError for a malformed input."""
    g_all = np.asarray(groups)
    if g_all.ndim != 1 or not np.issubdtype(g_all.dtype, np.integer):
        raise DataError(f"grouped sum: groups must be a 1-d integer array, got shape {g_all.shape} dtype {g_all.dtype}")
    if len(g_all) != n_rows:
        raise DataError(f"grouped sum: {len(g_all)} group labels for {n_rows} ciphertexts")
    if rows is None:
        idx = np.arange(n_rows)
    else:
        idx = np.asarray(rows)
        if idx.ndim != 1 or not np.issubdtype(idx.dtype, np.integer) or (idx.size and (idx.min() < 0 or idx.max() >= n_rows)):
            raise DataError(f"grouped sum: rows must be 1-d integer indices in [0, {n_rows})")
    g = g_all[idx]
    if g.size and (g.min() < 0 or g.max() >= n_groups):
        raise DataError(f"grouped sum: group labels must lie in [0, {n_groups})")
    return idx.tolist(), g.tolist()


def grouped_sum(pk: PublicKey, ciphertexts: Sequence[mpz], groups: npt.ArrayLike, n_groups: int, *,
                rows: npt.ArrayLike | None = None) -> list[mpz | None]:
    """E(Σ m_i over the rows of each group) for groups 0..n_groups−1 (e.g. one feature's bins): ``groups[i]``
    is the group of ``ciphertexts[i]``; with ``rows``, only those indices count (a tree node's rows; an index
    listed twice counts twice). An empty group gives ``None`` (not E(0) = 1: the caller decides what an
    empty bin sends; :func:`pack_ciphertexts` reads None as 0)."""
    idx, gs = _rows_and_groups(groups, n_groups, rows, len(ciphertexts))
    n2 = pk.n2
    acc: list[mpz | None] = [None] * n_groups
    for i, g in zip(idx, gs, strict=True):
        a = acc[g]
        acc[g] = ciphertexts[i] if a is None else a * ciphertexts[i] % n2
    return acc


def pack_ciphertexts(pk: PublicKey, ciphertexts: Sequence[mpz | None], shift_bits: int) -> mpz:
    """E(Σ_j m_j·2^(j·shift_bits)) from E(m_j) (None = 0) by Horner, c ← c^(2^shift)·c_j mod n², highest j
    first: k sums travel and decrypt as one ciphertext. The caller keeps |m_j| < 2^(shift_bits − 1) and
    k·shift_bits − 1 <= max_plaintext_bits (``slots_per_plaintext``), or the packed sum cannot be unpacked."""
    if isinstance(shift_bits, bool) or not isinstance(shift_bits, int) or shift_bits < 1:
        raise ValueError(f"shift_bits must be a positive int, got {shift_bits!r}")
    if len(ciphertexts) * shift_bits - 1 > pk.max_plaintext_bits:
        raise DataError(f"packing {len(ciphertexts)} sums of {shift_bits} bits needs {len(ciphertexts) * shift_bits} "
                        f"bits; a plaintext holds {pk.max_plaintext_bits + 1}")
    n2, e = pk.n2, mpz(1) << shift_bits
    acc: mpz | None = None
    for c in reversed(ciphertexts):
        if acc is not None:
            acc = gmpy2.powmod(acc, e, n2)
        if c is not None:
            acc = c if acc is None else acc * c % n2
    return _ONE if acc is None else acc
