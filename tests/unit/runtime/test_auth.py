"""Authentication: Ed25519 signatures on every wire, verified by the receiving host (in process).

Plays the attacker at the wire level: a modified payload, a forged ``src`` (signed by the
attacker's own key: the signer is the authenticated ``src``, so its MAC does not check), a replayed and a reordered message, an unsigned message, a signer outside
the roster — each rejected with an ``AuthenticationError`` naming the sender and the round.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import strategies  # noqa: F401
from vfl.core.errors import AuthenticationError, ProtocolError
from vfl.runtime import message as wire
from vfl.runtime.auth import MAC_RECORD_BYTES, SIGNATURE_RECORD_BYTES, HostAuth

NAMES = {0: "server", 1: "party0", 2: "party1"}


def _hosts() -> tuple[HostAuth, HostAuth]:
    server, parties = HostAuth({0: "server"}, "server host"), HostAuth({1: "party0", 2: "party1"}, "party host")
    roster = {n: (NAMES[n], *k) for h in (server, parties) for n, k in h.public_keys().items()}
    server.install(roster)
    parties.install(roster)
    return server, parties


def _emb(src: int, step: int, value: float = 1.0) -> wire.Wire:
    m = wire.make("train.forward", src=src, dst=0, round=wire.round_tag(0, step),
                  content=wire.records(emb=wire.arrays(e=np.full((4, 3), value, np.float32))))
    return wire.Wire.of(m)


def _accept(host: HostAuth, w: wire.Wire):
    return host.verify(w.data, wire.decode(w.data))


def test_signed_message_verifies_and_loses_its_auth_record():
    server, parties = _hosts()
    w = parties.sign(1, _emb(1, 0))
    assert w.nbytes == _emb(1, 0).nbytes + MAC_RECORD_BYTES and w.payload == 48  # signature = envelope
    m = _accept(server, w)
    assert "auth" not in m.content and np.all(wire.get_array(m, "emb", "e") == 1.0)


def test_modified_payload_is_rejected():
    server, parties = _hosts()
    w = parties.sign(1, _emb(1, 0))
    data = bytearray(w.data)
    data[data.index(np.float32(1.0).tobytes())] ^= 0x01  # one bit of the embedding
    bad = dataclasses.replace(w, data=bytes(data))
    with pytest.raises(AuthenticationError, match=r"party0 \(id 1\) in round train:0:0.*bad signature") as exc:
        _accept(server, bad)
    assert exc.value.round == "train:0:0" and "party0" in exc.value.node


def test_rewritten_metadata_is_rejected():
    server, parties = _hosts()
    w = parties.sign(1, _emb(1, 3))
    forged = w.data.replace(b"train:0:3", b"train:0:4")  # the round tag is signed too
    with pytest.raises(AuthenticationError, match="bad signature"):
        _accept(server, dataclasses.replace(w, data=forged))


def test_forged_src_signed_with_the_attackers_own_key_is_rejected():
    server, parties = _hosts()
    forged = parties.sign(2, _emb(1, 0))  # party1 (id 2) claims to be party0 (id 1)
    with pytest.raises(AuthenticationError, match=r"party0 \(id 1\).*bad signature \(MAC: .* not from party0"):
        _accept(server, forged)
    _accept(server, parties.sign(1, _emb(1, 0)))  # control: signed by party0 itself


def test_replayed_and_reordered_messages_are_rejected():
    server, parties = _hosts()
    first, second = parties.sign(1, _emb(1, 0)), parties.sign(1, _emb(1, 1))
    _accept(server, first)
    with pytest.raises(AuthenticationError, match="replayed or out-of-order sequence number 1"):
        _accept(server, first)
    server2, parties2 = _hosts()
    a, b = parties2.sign(1, _emb(1, 0)), parties2.sign(1, _emb(1, 1))
    _accept(server2, b)
    with pytest.raises(AuthenticationError, match="out-of-order sequence number 1 .last accepted 2"):
        _accept(server2, a)
    _accept(server, second)  # the first host still accepts the next one in order


def test_unsigned_and_unknown_signer_are_rejected():
    server, _ = _hosts()
    with pytest.raises(AuthenticationError, match="unsigned"):
        _accept(server, _emb(1, 0))
    outsider = HostAuth({7: "mallory"}, "outsider")  # knows the public roster, is not in the server's
    outsider.install({**{n: (NAMES[n], *k) for n, k in server.public_keys().items()},
                      **{n: ("mallory", *k) for n, k in outsider.public_keys().items()}})
    with pytest.raises(AuthenticationError, match="not in the roster"):
        _accept(server, outsider.sign(7, _emb(7, 0)))


def test_roster_is_fixed_once_and_must_hold_my_keys():
    server, parties = _hosts()
    with pytest.raises(ProtocolError, match="fixed before training"):
        server.install({})
    fresh = HostAuth({0: "server"}, "h")
    with pytest.raises(ProtocolError, match="does not hold the key of my node 0"):
        fresh.install({n: ("x", *k) for n, k in parties.public_keys().items()})


def test_signature_overhead_is_constant_and_the_reserved_name_is_refused():
    _, parties = _hosts()
    sizes = {len(parties.sign(1, _emb(1, s)).data) - len(_emb(1, s).data) for s in range(300)}
    assert sizes == {MAC_RECORD_BYTES}
    bcast = wire.Wire.of(wire.make("train.forward", src=1, dst=wire.BROADCAST, round="train:0:0",
                                   content=wire.records(emb=wire.arrays(e=np.ones(3, np.float32)))))
    assert len(parties.sign(1, bcast).data) - len(bcast.data) == SIGNATURE_RECORD_BYTES
    from vfl.runtime.auth import check_unreserved

    m = wire.make("query.x", src=1, dst=0, round="setup:0:0", content=wire.records(auth=wire.config(a=1)))
    with pytest.raises(ProtocolError, match="reserved"):
        check_unreserved(m)


