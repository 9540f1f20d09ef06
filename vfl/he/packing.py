"""Fixed point and slot packing of signed integers into one Paillier plaintext (pure functions).

:class:`FixedPoint` turns floats into integers v = round(x·2^f) and back. :class:`SlotLayout` packs
k signed fields into one integer, lowest field first: M = Σ_j v_j·2^(offset_j), offset_j = Σ_{i<j} w_i.

Invariants (the caller sizes the widths with guard bits so that they hold):

- Each field holds a *balanced* digit: |v_j| < 2^(w_j − 1). No per-row offset is added, so a sum of
  packed values needs no count of the rows summed (and the decrypter never learns one).
- A sum of n packed values is the packed sum of the fields, Σ_r M_r = Σ_j (Σ_r v_rj)·2^(offset_j),
  exactly (integers); it *decodes* to those field sums as long as every field's sum stays in
  (−2^(w_j − 1), 2^(w_j − 1)) and the whole stays below n/2 in magnitude (|M| < 2^(total_bits − 1) follows
  from the fields' bounds; :func:`slots_per_plaintext` says how many such layouts fit one plaintext).
- :meth:`SlotLayout.unpack` decodes from the lowest field: r = M mod 2^w taken in [−2^(w−1), 2^(w−1)),
  then M ← (M − r)/2^w; the top field is what remains. With ``max_abs``, :meth:`SlotLayout.unpack_many`
  refuses fields beyond what honest sums reach (:class:`~vfl.he.errors.HEOutOfRange`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from vfl.core.errors import DataError
from vfl.he.errors import HEOutOfRange

_EXACT = 1 << 53  # ints below this are exact float64s


@dataclass(frozen=True)
class FixedPoint:
    """x ↦ round(x·2^frac_bits) (half to even) as int64, and back."""

    frac_bits: int

    def __post_init__(self) -> None:
        if isinstance(self.frac_bits, bool) or not isinstance(self.frac_bits, int) or not 0 <= self.frac_bits <= 60:
            raise ValueError(f"frac_bits must be an int in [0, 60], got {self.frac_bits!r}")

    @property
    def scale(self) -> int:
        return 1 << self.frac_bits

    def encode(self, x: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """round(x·2^f) as int64; DataError for NaN/inf or a value that does not fit 63 bits."""
        arr = np.asarray(x, dtype=np.float64)
        if not np.isfinite(arr).all():
            raise DataError(f"fixed point: {int((~np.isfinite(arr)).sum())} of {arr.size} values are NaN or infinite")
        scaled = np.rint(np.ldexp(arr, self.frac_bits))
        if scaled.size and np.abs(scaled).max() >= 2.0**63:
            raise DataError(f"fixed point: values up to {np.abs(arr).max():.3g} do not fit 63 bits at 2^{self.frac_bits}")
        return scaled.astype(np.int64)

    def decode(self, v: Any) -> Any:
        """v/2^f as float64 (an array for an array): int64 arrays through one exact scaling; Python ints and
        object arrays (sums past 2^63) through Python's correctly rounded int division."""
        if isinstance(v, np.ndarray) and v.dtype != object:
            return np.ldexp(v.astype(np.float64), -self.frac_bits)
        if isinstance(v, np.ndarray):
            return np.array([int(x) / self.scale for x in v.ravel()], dtype=np.float64).reshape(v.shape)
        if isinstance(v, int | np.integer):
            iv = int(v)
            return float(np.ldexp(float(iv), -self.frac_bits)) if abs(iv) < _EXACT else iv / self.scale
        raise TypeError(f"decode takes an int or an integer array, got {type(v).__name__}")


def _check_width(w: Any) -> int:
    if isinstance(w, bool) or not isinstance(w, int) or w < 2:
        raise ValueError(f"slot widths must be ints >= 2, got {w!r}")
    return w


