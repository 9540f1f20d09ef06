"""Drive the pure secure-aggregation objects through whole rounds (shared by the secagg tests)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from vfl.attacks.secagg.curious import ServerView
from vfl.secagg import SecAggClient, SecAggServer, ShareRequest, UnmaskRequest
from vfl.secagg.shares import SHARE_BYTES

SESSION = b"test-session"


def make_session(num: int, threshold: int, k: int = 16, *, ids: Sequence[int] | None = None,
                 roster: int = 0, colluders: int | None = None) -> tuple[dict[int, SecAggClient], SecAggServer]:
    """Clients 0..num-1 (or ``ids``, a session over part of a roster of ``roster`` parties) after key agreement
    and seed-share exchange, and their server; every party guards against ``colluders`` (None: t - 1)."""
    members = list(ids) if ids is not None else list(range(num))
    clients = {i: SecAggClient(i, members, threshold, SESSION, roster=roster, colluders=colluders) for i in members}
    keys = {i: c.public_key() for i, c in clients.items()}
    for c in clients.values():
        c.receive_public_keys(keys)
    sent = {i: c.make_shares() for i, c in clients.items()}
    for i, c in clients.items():
        c.receive_shares({s: env[i] for s, env in sent.items() if s != i})
    return clients, SecAggServer(members, threshold, k, SESSION, roster=roster, colluders=colluders)


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


def determined_inputs(view: ServerView, parties: Sequence[int], *, colluders: Iterable[int] = ()) -> list[int]:
    """Honest parties whose input of the view's round is a linear combination of what the server and the
    ``colluders`` hold, over the rationals (signed streams) or over GF(2) (not even its parity): every masked
    vector y_p = x_p + self_p + sum_j sign(p, j) pair_pj, every release z_p = self_p + sum over the survivors p
    was told of sign(p, j) view_pj, every stream whose key the server got (pair keys, view keys, raw self keys,
    seeds rebuilt from >= t shares: the colluders' shares included once ``vfl.attacks.secagg.lying._hand_over``
    put them in the view) and the colluders' own inputs and self streams. Each stream is an independent symbol."""
    from vfl.secagg.masking import pair_sign

    sym: dict[tuple[object, ...], int] = {}

    def s(*name: object) -> int:
        return sym.setdefault(tuple(name), len(sym))

    def pair(kind: str, a: int, b: int) -> int:
        return s(kind, min(a, b), max(a, b))

    rnd = next(iter(view.active), None) or next(r for r, _ in view.vectors)
    rows: list[dict[int, int]] = []
    for p in parties:
        rows.append({s("x", p): 1, s("self", p): 1, **{pair("pair", p, j): pair_sign(p, j) for j in parties if j != p}})
        if (rnd, p) in view.releases:
            told, _ = view.releases[(rnd, p)]
            rows.append({s("self", p): 1, **{pair("view", p, j): pair_sign(p, j) for j in told if j != p}})
        if (rnd, p) in view.self_keys or view.rebuilt_seed(p) is not None:
            rows.append({s("self", p): 1})
    rows += [{pair("pair", a, b): 1} for (_, a, b) in view.pair_keys]
    rows += [{pair("view", a, b): 1} for (_, a, b) in view.view_keys]
    for a in colluders:
        rows += [{s("x", a): 1}, {s("self", a): 1}]
    honest = [p for p in parties if p not in set(colluders)]
    matrix = np.zeros((len(rows), len(sym)), dtype=np.float64)
    for i, row in enumerate(rows):
        for j, v in row.items():
            matrix[i, j] = v
    rank = np.linalg.matrix_rank(matrix)
    bits = [sum(1 << j for j, v in row.items() if v % 2) for row in rows]
    out = []
    for p in honest:
        target = np.zeros((1, len(sym)))
        target[0, s("x", p)] = 1
        if np.linalg.matrix_rank(np.vstack([matrix, target])) == rank or span_has(bits, 1 << s("x", p)):
            out.append(p)
    return out


def span_has(rows: list[int], target: int) -> bool:
    """Is ``target`` (a bit set of symbols) in the GF(2) span of ``rows``?"""
    basis: dict[int, int] = {}
    for row in rows:
        while row:
            top = row.bit_length() - 1
            if top not in basis:
                basis[top] = row
                break
            row ^= basis[top]
    while target:
        top = target.bit_length() - 1
        if top not in basis:
            return False
        target ^= basis[top]
    return True
