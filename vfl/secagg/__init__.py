"""Secure aggregation by pairwise masking (Bonawitz et al. 2017, "Protocol 0" + dropout recovery).

Pure and transport-agnostic: the state objects exchange only ``bytes`` and numpy arrays, so any
message layer (Flower records, Ray calls) can carry them.

Protocol. Every party i holds an X25519 key pair; each pair (i, j) derives a 32-byte seed
s_ij = HKDF-SHA256(X25519(sk_i, pk_j), info = "vfl-secagg|" + session + sorted(i, j)).
Party i sends y_i = x_i + sum_{j>i} PRG(s_ij) - sum_{j<i} PRG(s_ij) mod 2^k, where the PRG is
AES-256-CTR keyed by s_ij with a nonce from (round, tensor name), so masks are fresh for each
(round, name). The masks cancel in sum_i y_i = sum_i x_i mod 2^k; pick 2^k above the largest
true sum (:func:`smallest_modulus_bits`, :func:`fixed_point_bits`). Before masking each party
Shamir-shares its private key (threshold t) among the others, each share sealed with AES-GCM
under a second key of the pair. If party d drops after masking, survivors reveal their shares
of d's key, the server rebuilds it and subtracts the survivors' mask terms for d, getting
exactly the survivors' sum. With fewer than t shares the round fails with PartyFailure; a
missing party is never zero-filled.

Threat model. The server is honest-but-curious: it follows the protocol but tries to learn
single inputs from what it sees. Parties do not collude with it beyond t-1 share holders, and
the channels are authenticated (public keys reach the right parties). Then the server sees only
uniform-looking masked vectors and the sum. There is no self-mask (Bonawitz's b_i), so once a
party's key is rebuilt its masked vectors become readable: the server object therefore refuses
any message from a party declared dropped for the rest of the session (a late message for that
round included) and aggregates each (round, name) once; clients refuse to mask the same
(round, name) twice. Re-key (new key pairs and session id) to readmit a dropped party. Not
covered: an actively malicious server (e.g. lying about who dropped to different parties), or
the information the sum itself reveals (that is what DP noise/PBM is for).
"""

from vfl.secagg.client import SecAggClient
from vfl.secagg.fixed_point import decode_fixed_sum, encode_fixed, fixed_point_bits
from vfl.secagg.keys import PairKeys, derive_pair_keys, new_session_id
from vfl.secagg.masking import apply_pairwise_masks, dropped_party_terms
from vfl.secagg.modular import MAX_BITS, smallest_modulus_bits
from vfl.secagg.packing import pack_bits, packed_size, unpack_bits
from vfl.secagg.prg import mask_stream, prg_nonce
from vfl.secagg.server import SecAggServer
from vfl.secagg.shares import KeyShare, combine_key, split_key

__all__ = [
    "MAX_BITS",
    "KeyShare",
    "PairKeys",
    "SecAggClient",
    "SecAggServer",
    "apply_pairwise_masks",
    "combine_key",
    "decode_fixed_sum",
    "derive_pair_keys",
    "dropped_party_terms",
    "encode_fixed",
    "fixed_point_bits",
    "mask_stream",
    "new_session_id",
    "pack_bits",
    "packed_size",
    "prg_nonce",
    "smallest_modulus_bits",
    "split_key",
    "unpack_bits",
]
