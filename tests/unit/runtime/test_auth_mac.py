"""Session MACs on unicast wires, Ed25519 signatures on broadcasts: the attacks a MAC invites.

Three hosts: the server host runs nodes 0 and 4, host C runs node 3 (c), and the attacker's
host runs nodes 1 and 2 (a, b) with everything they hold — their Ed25519 and X25519 private keys
and every pair key they can derive. Each attack is paired with a control that shows the same
bytes are accepted when built with the key the attacker lacks, so the test can fail.
"""

from __future__ import annotations

import dataclasses
import hmac
import itertools

import numpy as np
import pytest

from vfl.core.errors import AuthenticationError, ProtocolError
from vfl.runtime import auth
from vfl.runtime import message as wire
from vfl.runtime.auth import (
    AUTH_RECORD,
    MAC_RECORD_BYTES,
    SIGNATURE_RECORD_BYTES,
    HostAuth,
    record_bytes,
)

NAMES = {0: "server", 1: "a", 2: "b", 3: "c", 4: "d2"}
SERVER, A, B, C, D2 = 0, 1, 2, 3, 4


def _hosts() -> tuple[HostAuth, HostAuth, HostAuth]:
    server = HostAuth({SERVER: "server", D2: "d2"}, "server host")
    host_c = HostAuth({C: "c"}, "host of c")
    attacker = HostAuth({A: "a", B: "b"}, "attacker host")
    roster = {n: (NAMES[n], *k) for h in (server, host_c, attacker) for n, k in h.public_keys().items()}
    for h in (server, host_c, attacker):
        h.install(roster)
    return server, host_c, attacker


def _msg(src: int, dst: int, step: int = 0, value: float = 1.0) -> wire.Wire:
    m = wire.make("train.forward", src=src, dst=dst, round=wire.round_tag(0, step),
                  content=wire.records(emb=wire.arrays(e=np.full((4, 3), value, np.float32))))
    return wire.Wire.of(m)


def _accept(host: HostAuth, w: wire.Wire):
    return host.verify(w.data, wire.decode(w.data))


def _body(w: wire.Wire) -> bytes:
    return w.data[:-record_bytes(w.dst)]


def _blob(w: wire.Wire) -> tuple[int, bytes]:
    """(sequence number, tag) of a signed wire: the signer is its metadata ``src``."""
    blob = w.data[len(_body(w)) + len(auth._PREFIXES[32 if w.dst != wire.BROADCAST else 64]):]
    return auth._SEQ.unpack(blob[:auth._SEQ.size])[0], blob[auth._SEQ.size:]


def _with_tag(body: bytes, seq: int, tag: bytes) -> wire.Wire:
    """A wire with an authenticator the attacker computed itself (framed for the tag's size)."""
    data = body + auth._PREFIXES[len(tag)] + auth._SEQ.pack(seq) + tag
    md = wire.decode(data).metadata
    return wire.Wire(src=md.src_node_id, dst=md.dst_node_id, kind=md.message_type, round=md.group_id,
                     data=data, payload=48)


def _retarget(w: wire.Wire, dst: int) -> wire.Wire:
    """``w`` with its metadata ``dst`` rewritten and its original authenticator kept."""
    m = wire.decode(w.data)
    del m.content[AUTH_RECORD]
    m.metadata.dst_node_id = dst
    return dataclasses.replace(w, dst=dst, data=wire.encode(m) + w.data[-record_bytes(w.dst):])


def test_unicast_wires_carry_a_mac_and_broadcasts_a_signature():
    server, host_c, _ = _hosts()
    uni = host_c.sign(C, _msg(C, SERVER))
    bcast = server.sign(SERVER, _msg(SERVER, wire.BROADCAST))
    assert uni.nbytes - _msg(C, SERVER).nbytes == MAC_RECORD_BYTES
    assert bcast.nbytes - _msg(SERVER, wire.BROADCAST).nbytes == SIGNATURE_RECORD_BYTES
    seq, tag = _blob(uni)
    assert len(tag) == 32 and tag == hmac.digest(host_c._pair_key(C, SERVER), auth._digest(
        auth._MAC_DOMAIN, _body(uni), seq, C), "sha512")[:32]  # HMAC-SHA512, leftmost 256 bits
    assert hmac.compare_digest(tag, auth._mac(host_c._pair_key(C, SERVER), _body(uni), seq, C))
    seq, tag = _blob(bcast)
    assert len(tag) == 64
    server._keys[SERVER].public_key().verify(tag, auth._digest(auth._SIG_DOMAIN, _body(bcast), seq, SERVER))
    assert np.all(wire.get_array(_accept(server, uni), "emb", "e") == 1.0)
    assert AUTH_RECORD not in _accept(host_c, bcast).content


