"""Runs for the release audit (``tests/support/release_audit.py``): a tiny in-process config, an engine over a
run directory, and the old code the controls put back."""

from __future__ import annotations

from typing import Any

import pytest

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.core.errors import PartyFailure
from vfl.engine.engine import Engine
from vfl.engine.recovery import Recovery
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.faults import InjectedCrash
from vfl.runtime.transport.inprocess import InProcessTransport

SOURCE = BlobSource(num_parties=3, num_train=240, num_test=60)
STEPS = 10  # 240 / 24


def tiny_cfg(strategy="pbm", *, params=None, train=None, privacy=None, **extra):
    """Three parties, t = 2. privacy.colluders: 0 unless given: these runs drop a party (skip-party) and go on with
    two, which parties guarding against t - 1 = 1 undeclared colluder refuse (sets of >= 3)."""
    params = {"b": 8, **(params or {})} if strategy in ("pbm", "ldp") else (params or {})
    return load_run_config({"num_parties": 3, "seed": 4, "strategy": strategy, "params": params,
                            "model": {"embed_dim": 4, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 3, "batch_size": 24, "lr": 0.05, **(train or {})},
                            "privacy": {"colluders": 0, **(privacy or {})}, **extra})


def engine_at(path, cfg, *, resume=False):
    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(cfg.to_dict())
    return Engine(cfg, InProcessTransport(), SOURCE, run_dir=run_dir, progress=False)


def run(path, cfg, *, resume=False, fails=False):
    engine = engine_at(path, cfg, resume=resume)
    if fails:
        with pytest.raises((PartyFailure, InjectedCrash)):
            engine.run(resume=resume)
    else:
        engine.run(resume=resume)
    return engine



MODES = ["semi-honest", "malicious", "announced"]


def old_parties_summed(self, epoch, default):
    """Before: the write-ahead record of an epoch not started yet said M parties, even after a dropout."""
    return self.summed.get(epoch, default)


def old_label_privacy(self):
    """Before: the label ε charged one epoch per restart or resume recorded in the newest checkpoint."""
    from vfl.privacy.defenses import label_privacy

    redone = len(self.recovery.restarts) + len(self.recovery.resumes)
    out = label_privacy(self.cfg.defenses, epochs=self.cfg.train.epochs + redone, delta=self.cfg.privacy.delta)
    if redone and "epsilon_label" in out:
        out["label_epochs_charged"] = self.cfg.train.epochs + redone
    return out


class OldRecovery(Recovery):
    """Before: ``restarts`` and ``resumes`` as of the newest checkpoint (saved in it), plus what this process
    itself added; the attempts of a process that died before its next checkpoint were lost."""

    def __init__(self, cfg: Any, ledger: Any = None) -> None:
        super().__init__(cfg, ledger)
        self.seen = len(self.ledger.restores)  # records of earlier processes: the old object never saw them
        self.loaded: dict[str, list[dict[str, Any]]] = {"restarts": [], "resumes": []}

    def _mine(self, key: str) -> list[dict[str, Any]]:
        reason = key[:-1]  # restart, resume
        earlier = sum(r.get("reason") == reason for r in self.ledger.restores[:self.seen])
        return self.loaded[key] + getattr(super(), key)[earlier:]

    @property
    def restarts(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return self._mine("restarts")

    @property
    def resumes(self) -> list[dict[str, Any]]:  # type: ignore[override]
        return self._mine("resumes")

    def state(self) -> dict[str, Any]:
        return {**super().state(), "restarts": self.restarts, "resumes": self.resumes}

    def load_state(self, state: dict[str, Any] | None) -> None:
        super().load_state(state)
        if state:
            self.loaded = {k: list(state.get(k, [])) for k in self.loaded}
