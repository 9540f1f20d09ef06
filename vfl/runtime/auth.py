"""Authenticated nodes: an identity key pair per node, a fixed roster, one MAC or signature per wire.

Each host generates the keys of the nodes it runs (private keys never leave it): an Ed25519
signing key and an X25519 key-agreement key per node. It reports both public keys; the driver
installs the roster (node id -> name, Ed25519 key, X25519 key) on every host before the first
protocol message. Trust assumption: the roster is authentic (a deployment takes it from a PKI).

Every wire a host sends carries one authenticator by the node that produced it, over the
serialized message (metadata: src, dst, round tag, kind, message id, time; all content) and the
sender's sequence number — chosen by the message's (authenticated) metadata ``dst``:

- a unicast wire (``dst`` one node) carries HMAC-SHA512 under the directional session key
  K_{i->j} = HKDF-SHA256(X25519(x_i, X_j), info = "vfl/auth/mac/v1" || i || j) of sender i and
  receiver j (static-static Diffie-Hellman, what TLS/Noise do after the handshake): ~1 µs instead
  of an Ed25519 verification (~250 µs);
- a ``BROADCAST`` wire keeps an Ed25519 signature, which every receiving host can check.

The receiving host verifies before any node sees the message and rejects a bad MAC or signature,
a unicast addressed to a node it does not run, a ``src`` other than the signer (#29.2 short-auth: the
signer is the ``src``, so another node's key fails the check), and a sequence number not above
the last one it accepted from that sender (replay, reordering) — each an ``AuthenticationError``
naming the sender and the round. The two schemes hash under different domain prefixes, so a MAC
is never accepted as a signature or the reverse (turning a unicast into a broadcast, or back,
fails). The driver holds no key: a message it builds for node X (start an epoch, ask for
metrics) is authenticated by X's host (``HostAuth.sign_for``) before it is sent.

Threat model of the MACs. K_{i->j} is known to exactly two hosts: i's and j's. So a host can
forge only what it could already send (messages from its own nodes) or messages *to* its own
nodes (a receiver can compute a valid MAC for "i -> my node j", which changes nothing but its own
view). A host running nodes a and b cannot forge a unicast from node c to node d on other hosts,
re-address c's wire to another node, or pass it off as a broadcast. What is lost against
signatures: a MAC is not evidence a third party can check — unicast wires have no
non-repudiation (j cannot prove to anyone that i sent a message, since j could have made the MAC
itself); broadcasts keep their Ed25519 signatures.

Wire format (#29.2 short-auth): the authenticator is a ConfigRecord ``auth`` (one value: a 4-byte
sequence number, then the tag) appended to the serialized message as a protobuf fragment. The
signer is the metadata's ``src`` (authenticated with the rest: it is in the body and in the
digest), so it is not repeated. The tag of a unicast is HMAC-SHA512 truncated to its leftmost 32
bytes (HMAC-SHA512/256 as RFC 2104 §5 and NIST SP 800-107 allow: 256-bit tags; the pair key comes
from X25519, so the scheme stands at the 128-bit level either way); a broadcast's Ed25519
signature stays 64 bytes. Parsing the concatenation merges the record into the content, so the
authenticated bytes are exactly the bytes before it (nothing is re-serialized); a unicast grows by
``MAC_RECORD_BYTES``, a broadcast by ``SIGNATURE_RECORD_BYTES`` (``record_bytes``; counted as envelope).
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from flwr.common import ConfigRecord, Message
from flwr.proto.message_pb2 import Message as ProtoMessage
from flwr.proto.recorddict_pb2 import ConfigRecord as ProtoConfigRecord
from flwr.proto.recorddict_pb2 import ConfigRecordValue as ProtoConfigValue
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

from vfl.core.errors import AuthenticationError, ProtocolError
from vfl.runtime.ledger import CommLedger
from vfl.runtime.message import BROADCAST, Wire, decode, record_of, round_of

AUTH_RECORD = "auth"  # reserved record name: nodes must not use it
_VALUE = "s"  # #29.2 short-auth: one letter
_SIG_DOMAIN = b"vfl/auth/sig/v1\x00"  # what an Ed25519 signature covers (broadcasts)
_MAC_DOMAIN = b"vfl/auth/mac/v1\x00"  # what an HMAC covers (unicasts): never equal to the above
_KDF_INFO = b"vfl/auth/mac/v1"
_STATEMENT_DOMAIN = b"vfl/auth/statement/v1\x00"  # a node's signed protocol statement (never a 32-byte digest)
_HEAD = struct.Struct(">QQ")  # seq, signer: what the digest binds (the wire carries only _SEQ)
_SEQ = struct.Struct(">I")  # #29.2 short-auth: the sequence number on the wire (a node's 2**32 - 1 wires at most)
_PAIR = struct.Struct(">QQ")  # sender, receiver of a directional MAC key
_SIG_TAG_BYTES = 64  # Ed25519 signature (broadcasts)
_MAC_TAG_BYTES = 32  # HMAC-SHA512 truncated to 256 bits (unicasts; #29.2 short-auth)


def _tail(blob: bytes) -> bytes:
    """The protobuf fragment that adds ``auth/sig = blob`` to a serialized flwr message."""
    rec = ProtoConfigRecord(items=[ProtoConfigRecord.Item(key=_VALUE, value=ProtoConfigValue(bytes=blob))])
    item = ProtoRecordDict.Item(key=AUTH_RECORD, config_record=rec)
    return ProtoMessage(content=ProtoRecordDict(items=[item])).SerializeToString()  # type: ignore[no-any-return]


def _prefix(blob_bytes: int) -> bytes:
    """The fragment's bytes before a blob of that size (the blob is its last field: tail = prefix + blob)."""
    prefix = _tail(bytes(blob_bytes))[:-blob_bytes]
    if prefix + b"\x01" * blob_bytes != _tail(b"\x01" * blob_bytes):  # pragma: no cover - protobuf layout changed
        raise RuntimeError("vfl.runtime.auth: unexpected protobuf layout of the signature record")
    return prefix


