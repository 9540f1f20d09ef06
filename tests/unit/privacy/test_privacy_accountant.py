"""Accountant: composition, dp_accounting conversion and Gaussian curve, ledger JSON, report."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from dp_accounting import dp_event
from dp_accounting.rdp import RdpAccountant, compute_epsilon

from vfl.core.errors import ConfigError
from vfl.privacy import (
    DEFAULT_ORDERS,
    Accountant,
    GaussianEvent,
    PBMEvent,
    account_report,
    event_rdp,
    gaussian_rdp,
    ldp_sigma,
)
from vfl.privacy.accounting.pbm_rdp import pbm_rdp

PBM = PBMEvent(b=16, beta=0.1, num_parties=4, dim=16, count=1)
GAUSS = GaussianEvent(sigma=3.0, sensitivity=2.0 * math.sqrt(16), dim=16, count=1)


def test_epsilon_is_dp_accountings_conversion_of_the_curve():
    acc = Accountant()
    acc.record(PBM)
    acc.record(GAUSS)
    eps, order = acc.epsilon(1e-5)
    ref_eps, ref_order = compute_epsilon(list(DEFAULT_ORDERS), list(acc.rdp()), 1e-5)
    assert eps == pytest.approx(ref_eps, rel=1e-12) and order == ref_order
    assert order in DEFAULT_ORDERS


def test_pbm_curve_is_count_times_dim_times_per_coordinate():
    orders = np.array(DEFAULT_ORDERS)
    per_coord = pbm_rdp(b=16, beta=0.1, num_parties=4, orders=orders)
    ev = PBMEvent(b=16, beta=0.1, num_parties=4, dim=16, count=7)
    np.testing.assert_allclose(event_rdp(ev, orders), 7 * 16 * per_coord, rtol=1e-12)


def test_composition_is_linear_in_count_and_merges_repeats():
    once, thrice, merged = Accountant(), Accountant(), Accountant()
    once.record(PBM)
    thrice.record(PBMEvent(b=16, beta=0.1, num_parties=4, dim=16, count=3))
    for _ in range(3):
        merged.record(PBM)
    np.testing.assert_allclose(thrice.rdp(), 3 * once.rdp(), rtol=1e-12)
    np.testing.assert_allclose(merged.rdp(), thrice.rdp(), rtol=1e-12)
    assert merged.events == thrice.events  # one ledger entry with count 3
    merged.record(GAUSS)
    merged.record(PBM)  # merged into the matching entry, not only the last one: composition commutes
    assert [e.count for e in merged.events] == [4, 1]


def test_gaussian_curve_matches_the_closed_form_and_the_library():
    orders = np.array(DEFAULT_ORDERS)
    nm = GAUSS.noise_multiplier
    np.testing.assert_allclose(gaussian_rdp(noise_multiplier=nm, orders=orders), orders / (2 * nm**2), rtol=1e-12)
    acc = Accountant()
    acc.record(GaussianEvent(sigma=3.0, sensitivity=8.0, count=25))
    lib = RdpAccountant(orders=list(DEFAULT_ORDERS))
    lib.compose(dp_event.GaussianDpEvent(noise_multiplier=3.0 / 8.0), count=25)
    eps, order = acc.epsilon(1e-6)
    lib_eps, lib_order = lib.get_epsilon_and_optimal_order(1e-6)
    assert eps == pytest.approx(lib_eps, rel=1e-12) and order == lib_order


def test_ledger_json_round_trip():
    acc = Accountant(orders=[1.5, 2.0, 8.0, 64.0])
    acc.record(PBMEvent(b=8, beta=0.25, num_parties=3, dim=4, count=2))
    acc.record(GAUSS)
    text = acc.to_json()
    json.loads(text)  # valid JSON
    for data in (text, json.loads(text)):
        back = Accountant.from_json(data)
        assert back.events == acc.events
        np.testing.assert_array_equal(back.orders, acc.orders)
        np.testing.assert_array_equal(back.rdp(), acc.rdp())
        assert back.epsilon(1e-5) == acc.epsilon(1e-5)
    # a resumed ledger keeps composing where it stopped
    back.record(GAUSS)
    assert back.events[-1].count == 2


def test_from_json_rejects_foreign_data():
    with pytest.raises(ConfigError):
        Accountant.from_json({"format": 99, "orders": [2.0], "events": []})
    with pytest.raises(ConfigError) as info:
        Accountant.from_json({"format": 1, "orders": [2.0], "events": [{"kind": "laplace"}]})
    assert info.value.key == "accountant.events.kind"


def test_empty_ledger_and_bad_inputs():
    acc = Accountant()
    assert np.all(acc.rdp() == 0)
    assert acc.epsilon(1e-5)[0] == 0.0
    with pytest.raises(ConfigError) as info:
        acc.epsilon(0.0)
    assert info.value.key == "delta"
    with pytest.raises(ConfigError) as info:
        acc.record("pbm")  # type: ignore[arg-type]
    assert info.value.key == "event"


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"b": 4, "beta": 0.1, "num_parties": 0}, "num_parties"),
    ({"b": 4, "beta": 0.1, "num_parties": 2, "dim": 0}, "dim"),
    ({"b": 4, "beta": 0.1, "num_parties": 2, "count": 0}, "count"),
    ({"b": 0, "beta": 0.1, "num_parties": 2}, "b"),
])
def test_pbm_event_validation(kwargs, key):
    with pytest.raises(ConfigError) as info:
        PBMEvent(**kwargs)
    assert info.value.key == key


def test_gaussian_event_validation():
    with pytest.raises(ConfigError) as info:
        GaussianEvent(sigma=1.0, sensitivity=0.0)
    assert info.value.key == "sensitivity"
    with pytest.raises(ConfigError) as info:
        GaussianEvent(sigma=-1.0, sensitivity=1.0)
    assert info.value.key == "sigma"


# ---- report (``vfl account``) ----

def test_report_pbm_spec_example():
    rep = account_report(mechanism="pbm", b=16, beta=0.25, parties=10, alpha=2.0)
    assert rep["rdp"] == pytest.approx(2.4315, abs=5e-4)
    assert rep["pure_dp_eps"] == pytest.approx(16 * math.log(3))
    assert rep["rdp_cap"] == pytest.approx(16 * math.log(3))
    est = rep["gaussian_style_estimate"]
    assert est["value"] == pytest.approx(1.6) and est["is_bound"] is False
    assert "epsilon" not in rep and "theorem_6_1" not in rep
    json.dumps(rep)


def test_report_with_run_shape_matches_the_accountant():
    rep = account_report(mechanism="pbm", b=8, beta=0.15, parties=4, alpha=2.0, epochs=50, batch=100,
                         dataset_size=1000, dim=16, delta=1e-5, c0=1.0)
    acc = Accountant()
    acc.record(PBMEvent(b=8, beta=0.15, num_parties=4, dim=16, count=50))
    eps, order = acc.epsilon(1e-5)
    assert rep["epsilon"] == pytest.approx(eps) and rep["order"] == order and rep["delta"] == 1e-5
    thm = rep["theorem_6_1"]
    assert thm["iterations"] == pytest.approx(500)
    assert thm["final"] == pytest.approx(thm["per_iteration"] * 50)
    assert rep["theorem_6_2"]["sample_per_iteration"] > thm["per_iteration"]
    json.dumps(rep)


def test_report_ldp_uses_the_gaussian_of_the_paper():
    rep = account_report(mechanism="ldp", b=16, beta=0.25, parties=10, alpha=2.0, c=2.0, epochs=10, dim=4,
                         delta=1e-5)
    assert rep["sigma"] == pytest.approx(ldp_sigma(b=16, beta=0.25, num_parties=10, c=2.0))
    assert rep["rdp"] == pytest.approx(2.0 * 16 * 0.25**2 / 10)  # alpha*b*beta^2/M for any c
    acc = Accountant()
    acc.record(GaussianEvent(sigma=rep["sigma"], sensitivity=2 * 2.0 * 2.0, count=10))
    assert rep["epsilon"] == pytest.approx(acc.epsilon(1e-5)[0])


@pytest.mark.parametrize(("kwargs", "key"), [
    ({"mechanism": "laplace"}, "mechanism"),
    ({"alpha": 1.0}, "alpha"),
    ({"parties": 0}, "parties"),
    ({"epochs": 10, "delta": 1e-5}, "dim"),
    ({"epochs": 10, "dim": 4}, "delta"),
    ({"batch": 10}, "dataset_size"),
])
def test_report_errors_name_the_key(kwargs, key):
    args = {"mechanism": "pbm", "b": 4, "beta": 0.1, "parties": 3, "alpha": 2.0, **kwargs}
    with pytest.raises(ConfigError) as info:
        account_report(**args)
    assert info.value.key == key
