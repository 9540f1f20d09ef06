"""The curious server's view, rebuilt from the real wire bytes it received and sent.

``view_from_wires`` parses every serialized message that reached (or left) the server node -- the
set-up replies, the parties' masked embeddings (late ones included), the unmask replies and the
seed-share replies -- into a :class:`vfl.attacks.secagg.curious.ServerView`, so an attack runs on exactly
what crossed the wire. Used by the dropout benchmark and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from parties.mods.encoding import read_encoded
from parties.secagg import wire as sw
from parties.secagg.party import cfg_of, reveal_of, shares_of
from parties.vertical import wire as vw
from parties.vertical.wire import SERVER_ID
from vfl.attacks.secagg.curious import ServerView
from vfl.runtime.message import Wire, parse_round, round_of
from vfl.secagg.keys import KEY_BYTES
from vfl.secagg.shares import SHARE_BYTES


def view_from_wires(wires: Iterable[Wire], *, parties: Sequence[int], threshold: int,
                    sums: Mapping[str, tuple[Sequence[int], Sequence[int]]] | None = None) -> ServerView:
    """Everything the server node held; ``sums`` are the sums it computed (round -> (sum, summed))."""
    msgs = [w.open() for w in wires]
    session, k = b"", 0
    vectors: dict[tuple[str, int], np.ndarray] = {}
    view = ServerView(parties=tuple(parties), threshold=threshold, k=1, session=b"-")
    told: dict[str, tuple[int, ...]] = {}  # round -> the survivors the server named (else: vectors that arrived)
    releases: dict[tuple[str, int], bytes] = {}
    asked: dict[tuple[int, int], str] = {}  # (epoch, step) -> the round the server's last UNMASK request named
    for m in msgs:
        md = m.metadata
        kind, src = md.message_type, int(md.src_node_id)
        if kind == sw.Kind.SETUP and src != SERVER_ID:
            session = bytes(cfg_of(m)[sw.Key.SESSION])
        elif kind in vw.FORWARD_KINDS and src != SERVER_ID:
            enc = read_encoded(m)
            if enc.masked:
                vectors[(round_of(m), src)] = enc.values.astype(np.uint32)
                k = enc.k
        elif kind == sw.Kind.UNMASK and src == SERVER_ID:
            c = cfg_of(m)
            asked[parse_round(round_of(m))[1:]] = str(c[sw.Key.ROUND])
            if sw.Key.SURVIVORS in c:
                told[str(c[sw.Key.ROUND])] = tuple(sorted(int(p) for p in c[sw.Key.SURVIVORS]))
            if sw.Key.DROPPED in c:  # otherwise: the parties whose vectors arrived
                view.active[str(c[sw.Key.ROUND])] = tuple(sorted(int(p) for p in [*c[sw.Key.SURVIVORS], *c[sw.Key.DROPPED]]))
        elif kind == sw.Kind.UNMASK:
            phase, epoch, step = parse_round(round_of(m))  # the round a reply answers: its tag (#29.2)
            rv = reveal_of(m, round_id=asked.get((epoch, step)) if phase == sw.Phase.RECOVERY else round_of(m))
            for name, release in rv.self_keys.items():  # self-mask releases (vfl.secagg.release)
                releases[(rv.round_id, src)] = release
                view.name = name
            for d, keys in rv.pair_keys.items():
                view.pair_keys[(rv.round_id, src, d)] = keys[view.name]
        elif kind == sw.Kind.REVEAL_SHARES and src != SERVER_ID:
            rnd = str(cfg_of(m)[sw.Key.ROUND])
            for owner, raw in shares_of(m).items():
                view.seed_shares.setdefault(owner, {})[src] = raw
                view.view_keys[(rnd, src, owner)] = raw[SHARE_BYTES:SHARE_BYTES + KEY_BYTES]
    view.session, view.k = session, k
    view.vectors = vectors
    for rnd in {r for r, _ in vectors}:
        view.active.setdefault(rnd, tuple(sorted(p for r, p in vectors if r == rnd)))
    for (rnd, src), release in releases.items():
        view.releases[(rnd, src)] = (told.get(rnd) or tuple(sorted(p for r, p in vectors if r == rnd)), release)
    view.sums = {r: (np.asarray(total, dtype=np.int64), tuple(summed)) for r, (total, summed) in (sums or {}).items()}
    return view