_PREFIXES = {tag: _prefix(_SEQ.size + tag) for tag in (_MAC_TAG_BYTES, _SIG_TAG_BYTES)}  # #29.2 short-auth
MAC_RECORD_BYTES = len(_PREFIXES[_MAC_TAG_BYTES]) + _SEQ.size + _MAC_TAG_BYTES  # what a unicast grows by
SIGNATURE_RECORD_BYTES = len(_PREFIXES[_SIG_TAG_BYTES]) + _SEQ.size + _SIG_TAG_BYTES  # what a broadcast grows by


def record_bytes(dst: int) -> int:
    """What authentication adds to a wire to ``dst`` (a broadcast's signature or a unicast's MAC record)."""
    return SIGNATURE_RECORD_BYTES if dst == BROADCAST else MAC_RECORD_BYTES


def _digest(domain: bytes, body: bytes | memoryview, seq: int, signer: int) -> bytes:
    h = hashlib.sha256(domain)
    h.update(_HEAD.pack(seq, signer))
    h.update(body)
    return h.digest()


def _mac(key: bytes, body: bytes | memoryview, seq: int, signer: int) -> bytes:
    """HMAC-SHA512 under a directional pair key, truncated to its leftmost 32 bytes (#29.2 short-auth)."""
    return hmac.digest(key, _digest(_MAC_DOMAIN, body, seq, signer), "sha512")[:_MAC_TAG_BYTES]


def mac_key(shared: bytes, *, src: int, dst: int) -> bytes:
    """K_{src->dst}: 64 bytes from the X25519 secret of the pair, bound to the direction."""
    return HKDF(algorithm=hashes.SHA256(), length=64, salt=None, info=_KDF_INFO + _PAIR.pack(src, dst)).derive(shared)


def public_bytes(key: Ed25519PublicKey | X25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


class Peer(NamedTuple):
    """One roster entry, parsed: the node's name and public keys."""

    name: str
    sig: Ed25519PublicKey
    dh: X25519PublicKey


def _peer(nid: int, entry: Sequence[Any]) -> Peer:
    try:
        if len(entry) != 3:
            raise ValueError(f"{len(entry)} fields")
        name, sig, dh = entry[0], entry[1], entry[2]
        return Peer(str(name), Ed25519PublicKey.from_public_bytes(bytes(sig)),
                    X25519PublicKey.from_public_bytes(bytes(dh)))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"roster entry of node {nid} is not (name, 32-byte Ed25519 key, 32-byte X25519 key): "
                            f"{exc}") from None