def test_a_third_host_cannot_forge_a_unicast_from_c_to_the_server_with_any_key_it_holds():
    server, host_c, attacker = _hosts()
    body = _body(host_c.sign(C, _msg(C, SERVER, value=-7.0)))  # the message the attacker wants accepted
    mine, everyone = (A, B), tuple(NAMES)
    keys = {(s, d): attacker._pair_key(s, d) for s, d in itertools.product(everyone, repeat=2)
            if s in mine or d in mine}
    assert len(keys) == 16  # every pair key of a and b, both directions
    for x in attacker._dh.values():  # its DH secrets with every roster key, under the target pair's label
        keys.update({("dh", n): auth.mac_key(x.exchange(p.dh), src=C, dst=SERVER) for n, p in attacker._roster.items()})
    impostor = HostAuth({C: "c"}, "impostor")  # a key of its own for c (the roster is authentic: not c's)
    impostor._roster = attacker._roster
    keys["impostor"] = impostor._pair_key(C, SERVER)
    for key in keys.values():
        with pytest.raises(AuthenticationError, match=r"c \(id 3\).*bad signature \(MAC"):
            _accept(server, _with_tag(body, 5, auth._mac(key, body, 5, C)))
    for signer in (A, B):  # its own valid MAC for a wire from a or b: the signer is the authenticated src, c
        with pytest.raises(AuthenticationError, match=r"c \(id 3\).*bad signature \(MAC"):
            _accept(server, _with_tag(body, 5, auth._mac(attacker._pair_key(signer, SERVER), body, 5, signer)))
    ed = attacker._keys[A].sign(auth._digest(auth._SIG_DOMAIN, body, 5, C))  # a signature where a MAC belongs
    with pytest.raises(AuthenticationError, match="unsigned message"):  # 64 bytes: not a unicast's record
        _accept(server, _with_tag(body, 5, ed))
    with pytest.raises(AuthenticationError, match=r"bad signature \(MAC"):  # cut to a MAC's size
        _accept(server, _with_tag(body, 5, ed[:32]))
    # control: the very same bytes with the key only c's and the server's hosts hold are accepted
    genuine = _with_tag(body, 5, auth._mac(host_c._pair_key(C, SERVER), body, 5, C))
    assert np.all(wire.get_array(_accept(server, genuine), "emb", "e") == -7.0)


def test_a_macd_wire_cannot_be_readdressed_or_turned_into_a_broadcast():
    server, host_c, attacker = _hosts()
    w = host_c.sign(C, _msg(C, SERVER))
    assert _retarget(w, SERVER).data == w.data  # control: re-encoding reproduces the wire byte for byte
    with pytest.raises(AuthenticationError, match=r"bad signature \(MAC: .* not from c \(id 3\) to d2 \(id 4\)"):
        _accept(server, _retarget(w, D2))  # another node of the same host
    for host in (server, host_c, attacker):  # as a broadcast: a MAC is no signature record, nor padded to one
        with pytest.raises(AuthenticationError, match="unsigned message"):
            _accept(host, _retarget(w, wire.BROADCAST))
        seq, tag = _blob(w)
        with pytest.raises(AuthenticationError, match=r"bad signature \(content or metadata modified"):
            _accept(host, _with_tag(_retarget(w, wire.BROADCAST).data[:-MAC_RECORD_BYTES], seq, tag + tag))
    _accept(server, w)  # the untouched wire is still accepted (the rejections consumed no sequence number)


def test_a_broadcast_signature_cannot_be_passed_off_as_a_unicast():
    server, host_c, _ = _hosts()
    w = server.sign(SERVER, _msg(SERVER, wire.BROADCAST))
    with pytest.raises(AuthenticationError, match="unsigned message"):  # a 64-byte record on a unicast
        _accept(host_c, _retarget(w, C))
    seq, sig = _blob(w)
    for tag in (sig[:32], sig[32:]):  # either half framed as a MAC
        with pytest.raises(AuthenticationError, match=r"bad signature \(MAC"):
            _accept(host_c, _with_tag(_retarget(w, C).data[:-SIGNATURE_RECORD_BYTES], seq, tag))
    _accept(host_c, w)


def test_a_macd_wire_presented_to_a_host_without_its_dst_is_rejected():
    server, host_c, attacker = _hosts()
    w = host_c.sign(C, _msg(C, SERVER))
    for host in (attacker, host_c):
        with pytest.raises(AuthenticationError, match="addressed to node 0, which this host does not run"):
            _accept(host, w)
    _accept(server, w)


