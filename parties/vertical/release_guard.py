"""A party's own bound on how often it releases each training sample, whatever the server asks.

The accountant charges the releases the driver's epochs make (and every failed attempt, through the
write-ahead ledger). A lying server can do more: answer each step with a training forward request of
its choosing (any epoch and step, no gradient), and an honest party would answer every one with fresh
noise. So each party counts, on its own side, the training forwards it answered per training sample
index (one forward releases each sample of its batch once) and refuses, with ``ReleaseRefused``, a
forward that would take any sample past its cap. The cap comes from the party's OWN run config, never
from a message: ``privacy.max_epoch_attempts``, or ``train.epochs + train.max_restarts +
RESUME_ALLOWANCE`` (resumes are not bounded by anything else in the config).

What it counts and what it does not:

- every training forward counts, seeded noise included (a bit-identical repeat reveals nothing new,
  but the party cannot tell a repeat of the same state from a new one cheaply: conservative);
- evaluation forwards release test samples (``PassiveParty.on_eval``: ``x_test``, by message kind): counted
  per test sample index on their own (``eval_counts``) against the same cap, in the checkpoint and the
  report (``eval_releases_max``); a party binds no ID to both splits (``parties/vertical/psi.py``), so a
  sample's releases are those of its one split;
- the counts survive a restart of the party's host (``Node.keep_from``: the rebuilt node keeps the
  old one's counts) and ride in the checkpoint (``state``); loading a checkpoint keeps, per sample, the
  larger of what the node holds and what the checkpoint says. Limit: a resume or a replaced (dead)
  host process starts from the checkpoint's counts, which the run directory's holder could roll back;
  the releases made after the newest checkpoint are then not in the party's count (the engine's
  write-ahead ledger still charges them). Parties have no directory of their own here to keep them in.

The party's worst-case ε (``report``): its release events composed ``cap`` times, with SecAgg at the
smallest sum it accepts (max(t, 2, c + 2) parties, less the declared colluders), and with ``privacy.bottom_dp`` as many
DP-SGD steps of its bottom (a gradient applies only to the pending forward, so a sample is in at most one
step per answered forward): what it guarantees whatever the server asks.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import torch

from vfl.core.errors import ReleaseRefused
from vfl.core.logs import get_logger
from vfl.privacy.accounting.events import DPSGDEvent, GaussianEvent, PBMEvent
from vfl.runtime.message import round_tag
from vfl.secagg.consistency import quorum

RESUME_ALLOWANCE = 2  # epoch attempts the default cap grants resumes (nothing else in a config bounds them)
STATE_KEY = "release_counts"
EVAL_KEY = "release_counts_eval"  # the test samples' counts (evaluation forwards)
CAP_KEY = "privacy.max_epoch_attempts"
log = get_logger(__name__)


def release_cap(cfg: Any) -> int:
    """Releases of one training sample a party allows over the run: ``privacy.max_epoch_attempts``, else
    ``train.epochs + train.max_restarts + RESUME_ALLOWANCE`` (the run's epochs and the redos its config grants)."""
    given = getattr(cfg.privacy, "max_epoch_attempts", None)
    if given is not None:
        return int(given)
    return int(cfg.train.epochs) + int(cfg.train.max_restarts) + RESUME_ALLOWANCE


def cap_source(cfg: Any) -> str:
    """Where ``release_cap`` came from, in words (summary and logs)."""
    if getattr(cfg.privacy, "max_epoch_attempts", None) is not None:
        return CAP_KEY
    return (f"train.epochs {cfg.train.epochs} + train.max_restarts {cfg.train.max_restarts} + "
            f"{RESUME_ALLOWANCE} resumes (default of {CAP_KEY})")


def party_release_events(strategy: Any, *, terms: Any = None) -> tuple[Any, ...]:
    """The events of ONE release of a sample by one party (count 1), at the worst noise it agrees to: with
    SecAgg (``terms``: the party's own ``SetupTerms``) a sum of the smallest set it reveals for, max(t, 2, c + 2)
    parties, less the declared colluders; with ``privacy.bottom_dp`` also the one DP-SGD step of its bottom that
    the answered forward allows. Empty when the party's releases are not noised (npq...): no ε, no guard."""
    cfg = strategy.cfg
    out: list[Any] = []
    for e in strategy.privacy_events(epoch=0):
        if isinstance(e, PBMEvent):
            honest = getattr(strategy, "honest_parties", None)
            if terms is not None and honest is not None:
                e = dataclasses.replace(e, num_parties=min(e.num_parties, honest(cfg, quorum(terms.threshold, terms.colluders))))
            out.append(dataclasses.replace(e, count=1))
        elif isinstance(e, GaussianEvent | DPSGDEvent):
            out.append(dataclasses.replace(e, count=1))
    return tuple(out) if any(not isinstance(e, DPSGDEvent) for e in out) else ()


def guard_for(strategy: Any, party: Any) -> ReleaseGuard | None:
    """The guard of ``party`` (a passive party node) from its own run config (``strategy.cfg``) and SecAgg terms;
    None when its releases are not noised."""
    events = party_release_events(strategy, terms=getattr(party, "terms", None))
    if not events:
        return None
    cfg = strategy.cfg
    return ReleaseGuard(party=party.spec.name, cap=release_cap(cfg), events=events, delta=float(cfg.privacy.delta),
                        source=cap_source(cfg))


@functools.lru_cache(maxsize=32)
def _epsilon(events: tuple[Any, ...], releases: int, delta: float) -> float:
    """ε after ``releases`` releases of one sample (cached: every party of a host asks the same)."""
    from vfl.privacy.accounting.accountant import Accountant

    if releases <= 0:
        return 0.0
    acc = Accountant()
    for e in events:
        acc.record(dataclasses.replace(e, count=releases))
    return float(acc.epsilon(delta)[0])


class ReleaseGuard:
    """Per training and per test sample: the forwards this party answered; refuses one past ``cap``."""

    def __init__(self, *, party: str, cap: int, events: tuple[Any, ...], delta: float, source: str = CAP_KEY) -> None:
        self.party, self.cap, self.events, self.delta, self.source = party, int(cap), events, delta, source
        self.counts = np.zeros(0, dtype=np.int64)  # training samples: grown to the largest index seen
        self.eval_counts = np.zeros(0, dtype=np.int64)  # test samples (evaluation forwards)

    def admit(self, ids: np.ndarray, *, epoch: int, step: int, phase: str = "train") -> None:
        """Count one release of each sample in ``ids`` (a training forward; ``phase="eval"``: test samples of an
        evaluation forward), or raise ``ReleaseRefused`` naming the party, the round and the sample at its cap
        (nothing counted then)."""
        ids = np.asarray(ids, dtype=np.int64)
        if ids.size == 0:
            return
        train = phase == "train"
        counts = self.counts if train else self.eval_counts
        top = int(ids.max()) + 1
        if top > counts.size:
            counts = np.concatenate([counts, np.zeros(top - counts.size, dtype=np.int64)])
        seen = counts[ids]
        worst = int(seen.argmax())
        if int(seen[worst]) >= self.cap:
            raise ReleaseRefused(self.party, round_tag(epoch, step, "train" if train else "eval"), int(ids[worst]),
                                 int(seen[worst]), self.cap, "train" if train else "eval")
        np.add.at(counts, ids, 1)
        if train:
            self.counts = counts
        else:
            self.eval_counts = counts

    @property
    def most(self) -> int:
        """Releases of this party's most-released sample so far (training or test)."""
        return max(int(self.counts.max()) if self.counts.size else 0, self.eval_most)

    @property
    def eval_most(self) -> int:
        """Releases of this party's most-released test sample (evaluation forwards)."""
        return int(self.eval_counts.max()) if self.eval_counts.size else 0

    # ---- memory across restarts and checkpoints -------------------------------------------------
    def merge(self, counts: np.ndarray, eval_counts: np.ndarray | None = None) -> None:
        """Keep, per sample, the larger of what this guard holds and ``counts`` (``eval_counts``: of the test
        samples), from a checkpoint or the node a restart replaced: a rolled-back checkpoint never lowers what
        the node remembers."""
        self.counts = _larger(self.counts, counts)
        if eval_counts is not None:
            self.eval_counts = _larger(self.eval_counts, eval_counts)

    def state(self) -> dict[str, Any]:
        return {STATE_KEY: torch.from_numpy(self.counts.copy()), EVAL_KEY: torch.from_numpy(self.eval_counts.copy())}

    def load_state(self, state: dict[str, Any]) -> None:
        saved, saved_eval = state.get(STATE_KEY), state.get(EVAL_KEY)
        if saved is not None:
            self.merge(_numpy(saved), None if saved_eval is None else _numpy(saved_eval))

    # ---- what the party guarantees -----------------------------------------------------------------
    def report(self) -> dict[str, Any]:
        """The party's own numbers: its cap and where it came from, its most-released sample, and the ε of
        its release events composed over the cap (whatever the server asks) and over its count so far."""
        out = {"party": self.party, "release_cap": self.cap, "cap_source": self.source, "releases_max": self.most,
               "eval_releases_max": self.eval_most,
               "epsilon_worst_case": _epsilon(self.events, self.cap, self.delta),
               "epsilon_released": _epsilon(self.events, self.most, self.delta), "delta": self.delta}
        log.info("%s: at most %d releases of a training sample (%s): epsilon <= %.4g whatever the server asks "
                 "(%d so far: %.4g)", self.party, self.cap, self.source, out["epsilon_worst_case"], self.most,
                 out["epsilon_released"])
        return out


def _larger(mine: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Per index, the larger of two count arrays (the shorter padded with zeros)."""
    other = np.asarray(other, dtype=np.int64).ravel()
    out = np.zeros(max(other.size, mine.size), dtype=np.int64)
    out[:mine.size] = mine
    out[:other.size] = np.maximum(out[:other.size], other)
    return out


def _numpy(saved: Any) -> np.ndarray:
    return saved.numpy() if isinstance(saved, torch.Tensor) else np.asarray(saved)


def party_reports(grid: Any) -> dict[str, Any]:
    """Summary keys from each party still in the run, as it reports them itself (``release_report``);
    empty when no party guards its releases (npq...)."""
    calls = [(grid.group_of[pid], pid, "release_report") for pid in grid.party_ids]
    reports = [r for r in grid.transport.call_all(calls) if r is not None]  # the hosts answer concurrently
    if not reports:
        return {}
    return {"party_release_cap": max(r["release_cap"] for r in reports),
            "party_release_cap_source": reports[0]["cap_source"],
            "party_releases_max": max(r["releases_max"] for r in reports),
            "party_eval_releases_max": max(r.get("eval_releases_max", 0) for r in reports),
            "party_epsilon_worst_case": max(r["epsilon_worst_case"] for r in reports),
            "party_epsilon_released": max(r["epsilon_released"] for r in reports)}
