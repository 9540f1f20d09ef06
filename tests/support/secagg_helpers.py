"""Drive the pure secure-aggregation objects through whole rounds (shared by the secagg tests)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from vfl.attacks.secagg.curious import ServerView
from vfl.secagg import SecAggClient, SecAggServer, ShareRequest, UnmaskRequest
from vfl.secagg.shares import SHARE_BYTES

SESSION = b"test-session"


def make_session(num: int, threshold: int, k: int = 16, *, ids: Sequence[int] | None = None,
                 roster: int = 0) -> tuple[dict[int, SecAggClient], SecAggServer]:
    """Clients 0..num-1 (or ``ids``, a session over part of a roster of ``roster`` parties) after key agreement
    and seed-share exchange, and their server."""
    members = list(ids) if ids is not None else list(range(num))
    clients = {i: SecAggClient(i, members, threshold, SESSION, roster=roster) for i in members}
    keys = {i: c.public_key() for i, c in clients.items()}
    for c in clients.values():
        c.receive_public_keys(keys)
    sent = {i: c.make_shares() for i, c in clients.items()}
    for i, c in clients.items():
        c.receive_shares({s: env[i] for s, env in sent.items() if s != i})
    return clients, SecAggServer(members, threshold, k, SESSION, roster=roster)


def inputs(parties: Iterable[int], n: int, k: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i: rng.integers(0, 1 << k, size=n, dtype=np.uint64) for i in parties}


def mod_sum(xs: Iterable[np.ndarray], k: int, n: int) -> np.ndarray:
    total = np.zeros(n, dtype=np.uint64)
    for x in xs:
        total += x
    return (total % (1 << k)).astype(np.int64)


def run_round(clients: dict[int, SecAggClient], server: SecAggServer, xs: dict[int, np.ndarray], *,
              rnd: str, k: int, dropped: Iterable[int] = (), vanish: Iterable[int] = (),
              view: ServerView | None = None, name: str = "emb") -> tuple[np.ndarray, tuple[int, ...]]:
    """One round: parties in ``dropped`` never send, those in ``vanish`` send but never answer.

    Every masked vector (also those of dropped parties, as late vectors) and every reveal is
    recorded in ``view``, the curious server's transcript.
    """
    gone, quiet = set(dropped), set(vanish)
    live = sorted(p for p in server.active if p not in gone)
    masked = {}
    for p in server.active:
        y = clients[p].mask(xs[p], round_id=rnd, name=name, k=k)
        if view is not None:
            view.vectors[(rnd, p)] = y
            view.active[rnd] = server.active
        if p in live:
            masked[p] = y
    request: UnmaskRequest | ShareRequest | None = server.open_round(masked, round_id=rnd, name=name)
    while request is not None:
        answering = [p for p in (request.survivors if isinstance(request, UnmaskRequest) else request.holders)
                     if p not in quiet]
        if isinstance(request, UnmaskRequest):
            reveals = {p: clients[p].unmask(round_id=rnd, survivors=request.survivors, dropped=request.dropped)
                       for p in answering}
            if view is not None:
                for p, rv in reveals.items():
                    view.releases[(rnd, p)] = (tuple(request.survivors), rv.self_keys[name])
                    for d, keys in rv.pair_keys.items():
                        view.pair_keys[(rnd, p, d)] = keys[name]
            request = server.add_unmask(rnd, reveals)
        else:
            shares = {p: clients[p].reveal_shares(round_id=rnd, owners=request.owners) for p in answering}
            if view is not None:
                for holder, got in shares.items():
                    for owner, raw in got.items():
                        view.seed_shares.setdefault(owner, {})[holder] = raw
                        view.view_keys[(rnd, holder, owner)] = raw[SHARE_BYTES:SHARE_BYTES + 32]
            server.add_shares(rnd, shares)
            request = None
    total, summed = server.result(rnd)
    if view is not None:
        view.sums[rnd] = (total, summed)
    return total, summed


def new_view(server: SecAggServer, name: str = "emb") -> ServerView:
    return ServerView(parties=server.parties, threshold=server.threshold, k=server.k, session=server.session,
                      name=name)
