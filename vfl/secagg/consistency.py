"""The malicious-server defences of secure aggregation (Bonawitz et al., CCS 2017, section 4.5).

Two signed statements, both by a party's Ed25519 identity key (the key its peers learned from
the authentication roster, never from the aggregating server):

- at set-up, (session, party id, its SecAgg X25519 key): a server that hands a party its own key
  in place of a peer's (``key_swap``) is caught before any pair key is derived;
- every round, (session, round, survivor set): a survivor signs ONE survivor set per round and
  reveals nothing before it holds >= ``quorum(t, c)`` = max(t, 2, c + 2) valid signatures from
  distinct survivors on exactly the set it signed (c colluders sign anything, so at least two
  honest parties signed it). A party can therefore never be a survivor to itself and "dropped" to
  its honest peers. With 2 quorum <= M the server can still split the parties into two signed
  groups (two partial sums, each over >= 2 honest parties).

c is the declared ``privacy.colluders``; undeclared it is t - 1, the most the threshold tolerates
(``tolerated``).

A detected lie raises :class:`MaliciousServer` (a ``RevealRefused``) naming the round and party.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from vfl.core.errors import ConfigError, RevealRefused

MODES = ("semi-honest", "malicious", "announced")
_KEY_DOMAIN = b"vfl/secagg/key/v1\x00"
_SURVIVORS_DOMAIN = b"vfl/secagg/survivors/v1\x00"


class MaliciousServer(RevealRefused):
    """The server lied in a way an honest party can prove; nothing was revealed."""

    def __init__(self, round_: str, party: int, reason: str) -> None:
        self.round, self.party = round_, party
        super().__init__(f"round {round_}: party {party} detected a lying server: {reason}")


class KeySwapDetected(MaliciousServer):
    """A SecAgg public key in the roster is not signed by its party's identity key."""


class InconsistentSurvivors(MaliciousServer):
    """A survivor set without enough matching signatures, or a second set for one round."""


class AnnouncementRefused(MaliciousServer):
    """Mode announced: a participant set too small, without the party, naming strangers, or a second
    announcement for a round (each round is masked at most once); nothing was masked for it."""


class RowReleaseRefused(RevealRefused):
    """Modes semi-honest and malicious: an unmask request would release a sample's row of exact codes under a
    survivor set other than the one it was released under before; nothing was released for the round."""

    def __init__(self, round_: str, party: int, reason: str) -> None:
        self.round, self.party = round_, party
        super().__init__(f"round {round_}: party {party} refuses to release: {reason}")


@dataclass(frozen=True)
class Identity:
    """What a party can do with identity keys: sign as itself, verify a peer's signature."""

    sign: Callable[[bytes], bytes]
    verify: Callable[[int, bytes, bytes], bool]  # (party, statement, signature) -> valid


def check_mode(mode: str, *, key: str = "params.secagg_mode") -> str:
    """``mode`` if it is a known SecAgg mode; ConfigError naming ``key`` otherwise."""
    if mode not in MODES:
        raise ConfigError(key, f"must be one of {', '.join(MODES)}; got {mode!r}")
    return mode


def tolerated(threshold: int, colluders: int | None = None) -> int:
    """The colluders c a party guards against: the declared ``privacy.colluders``, else t - 1 (fewer than t
    colluders is what the Shamir threshold tolerates; t of them rebuild any seed alone)."""
    return max(int(threshold) - 1, 0) if colluders is None else int(colluders)


def quorum(threshold: int, colluders: int) -> int:
    """The fewest survivors (and matching signatures) a party reveals anything for: max(t, 2, c + 2). A set of
    a victim and c colluders only would open the victim's input (the colluders hand over their keys with it),
    so at least two honest parties must be in it."""
    return max(int(threshold), 2, int(colluders) + 2)


def _ids(parties: Iterable[int]) -> bytes:
    return b"".join(int(p).to_bytes(8, "big", signed=True) for p in sorted(set(parties)))


def key_statement(*, session: bytes, party: int, public_key: bytes) -> bytes:
    """What party ``party`` signs at set-up: its X25519 key of ``session``."""
    return _KEY_DOMAIN + len(session).to_bytes(2, "big") + session + _ids([party]) + public_key


