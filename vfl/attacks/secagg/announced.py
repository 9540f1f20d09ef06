"""The lying server of mode ``announced`` (no unmask exchange; the server names each round's set before
the parties mask), played against real ``SecAggClient`` objects like ``lying.py``'s attacks (which are
played in this mode too: the parties refuse every reveal). Its own lies:

- ``small_set``: v is told the round's set is {v} plus the ``colluders`` (whose pair keys with v the
  server holds): the honest client refuses sets below max(t, 2, c + 2) (c: ``declared``, else t - 1);
  ``colluder_split`` in mode announced plays it;
- ``two_sets``: one round asked twice, v told {v, a} and then {v, b}, a and b then told {a, b}: three
  sums that solve x_v; the honest client masks a round at most once;
- ``same_input``: the same three sets in three rounds whose inputs repeat (an evaluation batch asked again
  under another round tag, the model unchanged, deterministic fixed-point codes): the honest client never
  masks one input over two different sets.
- ``same_rows``: a frozen bottom model (zero gradients) and the same samples in other batches of later epochs,
  over the sets of ``two_sets``: the honest client never masks one sample's row of codes over two sets.
``weak=True`` plays clients without that rule (the control: the attack opens x_v).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import numpy as np
import numpy.typing as npt

from vfl.attacks.secagg.curious import _strip
from vfl.attacks.secagg.lying import NAME, ROUND, SESSION, Outcome, honest_setup
from vfl.core.errors import RevealRefused
from vfl.secagg.client import SecAggClient
from vfl.secagg.consistency import ed25519_identities
from vfl.secagg.masking import pair_sign

ATTACKS = ("small_set", "two_sets", "same_input", "same_rows")


class _NoSizeRule(SecAggClient):
    """The control of ``small_set``: a client that accepts any set holding itself."""

    def announce(self, *, round_id: int | str, members: Iterable[int] | None = None) -> frozenset[int]:
        live = frozenset(int(p) for p in (members if members is not None else self.parties))
        self._announced, self._accepted = {str(round_id): live}, live
        self._rounds.add(str(round_id))
        return live


class _NoOnceRule(SecAggClient):
    """The control of ``two_sets``: a client that forgets which rounds (and so which inputs) it masked."""

    def announce(self, *, round_id: int | str, members: Iterable[int] | None = None) -> frozenset[int]:
        self._rounds.discard(str(round_id))
        self._announced.clear()
        self._inputs.clear()
        self._used = {u for u in self._used if u[0] != str(round_id)}
        return super().announce(round_id=round_id, members=members)


class _NoInputRule(SecAggClient):
    """The control of ``same_input``: a client that forgets which inputs it masked."""

    def mask(self, values: npt.ArrayLike, *, round_id: int | str, name: str, k: int,
             rows: Sequence[str] | None = None) -> npt.NDArray[np.uint32]:
        self._inputs.clear()
        return super().mask(values, round_id=round_id, name=name, k=k, rows=rows)


def _announced_clients(num: int, threshold: int, colluders: int | None, cls: type[SecAggClient]) -> dict[int, SecAggClient]:
    ids = ed25519_identities(range(num))
    clients = {i: cls(i, range(num), threshold, SESSION, mode="announced", identity=ids[i], colluders=colluders)
               for i in range(num)}
    honest_setup(clients)
    return clients


def _announce_mask(c: SecAggClient, members: Iterable[int], x: npt.NDArray[np.int64], k: int, detected: list[bool],
                   rnd: str = ROUND) -> npt.NDArray[np.uint32] | None:
    """Party ``c`` told ``members`` for round ``rnd``, masking ``x``; None when it refuses."""
    try:
        c.announce(round_id=rnd, members=members)
        return c.mask(x, round_id=rnd, name=NAME, k=k)
    except RevealRefused:
        detected[0] = True
        return None


def small_set(*, num: int, threshold: int, colluders: int = 0, declared: int | None | str = "same", k: int = 16,
              seed: int = 0, victim: int = 0, weak: bool = False) -> Outcome:
    """v told the set {v} + colluders; the colluders hand the server their pair keys with v. ``declared``: the
    clients' privacy.colluders (None: undeclared, t - 1; "same": ``colluders``)."""
    c = colluders if declared == "same" else declared
    clients = _announced_clients(num, threshold, c if c is None else int(c), _NoSizeRule if weak else SecAggClient)
    xs = {i: np.random.default_rng(seed + i).integers(0, 1 << (k - 3), size=16) for i in clients}
    allies = [p for p in clients if p != victim][:colluders]
    detected = [False]
    y = _announce_mask(clients[victim], [victim, *allies], xs[victim], k, detected)
    if y is None:
        return 0, detected[0]
    keys = [(clients[a]._pair_key(victim, ROUND, NAME), pair_sign(victim, a)) for a in allies]  # the colluders' keys
    return int(np.array_equal(_strip(y, keys, rnd=ROUND, name=NAME, k=k).astype(np.int64), xs[victim])), detected[0]


