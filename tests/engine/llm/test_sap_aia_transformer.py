"""SAP's fifth AIA probe, the paper's attacker: the tests through in-process engine runs."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from tests.engine.llm.test_sap_nodes import ToySentiment, run
from vfl.attacks.attribute import (
    PROBES,
)

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.mark.parametrize("epochs", [0, 1])
def test_sap_summary_names_the_winning_probe_and_the_switch_turns_the_transformer_off(epochs):
    result, vendor, _ = run({"split": 0, "eta": None, "aia_finetune_epochs": epochs},
                            source=ToySentiment(num_train=60, num_test=8))
    s = result.summary
    assert s["aia_probe_name"] == PROBES[s["aia_probe"]]
    assert (s["aia_transformer_acc"] is not None) == bool(epochs)
    assert bool(vendor.obs_last) == bool(epochs)  # off: the vendor does not even keep the token rows
    from pathlib import Path

    from simulations.report.llm import llm_leak_attack
    from simulations.report.run import RunArtifacts

    aia = [r for r in llm_leak_attack(RunArtifacts(Path("."), None, s)) if r.name == "attribute_inference"][0]
    assert aia.value == s["aia_acc"] and aia.to_json()["aia_probe_name"] == s["aia_probe_name"]  # vfl report shows it
