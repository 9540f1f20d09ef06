"""The actively lying server as an attacker, played against real ``SecAggClient`` objects (real
X25519/AES-GCM keys, real Ed25519 identities). Used by the tests and ``secagg_attacks`` benchmark.

Each attack runs one session of ``num`` parties and one round, keeps everything the parties
reveal in a :class:`vfl.attacks.secagg.curious.ServerView` and reports ``(inputs_opened, detected)``:
how many parties' exact inputs any candidate of ``unmask_attempts`` recovers, and whether an
honest party raised a typed refusal (``RevealRefused``, ``MaliciousServer``) instead.

- ``key_swap``: the roster hands every party the server's own X25519 keys in place of its peers';
  it decrypts every seed share, rebuilds every seed and derives every pair key. ``signed=False``
  plays parties without identity keys (auth off): nothing binds a key to its party.
- ``single_survivor``: each party is told it alone survived (all others dropped).
- ``redeclared_dropout``: everyone reveals under "all survived"; then all but v are told v dropped.
- ``late_survivor``: v is told everyone survived; the others are told v dropped (split views).
- ``split_rebuild``: v is told the holders H (t of its peers) dropped; H are told all survived and
  then that v vanished (they reveal their shares of v's seed); the rest are told v dropped. Seed +
  every pair key of v = its input, unless t + quorum > M + colluders (honest clients refuse the
  shares otherwise, in mode semi-honest) or the malicious mode's consistency check stops it. ``declared``:
  the clients' privacy.colluders (None: t - 1).
- ``colluder_split`` (every mode): ``colluders`` parties C hand the server everything they hold (pair, view and
  round keys, their seed shares, signatures on any set). Played twice, the input opens if either opens it:
  *view*: v and C are told "you survived, everyone else dropped" (v reveals its pair keys with the others, C
  their keys with v: y_v opens); *seed*: v is told the survivors {v} + C + the rest R, the honest holders H (t
  minus |C| of them) are told all survived and then that v vanished (shares of v's seed), R are told v dropped.
  ``declared``: the clients' ``privacy.colluders`` (None: undeclared, t - 1); honest clients refuse every
  survivor set under max(t, 2, c + 2). ``weak=True`` plays clients whose quorum ignores the colluders
  (max(t, 2): the control, before the rule).

Mode ``announced`` (no unmask exchange; the server names each round's set before the parties mask):
every attack above is played too (the parties refuse every reveal); its own lies are in ``announced.py``.

``release="key"`` plays the protocol before view-bound releases (``vfl.secagg.release``): each
survivor handed the server its raw round self key. It is the control: ``late_survivor`` opens the
victim's input with it, and nothing with today's releases.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from vfl.attacks.secagg.curious import ServerView, unmasked
from vfl.core.errors import RevealRefused
from vfl.secagg.client import SecAggClient
from vfl.secagg.consistency import Identity, SurvivorCheck, ed25519_identities, survivor_statement
from vfl.secagg.keys import (
    KEY_BYTES,
    PAIR_LABEL,
    derive_pair_keys,
    generate_private_key,
    load_public_key,
    public_key_bytes,
    round_key,
)
from vfl.secagg.rules import Reveal
from vfl.secagg.shares import SHARE_BYTES, decrypt_share

ATTACKS = ("key_swap", "single_survivor", "redeclared_dropout", "late_survivor", "split_rebuild")
SESSION, ROUND, NAME = b"lying-server-session", "r0", "emb"
Outcome = tuple[int, bool]  # (inputs opened, a party detected the lie)


def _clients(num: int, threshold: int, mode: str, signed: bool = True, *, colluders: int | None = None,
             cls: type[SecAggClient] | None = None) -> tuple[dict[int, SecAggClient], dict[int, Identity]]:
    """Clients with Ed25519 identities (``signed``: as with auth on) or none (auth off, semi-honest) that guard
    against ``colluders`` (None: t - 1)."""
    ids = ed25519_identities(range(num))
    make = cls or SecAggClient
    return {i: make(i, range(num), threshold, SESSION, mode=mode, identity=ids[i] if signed else None,
                    colluders=colluders) for i in range(num)}, ids


def _exchange(clients: Mapping[int, SecAggClient], rosters: Mapping[int, Mapping[int, bytes]],
              sigs: Mapping[int, bytes]) -> dict[int, dict[int, bytes]]:
    """Deliver each party its roster; return the share envelopes (sender -> recipient -> envelope)."""
    for i, c in clients.items():
        c.receive_public_keys(rosters[i], sigs)
    return {i: c.make_shares() for i, c in clients.items()}


def honest_setup(clients: Mapping[int, SecAggClient]) -> None:
    keys = {i: c.public_key() for i, c in clients.items()}
    sigs = {i: c.key_signature() for i, c in clients.items() if c.identity is not None}
    sent = _exchange(clients, dict.fromkeys(clients, keys), sigs)
    for i, c in clients.items():
        c.receive_shares({s: env[i] for s, env in sent.items() if s != i})


def _malicious(clients: Mapping[int, SecAggClient]) -> bool:
    return next(iter(clients.values())).mode == "malicious"


def _view(clients: Mapping[int, SecAggClient], threshold: int, k: int) -> ServerView:
    return ServerView(parties=tuple(sorted(clients)), threshold=threshold, k=k, session=SESSION, name=NAME)


def _mask(clients: Mapping[int, SecAggClient], view: ServerView, k: int, seed: int) -> dict[int, npt.NDArray[np.int64]]:
    xs = {i: np.random.default_rng(seed + i).integers(0, 1 << (k - 3), size=16) for i in clients}
    for i, c in clients.items():
        if c.mode == "announced":  # the server names every party (the round's honest set)
            c.announce(round_id=ROUND, members=clients)
        view.vectors[(ROUND, i)] = c.mask(xs[i], round_id=ROUND, name=NAME, k=k)
    view.active[ROUND] = tuple(sorted(clients))
    return xs


def _honest_round(*, num: int, threshold: int, mode: str, signed: bool, k: int, seed: int, colluders: int | None = None
                  ) -> tuple[dict[int, SecAggClient], ServerView, dict[int, npt.NDArray[np.int64]]]:
    """An honest set-up and masked round (clients, the server's view, the true inputs): where the lies start."""
    clients, _ = _clients(num, threshold, mode, signed, colluders=colluders)
    honest_setup(clients)
    view = _view(clients, threshold, k)
    return clients, view, _mask(clients, view, k, seed)


def _keep(view: ServerView, party: int, rv: Reveal, told: frozenset[int], legacy: SecAggClient | None) -> None:
    view.releases[(ROUND, party)] = (tuple(sorted(told)), rv.self_keys[NAME])
    if legacy is not None:  # the control: the old client revealed its raw round self key
        view.self_keys[(ROUND, party)] = legacy._self_key(ROUND, NAME)
    for d, keys in rv.pair_keys.items():
        view.pair_keys[(ROUND, party, d)] = keys[NAME]


def _ask(clients: Mapping[int, SecAggClient], view: ServerView, views: Mapping[int, tuple[Iterable[int], Iterable[int]]],
         detected: list[bool], release: str = "view", allies: Iterable[int] = ()) -> None:
    """Send each party in ``views`` its (survivors, dropped); in malicious mode the consistency
    round first, with every signature the server got on that party's set forwarded to it (``allies``,
    colluders, sign any set they are in)."""
    told = {p: (frozenset(s), frozenset(d)) for p, (s, d) in views.items()}
    sigs: dict[frozenset[int], dict[int, bytes]] = {}
    if _malicious(clients):
        for live, _ in told.values():
            for a in allies:
                if a in live and clients[a].identity is not None:
                    sigs.setdefault(live, {})[a] = clients[a].identity.sign(  # type: ignore[union-attr]
                        survivor_statement(session=clients[a].session, round_id=ROUND, survivors=live))
        for p, (live, _) in told.items():
            try:
                sigs.setdefault(live, {})[p] = clients[p].sign_survivors(round_id=ROUND, survivors=live)
            except RevealRefused:
                detected[0] = True
    for p, (live, gone) in told.items():
        try:
            _keep(view, p, clients[p].unmask(round_id=ROUND, survivors=live, dropped=gone,
                                             signatures=sigs.get(live, {})), live,
                  clients[p] if release == "key" else None)
        except RevealRefused:
            detected[0] = True


def _opened(view: ServerView, xs: Mapping[int, npt.NDArray[np.int64]]) -> int:
    return sum(unmasked(view, p, ROUND, x) for p, x in xs.items())


def key_swap(
    *, num: int, threshold: int, mode: str, k: int = 16, seed: int = 0, signed: bool = True, release: str = "view",
) -> Outcome:
    clients, _ = _clients(num, threshold, mode, signed)
    view = _view(clients, threshold, k)
    fake = {j: generate_private_key() for j in clients}  # the server's stand-in for party j
    rosters = {i: {j: (c.public_key() if j == i else public_key_bytes(fake[j])) for j in clients}
               for i, c in clients.items()}
    real_sigs = {i: c.key_signature() for i, c in clients.items() if c.identity is not None}
    try:
        sent = _exchange(clients, rosters, real_sigs)  # the only signatures it has are on the real keys
    except RevealRefused:
        return 0, True
    for i, c in clients.items():  # party i's pair secret with "j" is the server's: it derives it too
        for j in c.peers:
            pair = derive_pair_keys(own_key=fake[j], peer_public=load_public_key(c.public_key(), party=i),
                                    own_id=j, peer_id=i, session=SESSION)
            share = decrypt_share(sent[i][j], key=pair.share_key, sender=i, recipient=j, session=SESSION)
            view.seed_shares.setdefault(i, {})[j] = share.to_bytes()
            view.pair_keys[(ROUND, i, j)] = round_key(pair.mask_secret, label=PAIR_LABEL, session=SESSION,
                                                      round_id=ROUND, name=NAME)
    xs = _mask(clients, view, k, seed)
    return _opened(view, xs), False


def single_survivor(
    *, num: int, threshold: int, mode: str, k: int = 16, seed: int = 0, signed: bool = True, release: str = "view",
) -> Outcome:
    clients, view, xs = _honest_round(num=num, threshold=threshold, mode=mode, signed=signed, k=k, seed=seed)
    detected = [False]
    _ask(clients, view, {p: ([p], [q for q in clients if q != p]) for p in clients}, detected, release)
    return _opened(view, xs), detected[0]


def redeclared_dropout(
    *, num: int, threshold: int, mode: str, k: int = 16, seed: int = 0, victim: int = 0, signed: bool = True,
    release: str = "view",
) -> Outcome:
    clients, view, xs = _honest_round(num=num, threshold=threshold, mode=mode, signed=signed, k=k, seed=seed)
    detected = [False]
    _ask(clients, view, {p: (clients, []) for p in clients}, detected, release)
    rest = [p for p in clients if p != victim]
    _ask(clients, view, {p: (rest, [victim]) for p in rest}, detected, release)
    return _opened(view, xs), detected[0]


def late_survivor(
    *, num: int, threshold: int, mode: str, k: int = 16, seed: int = 0, victim: int = 0, signed: bool = True,
    release: str = "view",
) -> Outcome:
    clients, view, xs = _honest_round(num=num, threshold=threshold, mode=mode, signed=signed, k=k, seed=seed)
    detected = [False]
    rest = [p for p in clients if p != victim]
    _ask(clients, view, {victim: (clients, []), **{p: (rest, [victim]) for p in rest}}, detected, release)
    return _opened(view, xs), detected[0]


def split_rebuild(
    *, num: int, threshold: int, mode: str, k: int = 16, seed: int = 0, victim: int = 0, signed: bool = True,
    release: str = "view", declared: int | None = None,
) -> Outcome:
    clients, view, xs = _honest_round(num=num, threshold=threshold, mode=mode, signed=signed, k=k, seed=seed,
                                      colluders=declared)
    detected = [False]
    peers = [p for p in clients if p != victim]
    holders, rest = peers[:threshold], peers[threshold:]
    _ask(clients, view, {victim: ([victim, *rest], holders), **{h: (clients, []) for h in holders},
                         **{p: (peers, [victim]) for p in rest}}, detected, release)
    for h in holders:  # "v vanished before answering": shares of its seed, and the view key with it
        try:
            got = clients[h].reveal_shares(round_id=ROUND, owners=[victim])
        except RevealRefused:
            detected[0] = True
            continue
        for owner, raw in got.items():
            view.seed_shares.setdefault(owner, {})[h] = raw
            view.view_keys[(ROUND, h, owner)] = raw[SHARE_BYTES:SHARE_BYTES + KEY_BYTES]
    return _opened(view, xs), detected[0]


class _ColluderBlind(SecAggClient):
    """The control of ``colluder_split``: a client whose survivor quorum ignores the colluders, max(t, 2)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        declared, self.colluders = self.colluders, 0  # quorum max(t, 2); the seed-share rule kept its c
        self._declared = declared
        if self.check is not None and self.identity is not None:
            self.check = SurvivorCheck(self.identity, me=self.party_id, threshold=self.threshold, colluders=0,
                                       session=self.session)

    def _check_share_safety(self, rnd: str) -> None:
        blind, self.colluders = self.colluders, self._declared
        try:
            super()._check_share_safety(rnd)
        finally:
            self.colluders = blind


def _hand_over(view: ServerView, clients: Mapping[int, SecAggClient], allies: Iterable[int]) -> None:
    """Colluders give the server everything they hold of the round: pair and view keys with every party, and
    their shares of every seed."""
    for a in allies:
        c = clients[a]
        for p in c.peers:
            view.pair_keys[(ROUND, a, p)] = c._pair_key(p, ROUND, NAME)
            view.view_keys[(ROUND, a, p)] = c._view_key(p, ROUND, NAME)
        for owner, share in c._held.items():
            view.seed_shares.setdefault(owner, {})[a] = share.to_bytes()


def colluder_split_exchange(
    *, num: int, threshold: int, mode: str, colluders: int = 1, declared: int | None = None, k: int = 16,
    seed: int = 0, victim: int = 0, signed: bool = True, release: str = "view", weak: bool = False,
    paths: Sequence[str] = ("view", "seed"),
) -> Outcome:
    """``colluder_split`` in the modes with an unmask exchange (``colluders.py`` plays every mode): v and
    ``colluders`` parties told they alone survived (path *view*), then a fresh session where t - |C| honest
    holders rebuild v's seed while the rest reveal their pair keys with v (path *seed*): (honest inputs opened
    by either, a party refused)."""
    opened, detected = 0, False
    for path in paths:
        clients, _ = _clients(num, threshold, mode, signed, colluders=declared, cls=_ColluderBlind if weak else None)
        honest_setup(clients)
        view = _view(clients, threshold, k)
        xs = _mask(clients, view, k, seed)
        allies = [p for p in clients if p != victim][:colluders]
        honest = [p for p in clients if p != victim and p not in allies]
        flag = [False]
        if path == "view":
            _ask(clients, view, {victim: ([victim, *allies], honest)}, flag, release, allies)
        else:
            holders, rest = honest[:max(threshold - len(allies), 0)], honest[max(threshold - len(allies), 0):]
            others = [p for p in clients if p != victim]
            _ask(clients, view, {victim: ([victim, *allies, *rest], holders), **{h: (clients, []) for h in holders},
                                 **{p: (others, [victim]) for p in rest}}, flag, release, allies)
            for h in holders:  # "v vanished before answering": shares of its seed, and the view key with it
                try:
                    got = clients[h].reveal_shares(round_id=ROUND, owners=[victim])
                except RevealRefused:
                    flag[0] = True
                    continue
                for owner, raw in got.items():
                    view.seed_shares.setdefault(owner, {})[h] = raw
                    view.view_keys[(ROUND, h, owner)] = raw[SHARE_BYTES:SHARE_BYTES + KEY_BYTES]
        _hand_over(view, clients, allies)
        opened = max(opened, sum(unmasked(view, p, ROUND, x) for p, x in xs.items() if p not in allies))
        detected = detected or flag[0]
    return opened, detected


RUN: dict[str, Callable[..., Outcome]] = {"key_swap": key_swap, "single_survivor": single_survivor,
                                          "redeclared_dropout": redeclared_dropout, "late_survivor": late_survivor,
                                          "split_rebuild": split_rebuild}