def two_sets(*, num: int, threshold: int, k: int = 16, seed: int = 0, victim: int = 0, weak: bool = False,
             rounds: tuple[str, str, str] = (ROUND, ROUND, ROUND), control: type[SecAggClient] = _NoOnceRule) -> Outcome:
    """One round asked twice with different sets: sums over {v, a}, {v, b}, {a, b} solve x_v."""
    clients = _announced_clients(num, threshold, 0, control if weak else SecAggClient)
    xs = {i: np.random.default_rng(seed + i).integers(0, 1 << (k - 3), size=16) for i in clients}
    a, b = [p for p in clients if p != victim][:2]
    detected = [False]
    sums = []
    for rnd, group in zip(rounds, ((victim, a), (victim, b), (a, b)), strict=True):
        ys = [_announce_mask(clients[p], group, xs[p], k, detected, rnd) for p in group]
        if all(y is not None for y in ys):
            sums.append(sum(y.astype(np.int64) for y in ys if y is not None) & (1 << k) - 1)
    if len(sums) < 3:
        return 0, detected[0]
    twice = (sums[0] + sums[1] - sums[2]) & (1 << k) - 1  # 2 x_v mod 2^k; inputs < 2^(k-3): halve exactly
    return int(np.array_equal(twice // 2, xs[victim])), detected[0]


def same_input(*, num: int, threshold: int, k: int = 16, seed: int = 0, victim: int = 0, weak: bool = False) -> Outcome:
    """The sets of ``two_sets`` in three rounds whose inputs repeat (one evaluation batch, three round tags)."""
    return two_sets(num=num, threshold=threshold, k=k, seed=seed, victim=victim, weak=weak,
                    rounds=("eval:0:3", "eval:1:3", "eval:2:3"), control=_NoInputRule)


def same_rows(*, num: int, threshold: int, k: int = 16, seed: int = 0, victim: int = 0, weak: bool = False,
              rows: int = 8, width: int = 4) -> Outcome:
    """A frozen bottom model (the server sends zero gradients): each sample's codes repeat, and the same samples
    come back in other batches of later epochs (other bytes: the input digest differs). v over {v, a}, then
    {v, b}, a and b over {a, b}, in three epochs: per-row sums solve v's rows. ``weak``: no per-row rule."""
    clients = _announced_clients(num, threshold, 0, SecAggClient)
    codes = {i: np.random.default_rng(seed + i).integers(0, 1 << (k - 3), size=(rows, width)) for i in clients}
    a, b = [p for p in clients if p != victim][:2]
    detected = [False]
    per_sample = []
    for epoch, group in enumerate(((victim, a), (victim, b), (a, b))):
        batch = np.roll(np.arange(rows), epoch + 1)  # the same samples, another order each epoch
        rnd, total = f"train:{epoch}:1", np.zeros(rows * width, dtype=np.int64)
        for p in group:
            try:
                clients[p].announce(round_id=rnd, members=group)
                y = clients[p].mask(codes[p][batch].ravel(), round_id=rnd, name=NAME, k=k,
                                    rows=None if weak else [f"train:{s}" for s in batch])
            except RevealRefused:
                detected[0] = True
                return 0, True
            total += y.astype(np.int64)
        by_row = (total & (1 << k) - 1).reshape(rows, width)
        per_sample.append(by_row[np.argsort(batch)])  # the server knows each batch's samples (it holds the labels)
    twice = (per_sample[0] + per_sample[1] - per_sample[2]) & (1 << k) - 1
    return int(np.array_equal(twice // 2, codes[victim])), detected[0]


RUN: dict[str, Callable[..., Outcome]] = {"small_set": small_set, "two_sets": two_sets,
                                          "same_input": same_input, "same_rows": same_rows}
