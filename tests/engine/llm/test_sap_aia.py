"""SAP's attack readings: the tests through in-process engine runs."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.engine.llm.test_sap_nodes import ToySentiment, run

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_sap_reports_the_attackers_reading_the_length_baseline_and_intervals():
    """ToySentiment's source attribute is the text's length (5 or 11 filler words). Under heavy
    noise (η = 1, snapped to random tokens) the old pooled linear probe reads near chance; the
    attacker given the lengths reads it off, and the length baseline names why."""
    result, vendor, customer = run({"split": 0, "eta": 1.0, "aia_labeled_frac": 0.5},
                                   source=ToySentiment(num_train=200, num_test=16))
    s = result.summary
    last = {k: s.get(k) for k in ("aia_acc", "aia_linear_acc", "aia_length_acc", "ep_aia", "ep_aia_ci_low",
                                  "ep_aia_ci_high", "ep_eia", "ep_eia_ci_low", "ep_eia_ci_high", "aia_targets")}
    assert last["aia_targets"] == 100
    assert last["aia_length_acc"] > 0.95 and last["aia_acc"] > 0.95  # the reading a vendor can really get
    assert last["aia_linear_acc"] < last["aia_acc"] - 0.2  # control: the old probe under-read it
    assert last["ep_aia_ci_low"] <= last["ep_aia"] <= last["ep_aia_ci_high"]
    assert last["ep_eia_ci_low"] <= last["ep_eia"] <= last["ep_eia_ci_high"]
    assert last["ep_eia"] == 1.0  # η = 1: nothing recovered (the interval is [1, 1])
    assert s["aia_probe"] in (0, 2, 3)  # the attacker chose a probe that uses the lengths
