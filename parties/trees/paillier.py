"""``he: paillier`` for the trees protocol: both ends of the encrypted gradient exchange (``vfl.he``).

The label holder encrypts each row's ``g + h * 2^width_g`` (one DJN ciphertext per row and tree, its
randomness precomputed by a ``RandomizerPool`` while the parties build histograms); a party sums the
ciphertexts of each bin slot of its requested nodes and packs ``k`` non-empty slot sums per ciphertext
(Horner, ``k = (key bits − 1) // slot bits``; a bitmap says which slots are empty); the label holder
decrypts with a bound no honest packed sum exceeds and unpacks the balanced fields. Packed sums are not rerandomized: the key holder decrypts
them anyway, and their plaintexts already determine what a product of its own ciphertexts could tell it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gmpy2 import mpz

from parties.trees.codec import Codec
from parties.trees.columns import Columns, pack_mask, unpack_mask
from parties.trees.wire import Array, Key
from vfl.core.errors import ProtocolError
from vfl.he import (
    PublicKey,
    RandomizerPool,
    SlotLayout,
    from_wire,
    generate_keypair,
    grouped_sum,
    pack_ciphertexts,
    slots_per_plaintext,
    to_wire,
)

SCHEME = "paillier"


def _per_ciphertext(codec: Codec, pk: PublicKey) -> int:
    k = slots_per_plaintext(codec.slot_bits, pk.max_plaintext_bits)
    if k < 1:
        raise ProtocolError(f"a slot of {codec.slot_bits} bits does not fit a {pk.bits}-bit plaintext")
    return k


def hidden_layout(nodes: int, slots: int, k: int) -> list[tuple[int, int, int]]:
    """(group, node slots used, ciphertexts) of a hidden-mode reply: the built nodes in groups of ``k`` slots
    (one ciphertext per row and group); a group's bin sums packed ``k // used`` to a ciphertext."""
    out = []
    for grp in range(-(-nodes // k)):
        used = min(k, nodes - grp * k)
        out.append((grp, used, -(-slots // (k // used))))
    return out


class PaillierScheme:
    """The label holder's end: a fresh key pair per set-up, encryption, decryption with a range check."""

    name, secure = SCHEME, True

    def __init__(self, *, key_bits: int, workers: int = 1, test_only_small_key: bool = False) -> None:
        self.pk, self.sk = generate_keypair(key_bits, test_only_small_key=test_only_small_key)
        self.pool = RandomizerPool(self.sk, workers=workers) if workers else None
        self.small = test_only_small_key

    def public(self) -> dict[str, Any]:
        return {Key.SCHEME: SCHEME, **self.pk.to_record(), Key.BITS: int(self.pk.bits), "small": self.small}

    def prefill(self, rows: int) -> None:
        """Have the next tree's randomness computed in the background (off the critical path)."""
        if self.pool is not None:
            self.pool.prefill(rows)

    def encode_rows(self, codec: Codec, g: np.ndarray, h: np.ndarray) -> dict[str, np.ndarray]:
        shift = codec.width_g
        cts = self.sk.encrypt([a + (b << shift) for a, b in zip(g.tolist(), h.tolist(), strict=True)])
        self.prefill(len(g))
        return {Array.CIPHER: to_wire(self.pk, cts)}

    def decode_sums(self, arrays: dict[str, np.ndarray], codec: Codec, sizes: Sequence[int],
                    counts: Sequence[int]) -> list[np.ndarray]:
        if Array.CIPHER not in arrays:
            raise ProtocolError("encrypted histogram without ciphertexts")
        cts = from_wire(self.pk, arrays[Array.CIPHER])
        k, total = _per_ciphertext(codec, self.pk), int(sum(sizes))
        filled = unpack_mask(arrays.get(Array.MASK, np.zeros(0, np.uint8)), total)
        used = int(filled.sum())
        if len(cts) != -(-used // k):
            raise ProtocolError(f"{len(cts)} packed ciphertexts for {used} filled slots ({k} per ciphertext)")
        layout = SlotLayout((codec.width_g, codec.width_h)).repeat(k)
        values = self.sk.decrypt(cts, bound=layout.bound())
        fields = layout.unpack_many(values)  # (ciphertexts, 2k) Python ints
        both = np.zeros((total, 2), dtype=np.int64)
        if used:
            both[filled] = np.asarray(fields.reshape(-1, 2)[:used].tolist(), dtype=np.int64)
        return np.split(both, np.cumsum(sizes)[:-1])

    # ---- params.hide_instance_space: a row's (g, h) in the slot of its node ----
    def encode_hidden(self, codec: Codec, g: np.ndarray, h: np.ndarray, pos: np.ndarray,
                      build: Sequence[int]) -> dict[str, np.ndarray]:
        """Per row, ``ceil(len(build)/k)`` ciphertexts; node ``build[j]``'s slot holds the row's packed (g, h)
        when the row is in it, 0 otherwise (every row encrypted, so no ciphertext says where its row is)."""
        k, shift = _per_ciphertext(codec, self.pk), codec.slot_bits
        value = [a + (b << codec.width_g) for a, b in zip(g.tolist(), h.tolist(), strict=True)]
        slot = {int(n): j for j, n in enumerate(build)}
        groups = -(-len(build) // k)
        plain = [0] * (len(value) * groups)
        for i, (v, n) in enumerate(zip(value, pos.tolist(), strict=True)):
            j = slot.get(n)
            if j is not None:
                plain[i * groups + j // k] = v << ((j % k) * shift)
        cts = self.sk.encrypt(plain)
        self.prefill(len(plain))
        return {Array.CIPHER: to_wire(self.pk, cts)}

    def decode_hidden(self, arrays: dict[str, np.ndarray], codec: Codec, slots: int, build: Sequence[int]
                      ) -> list[np.ndarray]:
        """Each built node's (slots, 2) sums from a party's hidden-mode reply (``hidden_layout``)."""
        k = _per_ciphertext(codec, self.pk)
        cts = from_wire(self.pk, arrays.get(Array.CIPHER, np.zeros((0, self.pk.ciphertext_bytes), np.uint8)))
        plan = hidden_layout(len(build), slots, k)
        if len(cts) != sum(n for _, _, n in plan):
            raise ProtocolError(f"{len(cts)} hidden-mode ciphertexts, the layout takes {sum(n for _, _, n in plan)}")
        layout = SlotLayout((codec.width_g, codec.width_h)).repeat(k)
        fields = layout.unpack_many(self.sk.decrypt(cts, bound=layout.bound()))  # (ciphertexts, 2k)
        out = [np.zeros((slots, 2), dtype=np.int64) for _ in build]
        at = 0
        for grp, used, n in plan:
            per = k // used  # bin sums packed in one ciphertext, each over the group's `used` node slots
            block = fields[at:at + n, :2 * per * used]  # a ciphertext's per sums of `used` node slots, the rest empty
            vals = np.asarray(block.tolist(), dtype=object).reshape(n * per, used, 2)[:slots]
            for j in range(used):
                out[grp * k + j][:] = np.asarray(vals[:, j, :].tolist(), dtype=np.int64)
            at += n
        return out

    def close(self) -> None:
        self.sk.close()


class PaillierParty:
    """A passive party's end: ciphertext sums per slot, packed."""

    def __init__(self, pk: PublicKey) -> None:
        self.pk = pk
        self.cts: list[mpz] = []
        self.codec: Codec | None = None

    @classmethod
    def from_public(cls, public: dict[str, Any]) -> PaillierParty:
        if public.get(Key.SCHEME) != SCHEME:
            raise ProtocolError(f"expected a {SCHEME} key, got scheme {public.get(Key.SCHEME)!r}")
        return cls(PublicKey.from_record(public, test_only_small_key=bool(public.get("small", False))))

    def load_rows(self, arrays: dict[str, np.ndarray], codec: Codec) -> None:
        if Array.CIPHER not in arrays:
            raise ProtocolError("encrypted gradients without ciphertexts")
        self.cts, self.codec = from_wire(self.pk, arrays[Array.CIPHER]), codec

    def loaded(self) -> int:
        return len(self.cts)

    def sums(self, columns: Columns, nodes_rows: Sequence[np.ndarray]) -> dict[str, np.ndarray]:
        if self.codec is None:
            raise ProtocolError("histograms asked before the gradients arrived")
        lay = columns.layout
        sp = np.concatenate([[0], np.cumsum(lay.slots())]).astype(np.int64)
        slots: list[mpz | None] = []
        for rows in nodes_rows:
            for f in range(lay.num_features):
                col = columns.slot[:, f]
                mine = rows[col[rows] >= 0]  # the implicit bin's rows cost nothing
                slots += grouped_sum(self.pk, self.cts, col - sp[f], int(sp[f + 1] - sp[f]), rows=mine)
        return self._packed(slots)

    def sums_hidden(self, columns: Columns, groups: int, nodes: int) -> dict[str, np.ndarray]:
        """Bin sums over every row (it does not know which rows reach which node): each sum carries the
        built nodes' sums in their slots; sums using few node slots are packed several to a ciphertext."""
        assert self.codec is not None
        lay = columns.layout
        sp = np.concatenate([[0], np.cumsum(lay.slots())]).astype(np.int64)
        rows = np.arange(len(columns.x_train))
        k = _per_ciphertext(self.codec, self.pk)
        out: list[mpz] = []
        for grp, used, _ in hidden_layout(nodes, lay.num_slots(), k):
            cts = self.cts[grp::groups]
            sums: list[mpz | None] = []
            for f in range(lay.num_features):
                col = columns.slot[:, f]
                sums += grouped_sum(self.pk, cts, col - sp[f], int(sp[f + 1] - sp[f]), rows=rows[col >= 0])
            per = k // used
            out += [pack_ciphertexts(self.pk, sums[i:i + per], used * self.codec.slot_bits)
                    for i in range(0, len(sums), per)]
        return {Array.CIPHER: to_wire(self.pk, out) if out else np.zeros((0, self.pk.ciphertext_bytes), np.uint8)}

    def _packed(self, slots: list[mpz | None]) -> dict[str, np.ndarray]:
        assert self.codec is not None
        filled = [c for c in slots if c is not None]  # an empty slot costs no packing step: a bit says it is empty
        k = _per_ciphertext(self.codec, self.pk)
        packed = [pack_ciphertexts(self.pk, filled[i:i + k], self.codec.slot_bits) for i in range(0, len(filled), k)]
        cipher = to_wire(self.pk, packed) if packed else np.zeros((0, self.pk.ciphertext_bytes), np.uint8)
        return {Array.CIPHER: cipher, Array.MASK: pack_mask(np.asarray([c is not None for c in slots], dtype=bool))}
