"""Secure aggregation by double masking (Bonawitz et al., CCS 2017) with round-bound keys.

Pure and transport-agnostic: the state objects exchange only ``bytes`` and numpy arrays, so any
message layer (Flower records, Ray calls) can carry them. The protocol, message sequence and
byte costs are written out in ``docs/secagg.md``.

Session set-up (once per run, again on resume). Party i draws an X25519 key pair and a 32-byte
self-mask seed b_i. Each pair (i, j) derives from X25519(sk_i, pk_j) with HKDF-SHA256 a pair
mask secret s_ij and a share key. Party i Shamir-shares b_i (threshold t, GF(2^128)) among the
others, each share sealed with AES-GCM under the pair's share key and bound to the session and
direction. The private key and s_ij are never shared and never leave the party.

Round r, tensor n. Keys are bound to the round: self_i = HKDF(b_i, session|r|n) and
k_ij = HKDF(s_ij, session|r|n). Party i sends y_i = x_i + PRG(self_i) + sum_{j>i} PRG(k_ij) -
sum_{j<i} PRG(k_ij) mod 2^k over the active parties (PRG = AES-256-CTR). The server takes the
vectors that arrived (survivors S; the other active parties D are dropped for the rest of the
session) and asks each survivor for its self-mask release (``vfl.secagg.release``: PRG(self_i)
masked with view streams over the survivors it was told, which cancel only among parties told
the same set) and, for each d in D, the round pair key k_sd. It subtracts the survivors' releases
and their terms for D and gets exactly sum_{s in S} x_s. A survivor that vanishes before
answering keeps its contribution when nobody else dropped and the seed path is on (mode
malicious, or t + q > M + c, q below): the holders reveal their shares of its seed with
their view keys with it and the server rebuilds its self key; otherwise the round aborts. Those
are the only secrets that ever leave a party: one round's keys and, for a vanished survivor,
shares of its seed.

Threat model. Up to c parties collude with the server, c = ``privacy.colluders`` or, undeclared, t - 1 (what
the threshold tolerates; t or more are not covered); every party reveals nothing for fewer than
q = max(t, 2, c + 2) parties (``consistency.quorum``), so any set it answers holds two honest parties. The driver's authentication roster
of identity keys is authentic (a PKI). Keys bound to identities (``auth`` on, both modes): each
party signs (session, id, SecAgg key) with its Ed25519 identity key and peers verify against the
identity keys of the authentication roster, not the server's, so a server that hands out its own
keys (``key_swap``) is stopped at set-up with ``KeySwapDetected``. ``secagg_mode: semi-honest``
(default): even a server that tells parties different survivor sets gets releases it cannot
unmask (``late_survivor``, ``split_rebuild``: 0 inputs open, tests/unit/secagg/test_secagg_split_views.py).
It learns only the sums:
(a) earlier rounds of a dropped party d stay masked: only round-r keys were revealed, and HKDF
makes them useless for any other round; (b) d's late vector of round r is refused, and even kept
it stays masked by PRG(self_d), which d released only masked and whose seed's shares honest
parties refuse to reveal once they revealed pair keys for d; (c) a single survivor's vector
keeps its pair masks with the other survivors. The honest client (``SecAggClient``,
``vfl.secagg.rules``) refuses with ``RevealRefused``: keys for any round but the one it masked
last, a peer's pair keys and seed shares both, anything about its own seed, masking after
leaving the session, a survivor set smaller than q, and pair keys for a peer listed as a
survivor earlier in the same round (a survivor is never redeclared dropped). ``secagg_mode:
malicious`` (Bonawitz et al.'s active variant, ``vfl.secagg.consistency``; needs auth): the
server may lie. Each round the survivors sign the survivor set and reveal nothing before holding
>= q signatures from distinct survivors on the set they signed (one set per round), so a
party can never be told "you survived" while its peers are told it dropped
(``InconsistentSurvivors`` otherwise); then no individual input opens. With 2q <= M a server can
still split the parties into two signed groups and learn two partial sums of >= 2 honest parties each. Not covered: what the sum itself reveals (the job of DP noise /
PBM), a server colluding with t or more parties, and denial of service (a lying server can always
abort rounds). ``vfl.attacks.secagg.lying`` plays these attacks against real clients.
"""

from vfl.secagg.client import Reveal, SecAggClient
from vfl.secagg.consistency import (
    MODES,
    Identity,
    InconsistentSurvivors,
    KeySwapDetected,
    MaliciousServer,
    ed25519_identities,
)
from vfl.secagg.fixed_point import decode_fixed_sum, encode_fixed, fixed_point_bits
from vfl.secagg.keys import PairKeys, derive_pair_keys, new_session_id, round_key
from vfl.secagg.masking import apply_pairwise_masks, pair_sign, removal_terms
from vfl.secagg.modular import MAX_BITS, smallest_modulus_bits
from vfl.secagg.packing import pack_bits, packed_size, unpack_bits
from vfl.secagg.prg import mask_stream, prg_nonce
from vfl.secagg.server import ConsistencyRequest, SecAggServer, ShareRequest, UnmaskRequest
from vfl.secagg.shares import SeedShare, combine_secret, split_secret

__all__ = [
    "MAX_BITS",
    "MODES",
    "ConsistencyRequest",
    "Identity",
    "InconsistentSurvivors",
    "KeySwapDetected",
    "MaliciousServer",
    "ed25519_identities",
    "PairKeys",
    "Reveal",
    "SecAggClient",
    "SecAggServer",
    "SeedShare",
    "ShareRequest",
    "UnmaskRequest",
    "apply_pairwise_masks",
    "combine_secret",
    "decode_fixed_sum",
    "derive_pair_keys",
    "encode_fixed",
    "fixed_point_bits",
    "mask_stream",
    "new_session_id",
    "pack_bits",
    "packed_size",
    "pair_sign",
    "prg_nonce",
    "removal_terms",
    "round_key",
    "smallest_modulus_bits",
    "split_secret",
    "unpack_bits",
]
