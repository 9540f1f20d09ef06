"""Additively homomorphic encryption: Paillier with Damgård-Jurik-Nielsen encryption, on gmpy2.

Keys and encryption (``keys``; the key holder's CRT path and the public path), DJN randomizers
precomputed in background processes (``randomness``), fixed point and slot packing (``packing``),
the passive parties' histogram sums and ciphertext packing (``ops``), ciphertexts as fixed-width bytes
for flwr arrays (``wire``). Pure cryptography and encodings, no model code: the gradient-boosted trees
strategy (SecureBoost) uses it, the label holder holding the key. The scheme, its assumptions and
its measured speed: ``docs/he.md``.
"""

from vfl.he.errors import HEOutOfRange
from vfl.he.fixedbase import CrtRandomizers, FixedBase
from vfl.he.keys import MIN_KEY_BITS, PrivateKey, PublicKey, generate_keypair
from vfl.he.ops import grouped_sum, identity, pack_ciphertexts
from vfl.he.packing import FixedPoint, SlotLayout, slots_per_plaintext
from vfl.he.randomness import RandomizerPool
from vfl.he.wire import from_wire, to_wire

__all__ = [
    "MIN_KEY_BITS", "CrtRandomizers", "FixedBase", "FixedPoint", "HEOutOfRange", "PrivateKey", "PublicKey",
    "RandomizerPool", "SlotLayout", "from_wire", "generate_keypair", "grouped_sum", "identity",
    "pack_ciphertexts", "slots_per_plaintext", "to_wire",
]
