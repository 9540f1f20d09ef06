"""View-bound self-mask releases: a survivor never hands the server its round self key.

To unmask a round the server needs the survivors' self streams PRG(self_i). Revealing the 32-byte
self key lets a lying server open a party v by telling v "everyone survived" (v reveals its self
key) while telling the others "v dropped" (they reveal their pair keys with v): the split view
(``late_survivor``). Instead survivor i releases its self stream masked with *view streams* over
the survivor set S_i it was told:

    z_i = PRG(self_i) + sum_{j in S_i, j>i} PRG(v_ij) - sum_{j in S_i, j<i} PRG(v_ij)   mod 2^k

with v_ij = HKDF-Expand(s_ij, "view" | session | round | name), a key distinct from the round's
pair key k_ij and never revealed with it. The view streams cancel exactly over a group of parties
that were all told the same S; a party told a different set keeps them, so its z stays masked.
A server that splits the views learns at most the sum of each group (>= max(t, 2, c + 2) parties), never
one party's self stream: no extra round trip and no signature.

A survivor that vanishes before releasing leaves its view streams in the others' releases: the
holders of its seed shares reveal, with each share, their view key with it (``share_reveal``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vfl.core.errors import ProtocolError
from vfl.secagg.keys import KEY_BYTES, round_key
from vfl.secagg.masking import apply_pairwise_masks
from vfl.secagg.packing import pack_bits, packed_size, unpack_bits
from vfl.secagg.shares import SHARE_BYTES

VIEW_LABEL = b"vfl-secagg-view-round|"


def view_key(secret: bytes, *, session: bytes, round_id: str, name: str) -> bytes:
    """The view key of a pair for one (round, tensor): independent of its pair key."""
    return round_key(secret, label=VIEW_LABEL, session=session, round_id=round_id, name=name)


def self_release(*, own_id: int, self_key: bytes, view_keys: Mapping[int, bytes], round_id: str, name: str,
                 n: int, k: int) -> bytes:
    """z = PRG(self_key) + signed view streams with every other survivor, k-bit packed."""
    z = apply_pairwise_masks(np.zeros(n, dtype=np.uint32), own_id=own_id, seeds=view_keys, self_key=self_key,
                             round_id=round_id, name=name, k=k)
    return pack_bits(z, k)


def read_release(raw: bytes, *, party: int, round_id: str, n: int, k: int) -> npt.NDArray[np.uint32]:
    """A survivor's release as ``n`` residues; ProtocolError naming the party if malformed."""
    if not isinstance(raw, bytes) or len(raw) != packed_size(n, k):
        raise ProtocolError(f"round {round_id}: party {party}'s self-mask release is not {packed_size(n, k)} "
                            f"bytes ({n} values of {k} bits)")
    return unpack_bits(raw, k, n)


def share_reveal(share: bytes, view_keys: Sequence[bytes]) -> bytes:
    """What a holder reveals for a vanished owner: its seed share, then its view key with the owner
    for each tensor of the round (names sorted)."""
    return share + b"".join(view_keys)


def split_share_reveal(raw: bytes, *, names: int) -> tuple[bytes, list[bytes]]:
    """(seed share, view keys) of :func:`share_reveal`; ProtocolError on a wrong length."""
    if not isinstance(raw, bytes) or len(raw) != SHARE_BYTES + names * KEY_BYTES:
        raise ProtocolError(f"a share reveal must be {SHARE_BYTES} + {names} x {KEY_BYTES} bytes")
    return raw[:SHARE_BYTES], [raw[SHARE_BYTES + i * KEY_BYTES: SHARE_BYTES + (i + 1) * KEY_BYTES]
                               for i in range(names)]