def test_pair_keys_are_directional_a_mac_does_not_reflect():
    server, host_c, _ = _hosts()
    k_c_s, k_s_c = server._pair_key(C, SERVER), server._pair_key(SERVER, C)
    assert k_c_s != k_s_c and k_c_s == host_c._pair_key(C, SERVER) and k_s_c == host_c._pair_key(SERVER, C)
    body = _body(server.sign(SERVER, _msg(SERVER, C)))
    with pytest.raises(AuthenticationError, match=r"bad signature \(MAC"):  # made with the reverse key
        _accept(host_c, _with_tag(body, 9, auth._mac(k_c_s, body, 9, SERVER)))
    _accept(host_c, _with_tag(body, 9, auth._mac(k_s_c, body, 9, SERVER)))  # control: the right key


def test_the_receiver_can_forge_only_messages_to_itself():
    """The documented limit of MACs (no non-repudiation): the server's host can make a valid MAC
    for "c -> server" — accepted by itself only; it cannot make one for "c -> anyone else"."""
    server, host_c, attacker = _hosts()
    body = _body(host_c.sign(C, _msg(C, SERVER, value=3.0)))
    forged = _with_tag(body, 1, auth._mac(server._pair_key(C, SERVER), body, 1, C))
    assert np.all(wire.get_array(_accept(server, forged), "emb", "e") == 3.0)
    with pytest.raises(ProtocolError, match="no MAC key for 3 -> 1"):
        server._pair_key(C, A)  # a pair with no node of its own: not derivable


def test_broadcast_tampering_and_replay_are_rejected():
    server, host_c, _ = _hosts()
    first, second = server.sign(SERVER, _msg(SERVER, wire.BROADCAST, 0)), server.sign(SERVER, _msg(SERVER, wire.BROADCAST, 1))
    data = bytearray(second.data)
    data[data.index(np.float32(1.0).tobytes())] ^= 0x01
    with pytest.raises(AuthenticationError, match="bad signature"):
        _accept(host_c, dataclasses.replace(second, data=bytes(data)))
    _accept(host_c, second)
    with pytest.raises(AuthenticationError, match="out-of-order sequence number 1 .last accepted 2"):
        _accept(host_c, first)


def test_the_roster_must_hold_both_of_my_keys_and_well_formed_entries():
    server, host_c, _ = _hosts()
    fresh = HostAuth({C: "c"}, "h")
    (ed, dh), = fresh.public_keys().values()
    other_dh = host_c.public_keys()[C][1]
    with pytest.raises(ProtocolError, match="does not hold the key of my node 3"):
        fresh.install({C: ("c", ed, other_dh)})  # my Ed25519 key, someone else's X25519 key
    with pytest.raises(ProtocolError, match="does not hold the key of my node 3"):
        fresh.install({C: ("c", ed)})  # the old two-field entry
    with pytest.raises(ProtocolError, match="roster entry of node 0 is not"):
        fresh.install({C: ("c", ed, dh), SERVER: ("server", b"short", dh)})
    unrostered = HostAuth({C: "c"}, "h")
    with pytest.raises(ProtocolError, match="no roster installed"):
        unrostered.sign(C, _msg(C, SERVER))  # a MAC needs the receiver's key


@pytest.mark.parametrize("dst", [SERVER, wire.BROADCAST])
def test_a_flipped_bit_anywhere_in_a_signed_wire_is_refused(dst):
    """#29.2 short-auth: body, sequence number, tag and the record's framing — every bit is covered."""
    server, host_c, _ = _hosts()
    src, signer, receiver = (C, host_c, server) if dst == SERVER else (SERVER, server, host_c)
    w = signer.sign(src, _msg(src, dst))
    assert _accept(receiver, w) is not None  # control: the untouched wire is accepted
    refused = 0
    for i in range(len(w.data) * 8):
        data = bytearray(w.data)
        data[i // 8] ^= 1 << (i % 8)
        receiver._last.clear()  # no replay window: only the authenticator can refuse it
        try:
            m = wire.decode(bytes(data))
        except Exception:  # not a message at all: refused before authentication
            refused += 1
            continue
        with pytest.raises((AuthenticationError, ProtocolError)):
            receiver.verify(bytes(data), m)
        refused += 1
    assert refused == len(w.data) * 8


def test_the_sequence_number_does_not_wrap():
    _, host_c, _ = _hosts()
    host_c._seq[C] = 2**32 - 2
    host_c.sign(C, _msg(C, SERVER))  # the last one a 4-byte counter holds
    with pytest.raises(ProtocolError, match="2\\*\\*32 - 1 authenticated wires"):
        host_c.sign(C, _msg(C, SERVER))