class HostAuth:
    """The keys of one host's nodes, their sequence counters, the roster, the pair keys and the replay window."""

    def __init__(self, names: Mapping[int, str], host: str) -> None:
        self.host = host
        self._keys = {nid: Ed25519PrivateKey.generate() for nid in names}  # generated here, never exported
        self._dh = {nid: X25519PrivateKey.generate() for nid in names}  # generated here, never exported
        self._seq = dict.fromkeys(names, 0)
        self._last: dict[int, int] = {}
        self._pairs: dict[tuple[int, int], bytes] = {}  # (sender, receiver) -> K, derived lazily
        self._roster: dict[int, Peer] | None = None

    @property
    def has_roster(self) -> bool:
        return self._roster is not None

    def public_keys(self) -> dict[int, tuple[bytes, bytes]]:
        """My nodes' public keys: node id -> (Ed25519, X25519)."""
        return {nid: (public_bytes(k.public_key()), public_bytes(self._dh[nid].public_key()))
                for nid, k in self._keys.items()}

    def install(self, roster: Mapping[int, tuple[str, bytes, bytes]]) -> None:
        """Fix the roster (once): every node's name and public keys, mine included and unchanged."""
        if self._roster is not None:
            raise ProtocolError(f"{self.host}: the roster is fixed before training and cannot change")
        for nid, keys in self.public_keys().items():
            entry = roster.get(nid)
            if entry is None or len(entry) != 3 or (bytes(entry[1]), bytes(entry[2])) != keys:
                raise ProtocolError(f"{self.host}: the roster does not hold the key of my node {nid}")
        self._roster = {int(n): _peer(int(n), entry) for n, entry in roster.items()}

    def _pair_key(self, src: int, dst: int) -> bytes:
        """K_{src->dst} for a pair with a node of mine at one end (derived once, then cached)."""
        key = self._pairs.get((src, dst))
        if key is None:
            mine, other = (src, dst) if src in self._dh else (dst, src)
            peer = self._roster.get(other) if self._roster is not None else None
            if mine not in self._dh or peer is None:
                raise ProtocolError(f"{self.host}: no MAC key for {src} -> {dst} (not my node, or not in the roster)")
            try:
                shared = self._dh[mine].exchange(peer.dh)
            except ValueError:  # a low-order public key: the exchange would give all zeros
                raise ProtocolError(f"{self.host}: the X25519 key of node {other} is invalid") from None
            key = self._pairs[(src, dst)] = mac_key(shared, src=src, dst=dst)
        return key

    def sign(self, node_id: int, wire: Wire) -> Wire:
        """``wire`` produced by my node ``node_id``, with its next sequence number and its MAC
        (to one node: ``wire.dst``, as ``Wire.of`` takes it from the metadata) or signature (a broadcast)."""
        key = self._keys.get(node_id)
        if key is None:
            raise ProtocolError(f"{self.host} holds no key of node {node_id}")
        if wire.dst != BROADCAST and self._roster is None:
            raise ProtocolError(f"{self.host}: no roster installed, cannot authenticate a message to node {wire.dst}")
        pair = self._pair_key(node_id, wire.dst) if wire.dst != BROADCAST else None
        seq = self._seq[node_id] + 1
        if seq > 0xFFFFFFFF:  # #29.2 short-auth: the wire's 4-byte counter would wrap (a replay window reset)
            raise ProtocolError(f"{self.host}: node {node_id} sent 2**32 - 1 authenticated wires; start a new run")
        self._seq[node_id] = seq
        if pair is None:
            tag = key.sign(_digest(_SIG_DOMAIN, wire.data, seq, node_id))
        else:
            tag = _mac(pair, wire.data, seq, node_id)
        return Wire(wire.src, wire.dst, wire.kind, wire.round, wire.data + _PREFIXES[len(tag)] + _SEQ.pack(seq) + tag,
                    wire.payload)  # (dataclasses.replace re-reads every field by name: ~2x the cost)

    def identity(self, node_id: int) -> tuple[Callable[[bytes], bytes], Callable[[int, bytes, bytes], bool]]:
        """(sign a statement as my node ``node_id``, verify node n's statement against the installed
        roster): for protocol statements such as a SecAgg key, checked against keys the aggregating
        server did not hand out."""
        key = self._keys.get(node_id)
        if key is None or self._roster is None:
            raise ProtocolError(f"{self.host}: no identity for node {node_id} (not mine, or no roster)")
        roster = self._roster

        def sign(statement: bytes) -> bytes:
            return key.sign(_STATEMENT_DOMAIN + statement)

        def verify(nid: int, statement: bytes, signature: bytes) -> bool:
            entry = roster.get(int(nid))
            if entry is None or not isinstance(signature, bytes):
                return False
            try:
                entry.sig.verify(signature, _STATEMENT_DOMAIN + statement)
            except InvalidSignature:
                return False
            return True

        return sign, verify

    def sign_for(self, wire: Wire) -> Wire:
        """A message the driver built for one of my nodes: authenticated by that node (its ``src``)."""
        md = decode(wire.data).metadata
        src = int(md.src_node_id)
        if src not in self._keys:
            raise ProtocolError(f"{self.host}: asked to sign for node {src}, which it does not run")
        return self.sign(src, dataclasses.replace(wire, dst=int(md.dst_node_id)))

    def _name(self, node_id: int) -> str:
        entry = self._roster.get(node_id) if self._roster else None
        return f"{entry.name} (id {node_id})" if entry else f"id {node_id}"

    def verify(self, data: bytes, message: Message) -> Message:
        """Check ``message`` (decoded from ``data``) and return it without its auth record."""
        md = message.metadata
        src, dst, tag = int(md.src_node_id), int(md.dst_node_id), round_of(message)

        def reject(reason: str) -> AuthenticationError:
            return AuthenticationError(self._name(src), tag, reason, receiver=self.host)

        if self._roster is None:
            raise reject("no roster installed (authentication was not set up)")
        rec = record_of(message, AUTH_RECORD, ConfigRecord)
        blob = rec.get(_VALUE) if rec is not None else None
        tag_bytes = _SIG_TAG_BYTES if dst == BROADCAST else _MAC_TAG_BYTES  # #29.2 short-auth
        if not isinstance(blob, bytes) or len(blob) != _SEQ.size + tag_bytes:
            raise reject("unsigned message (no valid auth record)")
        prefix = _PREFIXES[tag_bytes]
        size = len(prefix) + len(blob)
        if not data.endswith(blob) or data[-size:-len(blob)] != prefix:
            raise reject("malformed signature record")
        (seq,), signer = _SEQ.unpack(blob[: _SEQ.size]), src  # the signer is the authenticated src
        entry = self._roster.get(signer)
        if entry is None:
            raise reject(f"signed by node {signer}, which is not in the roster")
        body = memoryview(data)[:-size]
        if dst == BROADCAST:
            try:
                entry.sig.verify(blob[_SEQ.size:], _digest(_SIG_DOMAIN, body, seq, signer))
            except InvalidSignature:
                raise reject("bad signature (content or metadata modified, or not signed by "
                             f"{self._name(signer)})") from None
        elif dst not in self._dh:
            raise reject(f"addressed to node {dst}, which this host does not run")
        elif not hmac.compare_digest(blob[_SEQ.size:], _mac(self._pair_key(signer, dst), body, seq, signer)):
            raise reject(f"bad signature (MAC: content or metadata modified, or not from {self._name(signer)} "
                         f"to {self._name(dst)})")
        last = self._last.get(src, 0)
        if seq <= last:
            raise reject(f"replayed or out-of-order sequence number {seq} (last accepted {last})")
        self._last[src] = seq
        del message.content[AUTH_RECORD]
        return message


def check_unreserved(message: Message) -> None:
    """Nodes may not use the reserved ``auth`` record name (it would shadow the signature)."""
    if message.has_content() and AUTH_RECORD in message.content:
        raise ProtocolError(f"message {message.metadata.message_type} uses the reserved record name {AUTH_RECORD!r}")


def auth_summary(ledger: CommLedger, *, enabled: bool) -> dict[str, object]:
    """``auth`` and ``signature_bytes``: every counted message (all phases) carries one auth record —
    a broadcast (the ledger's party ``"*"``) a signature record, a unicast a MAC record (#29.2 short-auth)."""
    if not enabled:
        return {"auth": False, "signature_bytes": 0}
    total = sum(c.messages * (SIGNATURE_RECORD_BYTES if party == "*" else MAC_RECORD_BYTES)
                for (_, _, party), c in ledger.by_key.items())
    return {"auth": True, "signature_bytes": total}