def survivor_statement(*, session: bytes, round_id: str, survivors: Iterable[int]) -> bytes:
    """What a survivor signs in a round: the survivor set it was told."""
    rnd = round_id.encode()
    return (_SURVIVORS_DOMAIN + len(session).to_bytes(2, "big") + session + len(rnd).to_bytes(2, "big") + rnd
            + _ids(survivors))


def verify_keys(identity: Identity, *, me: int, session: bytes, keys: Mapping[int, bytes],
                signatures: Mapping[int, bytes]) -> None:
    """Every peer's key must carry its own identity signature; KeySwapDetected otherwise."""
    for peer in sorted(keys):
        if peer == me:
            continue
        sig = signatures.get(peer)
        statement = key_statement(session=session, party=peer, public_key=keys[peer])
        if sig is None or not identity.verify(peer, statement, sig):
            raise KeySwapDetected("setup", me, f"the SecAgg key listed for party {peer} is not signed by "
                                  f"party {peer}'s identity key (a substituted key); no pair key derived")


class SurvivorCheck:
    """One party's consistency check: one signed survivor set per round, revealed only on quorum."""

    def __init__(self, identity: Identity, *, me: int, threshold: int, colluders: int, session: bytes) -> None:
        self.identity, self.me, self.need, self.session = identity, me, quorum(threshold, colluders), session
        self._signed: dict[str, frozenset[int]] = {}
        self._mine: dict[str, bytes] = {}  # my signature per round

    def sign(self, round_id: str, survivors: Iterable[int]) -> bytes:
        """My signature on (round, survivors); refused for a second, different set of the round."""
        live = frozenset(int(p) for p in survivors)
        before = self._signed.get(round_id)
        if before is not None and before != live:
            raise InconsistentSurvivors(round_id, self.me, f"asked to sign survivors {sorted(live)} after signing "
                                        f"{sorted(before)} in the same round")
        if self.me not in live or len(live) < self.need:
            raise InconsistentSurvivors(round_id, self.me, f"survivor set {sorted(live)} is not signable (it must "
                                        f"hold me and at least {self.need} parties)")
        if round_id not in self._signed:  # the client answers only its latest round: forget older ones
            self._signed.clear()
            self._mine.clear()
        self._signed[round_id] = live
        if round_id not in self._mine:
            self._mine[round_id] = self.identity.sign(survivor_statement(session=self.session, round_id=round_id,
                                                                          survivors=live))
        return self._mine[round_id]

    def check(self, round_id: str, survivors: Iterable[int], signatures: Mapping[int, bytes]) -> None:
        """Pass only if I signed exactly ``survivors`` this round and >= quorum survivors did too."""
        live = frozenset(int(p) for p in survivors)
        if self._signed.get(round_id) != live:
            raise InconsistentSurvivors(round_id, self.me, f"unmask request for survivors {sorted(live)}, but I "
                                        f"signed {sorted(self._signed.get(round_id, ())) or 'nothing'}")
        statement = survivor_statement(session=self.session, round_id=round_id, survivors=live)
        good = {self.me} if signatures.get(self.me) == self._mine[round_id] else set()  # Ed25519 is deterministic
        for p in sorted(set(signatures) & live - {self.me}):
            if len(good) >= self.need:
                break  # a quorum is enough: further verifications only cost time
            if self.identity.verify(int(p), statement, signatures[p]):
                good.add(int(p))
        if len(good) < self.need:
            raise InconsistentSurvivors(round_id, self.me, f"only {len(good)} valid signatures on survivors "
                                        f"{sorted(live)} (need {self.need}); nothing revealed")


def ed25519_identities(parties: Iterable[int]) -> dict[int, Identity]:
    """Fresh Ed25519 identities for ``parties`` sharing one trusted public-key table (tests, benchmarks;
    a run takes them from the authentication roster instead)."""
    keys = {int(p): Ed25519PrivateKey.generate() for p in parties}
    table = {p: k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) for p, k in keys.items()}
    return {p: Identity(sign=k.sign, verify=lambda q, m, s: verify_ed25519(table.get(int(q)), m, s))
            for p, k in keys.items()}


def verify_ed25519(public: bytes | None, message: bytes, signature: bytes) -> bool:
    """True if ``signature`` is a valid Ed25519 signature of ``message`` under raw key ``public``."""
    if public is None or not isinstance(signature, bytes):
        return False
    try:
        Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True
