"""DP-SGD events, their composition with the release events into one end-to-end ε, and the
``epsilon_scope`` string derived from the kinds of events composed."""

from __future__ import annotations

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from vfl.core.errors import ConfigError
from vfl.engine.schema import BottomDPConfig
from vfl.privacy import (
    DEFAULT_ORDERS,
    SCOPE_END_TO_END,
    SCOPE_GAUSSIAN,
    SCOPE_PBM,
    Accountant,
    DPSGDEvent,
    GaussianEvent,
    PBMEvent,
    bottom_dp_events,
    epsilon_scope,
    event_from_dict,
    event_to_dict,
)
from vfl.privacy.accounting.pbm_rdp import pbm_rdp

EPOCHS, DIM, DELTA = 5, 16, 1e-5
PBM = PBMEvent(b=16, beta=0.25, num_parties=5, dim=DIM, count=1)
SGD = DPSGDEvent(noise_multiplier=1.0, max_grad_norm=1.0, count=1)


def _acc(*events, times=EPOCHS):
    acc = Accountant()
    for _ in range(times):
        for ev in events:
            acc.record(ev)
    return acc


def test_dpsgd_event_is_a_gaussian_with_replace_one_sensitivity():
    ev = DPSGDEvent(noise_multiplier=1.5, max_grad_norm=0.5)
    assert ev.sigma == 0.75 and ev.sensitivity == 1.0
    for key, kw in (("noise_multiplier", {"noise_multiplier": 0.0, "max_grad_norm": 1.0}),
                    ("max_grad_norm", {"noise_multiplier": 1.0, "max_grad_norm": -1.0}),
                    ("count", {"noise_multiplier": 1.0, "max_grad_norm": 1.0, "count": 0})):
        with pytest.raises(ConfigError) as info:
            DPSGDEvent(**kw)
        assert info.value.key == key


def test_dpsgd_alone_matches_dp_accountings_gaussian_at_half_the_noise_multiplier():
    """Independent check through dp_accounting's public API: sensitivity 2C means noise multiplier nm/2."""
    ref = RdpAccountant(orders=list(DEFAULT_ORDERS))
    ref.compose(dp_event.GaussianDpEvent(noise_multiplier=0.5), count=EPOCHS)
    eps, _ = _acc(SGD).epsilon(DELTA)
    assert eps == pytest.approx(ref.get_epsilon(DELTA), rel=1e-9)


def test_end_to_end_epsilon_is_the_sum_of_both_curves_and_larger_than_each_part():
    orders = np.array(DEFAULT_ORDERS)
    pbm_curve = EPOCHS * DIM * pbm_rdp(b=16, beta=0.25, num_parties=5, orders=orders)
    sgd_curve = EPOCHS * orders / (2 * 0.5**2)  # Gaussian RDP α/(2·nm²) at nm = σ/Δ = 1/2
    by_hand, _ = compute_epsilon(list(orders), list(pbm_curve + sgd_curve), DELTA)
    both = _acc(PBM, SGD)
    eps, _ = both.epsilon(DELTA)
    assert eps == pytest.approx(by_hand, rel=1e-9)
    release_only, sgd_only = _acc(PBM).epsilon(DELTA)[0], _acc(SGD).epsilon(DELTA)[0]
    assert eps > release_only and eps > sgd_only
    assert both.scope() == SCOPE_END_TO_END


def test_ledger_merges_alternating_epochs_and_round_trips_through_json():
    acc = _acc(PBM, SGD, times=4)
    assert [(e.kind, e.count) for e in acc.events] == [("pbm", 4), ("dpsgd", 4)]
    back = Accountant.from_json(acc.to_json())
    assert back.events == acc.events and back.scope() == SCOPE_END_TO_END
    np.testing.assert_array_equal(back.rdp(), acc.rdp())
    assert event_from_dict(event_to_dict(SGD)) == SGD
    with pytest.raises(ConfigError, match="accountant.events.dpsgd"):
        event_from_dict({"kind": "dpsgd", "noise_multiplier": 1.0})


def test_scope_is_derived_from_the_event_kinds():
    gauss = GaussianEvent(sigma=2.0, sensitivity=8.0)
    assert epsilon_scope([]) == ""
    assert epsilon_scope([PBM]) == SCOPE_PBM == "per-release feature privacy (PBM-VFL Thm 6.1)"
    assert epsilon_scope([gauss]) == SCOPE_GAUSSIAN
    assert epsilon_scope([gauss, SGD]) == epsilon_scope([SGD, PBM]) == SCOPE_END_TO_END
    assert epsilon_scope([SGD]) != SCOPE_END_TO_END  # DP-SGD alone leaves the releases unaccounted
    assert "PBM-VFL Thm 6.1" in epsilon_scope([PBM, gauss]) and "Gaussian" in epsilon_scope([PBM, gauss])


def test_bottom_dp_events_follow_the_config():
    assert bottom_dp_events(None) == []
    assert bottom_dp_events(BottomDPConfig(noise_multiplier=2.0, max_grad_norm=0.1)) == [
        DPSGDEvent(noise_multiplier=2.0, max_grad_norm=0.1, count=1)]
