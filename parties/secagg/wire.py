"""Message kinds and record keys of the secure-aggregation protocol, in one place: a class of string
constants per sort of name (``Kind``, ``Record``, ``Key``, ``Phase``), the shape of Flower's
``secaggplus_constants``. Every message carries one config record named ``Record.SECAGG``.
Kinds are ``query.secagg_*``: flwr accepts only the train/evaluate/query categories. A party's
keys reach ``secagg_mod`` as ``ModContext.secagg`` (set by ``SecAggParty`` after SETUP), never
through a shared state key. Sequences side by side: ``docs/protocols.md``.

Kinds (``Kind.*``) and keys (``Key.*``: named below by what they hold; on the wire one or two
letters). Set-up, ledger phase ``setup`` (once per session):
  SETUP    driver -> parties   session, parties, threshold, mode (semi-honest | malicious)
  SETUP    party -> server     pk (its X25519 public key), mode; with auth: ks (its identity
                               signature on (session, id, pk))
  ROSTER   server -> parties   ids, keys (every public key); with auth: kss (their signatures)
  SHARES   party -> server     to, env (its seed shares, one AES-GCM envelope per peer)
  DELIVER  server -> party     frm, env (the envelopes addressed to it)
Every round, ledger phase of the round (``train``/``eval``), or ``Phase.RECOVERY`` once a party dropped:
  CONSISTENCY    server -> parties   malicious only, first: round, survivors
  CONSISTENCY    party -> server     round, sig (its identity signature on (session, round, survivors))
  UNMASK         server -> parties   round; survivors, dropped only when a party dropped (else:
                                      every active party survived); malicious: always survivors,
                                      and sp, ss (the survivors' signatures on them)
  UNMASK         party -> server     names, self (its round self keys); pd, pk only when a party
                                      dropped (pk[i*len(names) + j]: party pd[i], tensor names[j]); the
                                      round it answers is its round tag (#29.2: no round echo; a
                                      recovery tag answers the round the server has open)
  REVEAL_SHARES  server -> parties   round, owners (survivors that vanished before answering)
  REVEAL_SHARES  party -> server     round, owners, shares (its plaintext shares of their seeds)
Mode ``announced``: set-up ends at ROSTER (no seed to share), and none of the round kinds. The server's forward request (``train.forward`` /
``evaluate.forward``) carries ``Record.SECAGG`` with ``S`` (the set the parties mask the next round
over, a bitmask over the roster) only when it differs from the set announced last (at first: every
party); the request is signed/MACed like every message. With ``train.on_dropout: skip-party`` a round
that misses a dropped party's vector stays closed: the server's reply is the forward request of the next
step without a gradient (carrying the survivors' ``S``), and where no forward follows (the epoch's last
step, evaluation) an ANNOUNCE broadcast carries ``S`` for the party's next round:
  ANNOUNCE server -> parties   S (the set of the next round the party masks; no reply)
"""

from __future__ import annotations


class Kind:
    """Message kinds (``metadata.message_type``)."""

    SETUP = "query.secagg_setup"
    ROSTER = "query.secagg_roster"
    SHARES = "query.secagg_shares"
    DELIVER = "query.secagg_deliver"
    UNMASK = "query.secagg_unmask"
    REVEAL_SHARES = "query.secagg_reveal_shares"
    CONSISTENCY = "query.secagg_consistency"
    ANNOUNCE = "query.secagg_announce"  # mode announced, skip-party: S for the next round when no forward follows


class Record:
    """Record names: every SecAgg message carries this one config record."""

    SECAGG = "sa"


class Key:
    """Keys inside ``Record.SECAGG``."""

    SESSION, PARTIES, THRESHOLD, PUBLIC_KEY = "session", "parties", "threshold", "pk"
    IDS, KEYS, TO, FROM, ENVELOPES = "ids", "keys", "to", "frm", "env"
    ROUND, SURVIVORS, DROPPED, OWNERS = "r", "sv", "dr", "ow"  # short: every round's messages carry them (#29.2)
    NAMES, SELF_KEYS, PAIR_PARTIES, PAIR_KEYS, SEED_SHARES = "n", "z", "pd", "pk", "sh"
    MODE, KEY_SIG, KEY_SIGS, SIG, SIG_PARTIES, SIGS = "mode", "ks", "kss", "sig", "sp", "ss"
    COLLUDERS = "c"  # the colluders c guarded against (privacy.colluders, else t - 1): quorum max(t, 2, c + 2)
    ANNOUNCED = "S"  # mode announced: the round's set, a bitmask over the roster (vfl.secagg.announce)


class Phase:
    """Ledger phases of SecAgg traffic besides the round's own (``setup``, ``train``, ``eval``)."""

    RECOVERY = "recovery"


SETUP_KINDS = (Kind.SETUP, Kind.ROSTER, Kind.SHARES, Kind.DELIVER)
ROUND_KINDS = (Kind.UNMASK, Kind.REVEAL_SHARES, Kind.CONSISTENCY)

__all__ = ["ROUND_KINDS", "SETUP_KINDS", "Key", "Kind", "Phase", "Record"]
