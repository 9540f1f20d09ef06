"""Authenticated nodes: an Ed25519 identity key per node, a fixed roster, one signature per wire.

Each host generates the keys of the nodes it runs (private keys never leave it) and reports the
public keys; the driver installs the roster (node id -> name, key) on every host before the first
protocol message. Trust assumption: the roster is authentic (a deployment takes it from a PKI).

Every wire a host sends carries one signature by the node that produced it, over the serialized
message (metadata: src, dst, round tag, kind, message id, time; all content) and the sender's
sequence number. The receiving host verifies before any node sees the message and rejects a bad
signature, a ``src`` other than the signer, and a sequence number not above the last one it
accepted from that sender (replay, reordering) — each an ``AuthenticationError`` naming the
sender and the round. The driver holds no key: a message it builds for node X (start an epoch,
ask for metrics) is signed by X's host (``HostAuth.sign_for``) before it is sent.

Wire format: the signature is a ConfigRecord ``auth`` (one 80-byte value: seq, signer, Ed25519
signature) appended to the serialized message as a protobuf fragment. Parsing the concatenation
merges it into the content, so the signed bytes are exactly the bytes before it (nothing is
re-serialized) and every message grows by the same ``SIGNATURE_BYTES`` (counted as envelope).
"""

from __future__ import annotations

import dataclasses
import hashlib
import struct
from collections.abc import Mapping

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from flwr.common import ConfigRecord, Message
from flwr.proto.message_pb2 import Message as ProtoMessage
from flwr.proto.recorddict_pb2 import ConfigRecord as ProtoConfigRecord
from flwr.proto.recorddict_pb2 import ConfigRecordValue as ProtoConfigValue
from flwr.proto.recorddict_pb2 import RecordDict as ProtoRecordDict

from vfl.errors import AuthenticationError, ProtocolError
from vfl.ledger import CommLedger
from vfl.message import Wire, decode, record_of, round_of

AUTH_RECORD = "auth"  # reserved record name: nodes must not use it
_VALUE = "sig"
_DOMAIN = b"vfl/auth/v1\x00"
_HEAD = struct.Struct(">QQ")  # seq, signer


def _tail(blob: bytes) -> bytes:
    """The protobuf fragment that adds ``auth/sig = blob`` to a serialized flwr message."""
    rec = ProtoConfigRecord(items=[ProtoConfigRecord.Item(key=_VALUE, value=ProtoConfigValue(bytes=blob))])
    item = ProtoRecordDict.Item(key=AUTH_RECORD, config_record=rec)
    return ProtoMessage(content=ProtoRecordDict(items=[item])).SerializeToString()  # type: ignore[no-any-return]


BLOB_BYTES = _HEAD.size + 64
_PREFIX = _tail(bytes(BLOB_BYTES))[:-BLOB_BYTES]  # the blob is the fragment's last field: tail = prefix + blob
if _PREFIX + b"\x01" * BLOB_BYTES != _tail(b"\x01" * BLOB_BYTES):  # pragma: no cover - protobuf layout changed
    raise RuntimeError("vfl.auth: unexpected protobuf layout of the signature record")
SIGNATURE_BYTES = len(_PREFIX) + BLOB_BYTES  # what authentication adds to every message


def _digest(body: bytes | memoryview, seq: int, signer: int) -> bytes:
    h = hashlib.sha256(_DOMAIN)
    h.update(_HEAD.pack(seq, signer))
    h.update(body)
    return h.digest()


def public_bytes(key: Ed25519PublicKey) -> bytes:
    return key.public_bytes(Encoding.Raw, PublicFormat.Raw)


class HostAuth:
    """The keys of one host's nodes, their sequence counters, the roster and the replay window."""

    def __init__(self, names: Mapping[int, str], host: str) -> None:
        self.host = host
        self._keys = {nid: Ed25519PrivateKey.generate() for nid in names}  # generated here, never exported
        self._seq = dict.fromkeys(names, 0)
        self._last: dict[int, int] = {}
        self._roster: dict[int, tuple[str, Ed25519PublicKey]] | None = None

    def public_keys(self) -> dict[int, bytes]:
        return {nid: public_bytes(k.public_key()) for nid, k in self._keys.items()}

    def install(self, roster: Mapping[int, tuple[str, bytes]]) -> None:
        """Fix the roster (once): every node's name and public key, mine included and unchanged."""
        if self._roster is not None:
            raise ProtocolError(f"{self.host}: the roster is fixed before training and cannot change")
        for nid, key in self.public_keys().items():
            if nid not in roster or bytes(roster[nid][1]) != key:
                raise ProtocolError(f"{self.host}: the roster does not hold the key of my node {nid}")
        self._roster = {int(n): (str(name), Ed25519PublicKey.from_public_bytes(bytes(k)))
                        for n, (name, k) in roster.items()}

    def sign(self, node_id: int, wire: Wire) -> Wire:
        """``wire`` produced by my node ``node_id``, with its next sequence number and signature."""
        key = self._keys.get(node_id)
        if key is None:
            raise ProtocolError(f"{self.host} holds no key of node {node_id}")
        self._seq[node_id] += 1
        seq = self._seq[node_id]
        blob = _HEAD.pack(seq, node_id) + key.sign(_digest(wire.data, seq, node_id))
        return dataclasses.replace(wire, data=wire.data + _PREFIX + blob)

    def sign_for(self, wire: Wire) -> Wire:
        """A message the driver built for one of my nodes: signed by that node (its ``src``)."""
        src = int(decode(wire.data).metadata.src_node_id)
        if src not in self._keys:
            raise ProtocolError(f"{self.host}: asked to sign for node {src}, which it does not run")
        return self.sign(src, wire)

    def _name(self, node_id: int) -> str:
        entry = self._roster.get(node_id) if self._roster else None
        return f"{entry[0]} (id {node_id})" if entry else f"id {node_id}"

    def verify(self, data: bytes, message: Message) -> Message:
        """Check ``message`` (decoded from ``data``) and return it without its auth record."""
        md = message.metadata
        src, tag = int(md.src_node_id), round_of(message)

        def reject(reason: str) -> AuthenticationError:
            return AuthenticationError(self._name(src), tag, reason, receiver=self.host)

        if self._roster is None:
            raise reject("no roster installed (authentication was not set up)")
        rec = record_of(message, AUTH_RECORD, ConfigRecord)
        blob = rec.get(_VALUE) if rec is not None else None
        if not isinstance(blob, bytes) or len(blob) != BLOB_BYTES:
            raise reject("unsigned message (no valid auth record)")
        if not data.endswith(blob) or data[-SIGNATURE_BYTES:-BLOB_BYTES] != _PREFIX:
            raise reject("malformed signature record")
        seq, signer = _HEAD.unpack(blob[: _HEAD.size])
        entry = self._roster.get(signer)
        if entry is None:
            raise reject(f"signed by node {signer}, which is not in the roster")
        try:
            entry[1].verify(blob[_HEAD.size:], _digest(memoryview(data)[:-SIGNATURE_BYTES], seq, signer))
        except InvalidSignature:
            raise reject(f"bad signature (content or metadata modified, or not signed by {self._name(signer)})") from None
        if signer != src:
            raise reject(f"src does not match the signing key: signed by {self._name(signer)}")
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
    """``auth`` and ``signature_bytes``: every counted message (all phases) carries one signature."""
    messages = sum(c.messages for c in ledger.by_key.values())
    return {"auth": enabled, "signature_bytes": SIGNATURE_BYTES * messages if enabled else 0}