@dataclass(frozen=True)
class SlotLayout:
    """Fields of ``widths`` bits, packed lowest first, each a balanced digit (|v| < 2^(w−1))."""

    widths: tuple[int, ...]
    offsets: tuple[int, ...] = field(init=False, repr=False)
    total_bits: int = field(init=False, repr=False)

    def __post_init__(self) -> None:
        widths = tuple(_check_width(w) for w in self.widths)
        if not widths:
            raise ValueError("a slot layout needs at least one field")
        offsets = tuple(int(o) for o in np.cumsum((0,) + widths[:-1]))
        object.__setattr__(self, "widths", widths)
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "total_bits", sum(widths))

    def repeat(self, k: int) -> SlotLayout:
        """This layout k times in a row: what a plaintext of k packed sums (``pack_ciphertexts``) decodes with."""
        return SlotLayout(self.widths * k)

    def bound(self, max_abs: Sequence[int] | int | None = None) -> int:
        """The largest |M| a packing of fields with |v_j| <= max_abs_j reaches (default: the widths' own
        limit 2^(w_j − 1) − 1): the ``bound`` to decrypt packed sums with."""
        caps = self._caps(max_abs)
        return sum(c << o for c, o in zip(caps, self.offsets, strict=True))

    def _caps(self, max_abs: Sequence[int] | int | None) -> list[int]:
        if max_abs is None:
            return [(1 << (w - 1)) - 1 for w in self.widths]
        caps = [int(max_abs)] * len(self.widths) if isinstance(max_abs, int | np.integer) else [int(c) for c in max_abs]
        if len(caps) != len(self.widths) or any(not 0 <= c < 1 << (w - 1) for c, w in zip(caps, self.widths, strict=True)):
            raise ValueError(f"max_abs must give each of the {len(self.widths)} fields a cap in [0, 2^(w-1))")
        return caps

    def pack(self, values: npt.ArrayLike) -> list[int]:
        """Each row of ``values`` (shape (n, k), int64 or object ints) as Σ_j v_j·2^(offset_j), Python ints
        (possibly negative). DataError when a field's value does not fit its width."""
        arr = np.asarray(values)
        if arr.ndim != 2 or arr.shape[1] != len(self.widths):
            raise DataError(f"slot packing: values must have shape (n, {len(self.widths)}), got {arr.shape}")
        if arr.dtype != object and not np.issubdtype(arr.dtype, np.integer):
            raise DataError(f"slot packing: values must be integers, got dtype {arr.dtype}")
        cols = [arr[:, j].tolist() for j in range(arr.shape[1])]
        for j, (col, w) in enumerate(zip(cols, self.widths, strict=True)):
            lim = 1 << (w - 1)
            if col and (max(col) >= lim or min(col) <= -lim):
                raise DataError(f"slot packing: field {j} holds values with |v| >= 2^{w - 1} (its width is {w} bits)")
        out = [int(v) for v in cols[0]]
        for col, off in zip(cols[1:], self.offsets[1:], strict=True):
            out = [a + (int(b) << off) for a, b in zip(out, col, strict=True)]
        return out

    def unpack(self, m: int) -> tuple[int, ...]:
        """The balanced fields of ``m``, lowest first (the top field takes what remains)."""
        m = int(m)
        fields: list[int] = []
        for w in self.widths[:-1]:
            r = m & ((1 << w) - 1)
            if r >> (w - 1):
                r -= 1 << w
            fields.append(r)
            m = (m - r) >> w
        fields.append(m)
        return tuple(fields)

    def unpack_many(self, ms: Sequence[int], *, max_abs: Sequence[int] | int | None = None) -> np.ndarray:
        """Fields of every ``m`` as an (len, k) object array of Python ints; with ``max_abs``, any field beyond
        its cap raises :class:`HEOutOfRange` (what no honest sum reaches is refused, never used)."""
        rows = [self.unpack(m) for m in ms]
        out = np.empty((len(rows), len(self.widths)), dtype=object)
        if rows:
            out[:] = rows
        if max_abs is not None:
            caps = self._caps(max_abs)
            over = sum(1 for row in rows for v, c in zip(row, caps, strict=True) if abs(v) > c)
            if over:
                raise HEOutOfRange(over, len(rows) * len(caps), max(caps), what="unpacked fields")
        return out


def slots_per_plaintext(layout_bits: int, max_plaintext_bits: int) -> int:
    """How many packed values of ``layout_bits`` (each |M| < 2^(layout_bits − 1)) fit one plaintext with
    |Σ_j M_j·2^(j·layout_bits)| < 2^max_plaintext_bits: ⌊(max_plaintext_bits + 1) / layout_bits⌋."""
    if layout_bits < 2 or max_plaintext_bits < 1:
        raise ValueError(f"layout_bits must be >= 2 and max_plaintext_bits >= 1, got {layout_bits}, {max_plaintext_bits}")
    return (max_plaintext_bits + 1) // layout_bits
