"""The party's release guard (``parties/vertical/release_guard.py``): its cap from its own config, its counts, its
refusal, its memory (checkpoint bytes, merges) and the events its worst-case ε composes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import strategies  # noqa: F401  (registers the strategies)
from parties.vertical.release_guard import (
    RESUME_ALLOWANCE,
    ReleaseGuard,
    cap_source,
    party_release_events,
    release_cap,
)
from vfl.core.errors import ConfigError, ReleaseRefused
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.accounting.events import GaussianEvent, PBMEvent
from vfl.runtime.node import state_from_bytes, state_to_bytes


def _cfg(strategy="pbm", **extra):
    return load_run_config({"strategy": strategy, "num_parties": 4, **extra})


@pytest.mark.parametrize("epochs,restarts", [(3, 0), (5, 3), (20, 7)])
def test_default_cap_is_the_epochs_plus_the_redos_the_config_grants(epochs, restarts):
    cfg = _cfg(train={"epochs": epochs, "max_restarts": restarts})
    assert release_cap(cfg) == epochs + restarts + RESUME_ALLOWANCE
    assert "train.epochs" in cap_source(cfg) and "privacy.max_epoch_attempts" in cap_source(cfg)


def test_explicit_cap_wins_and_is_validated_against_the_epochs():
    cfg = _cfg(train={"epochs": 4, "max_restarts": 9}, privacy={"max_epoch_attempts": 4})
    assert release_cap(cfg) == 4 and cap_source(cfg) == "privacy.max_epoch_attempts"
    with pytest.raises(ConfigError, match=r"privacy.max_epoch_attempts: got 3 below train.epochs 4") as err:
        _cfg(train={"epochs": 4}, privacy={"max_epoch_attempts": 3})
    assert err.value.key == "privacy.max_epoch_attempts"
    with pytest.raises(ConfigError, match="privacy.max_epoch_attempts"):
        _cfg(privacy={"max_epoch_attempts": 0})


def _guard(cap=2):
    return ReleaseGuard(party="party1", cap=cap, events=(GaussianEvent(sigma=4.0, sensitivity=2.0, count=1),),
                        delta=1e-5)


def test_a_forward_past_the_cap_is_refused_naming_the_party_and_the_count():
    g = _guard(cap=2)
    g.admit(np.array([0, 1, 2]), epoch=0, step=0)
    g.admit(np.array([2, 5]), epoch=1, step=3)  # grows to the largest index
    assert g.counts.tolist() == [1, 1, 2, 0, 0, 1] and g.most == 2
    with pytest.raises(ReleaseRefused, match=r"party party1 refused the training forward of round train:7:1: its "
                                             r"training sample 2 was already released 2 time\(s\), its cap is 2") as e:
        g.admit(np.array([4, 2, 0]), epoch=7, step=1)
    assert (e.value.party, e.value.sample, e.value.count, e.value.cap) == ("party1", 2, 2, 2)
    assert g.counts.tolist() == [1, 1, 2, 0, 0, 1]  # a refused forward counts nothing
    g.admit(np.array([0, 4]), epoch=7, step=2)  # other samples below the cap still go out
    assert g.counts.tolist() == [2, 1, 2, 0, 1, 1]
    again = pickle.loads(pickle.dumps(e.value))  # errors cross Ray actors
    assert type(again) is ReleaseRefused and str(again) == str(e.value)


def test_counts_survive_checkpoint_bytes_and_a_rollback_never_lowers_them():
    g = _guard(cap=5)
    for epoch in range(3):
        g.admit(np.arange(4), epoch=epoch, step=0)
    saved = state_from_bytes(state_to_bytes(g.state()))  # weights_only load, as a checkpoint is read
    fresh = _guard(cap=5)
    fresh.load_state(saved)
    assert fresh.counts.tolist() == [3, 3, 3, 3]
    old = _guard(cap=5)
    old.admit(np.arange(2), epoch=0, step=0)
    fresh.load_state(old.state())  # an older checkpoint: per sample the larger count stays
    assert fresh.counts.tolist() == [3, 3, 3, 3]
    fresh.merge(np.array([0, 0, 0, 0, 0, 4]))
    assert fresh.counts.tolist() == [3, 3, 3, 3, 0, 4]
    fresh.load_state({})  # a checkpoint without counts (an older run): nothing lost
    assert fresh.most == 4


def test_worst_case_epsilon_grows_with_the_cap_and_covers_the_count():
    small, large = _guard(cap=2), _guard(cap=6)
    small.admit(np.arange(3), epoch=0, step=0)
    a, b = small.report(), large.report()
    assert a["release_cap"] == 2 and a["releases_max"] == 1 and b["releases_max"] == 0
    assert 0 < a["epsilon_released"] < a["epsilon_worst_case"] < b["epsilon_worst_case"]
    assert b["epsilon_released"] == 0.0


def _strategy(name, **extra):
    cfg = load_run_config({"strategy": name, "num_parties": 4, **extra})
    return STRATEGIES.get(name, "strategy")(cfg)


def test_release_events_only_for_noised_releases_at_the_smallest_sum_the_party_accepts():
    from parties.secagg.party import SetupTerms

    assert party_release_events(_strategy("npq")) == ()
    assert party_release_events(_strategy("npq+secagg")) == ()
    (ldp,) = party_release_events(_strategy("ldp"))
    assert isinstance(ldp, GaussianEvent) and ldp.count == 1
    pbm = _strategy("pbm", params={"threshold": 3})
    (charged, *_) = pbm.privacy_events(epoch=0)
    terms = SetupTerms(parties=(1, 2, 3, 4), threshold=3, colluders=0, mode="semi-honest")
    (own,) = party_release_events(pbm, terms=terms)
    assert isinstance(own, PBMEvent) and charged.num_parties == 4 and own.num_parties == 3  # max(t, 2) = 3
    (plain,) = party_release_events(_strategy("pbm", params={"secagg": False}))
    assert plain.num_parties == 1


def test_with_bottom_dp_each_release_brings_one_dp_sgd_step_into_the_worst_case():
    from vfl.privacy.accounting.events import DPSGDEvent

    dp = {"bottom_dp": {"noise_multiplier": 1.0, "max_grad_norm": 1.0}}
    release, step = party_release_events(_strategy("ldp", privacy=dp))
    assert isinstance(release, GaussianEvent) and isinstance(step, DPSGDEvent) and step.count == 1
    alone = ReleaseGuard(party="p", cap=5, events=(release,), delta=1e-5).report()["epsilon_worst_case"]
    both = ReleaseGuard(party="p", cap=5, events=(release, step), delta=1e-5).report()["epsilon_worst_case"]
    assert both > alone
