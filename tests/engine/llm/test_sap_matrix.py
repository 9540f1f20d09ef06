"""The attack × defense matrix for the split-LLM token defenses (``matrix --family sap``): SAP's
customer with no defense (the control), dχ noise and SanText, each run attacked by the vendor's
nearest-neighbour EIA and learned inverter, scored with VFLAIR's DCS like the vertical matrix."""

from __future__ import annotations

import json

import pytest

from simulations.benchmarks import matrix

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def test_the_sap_family_runs_every_token_defense_against_the_vendors_inversions(tiny_lm, tmp_path):
    bert = tiny_lm("bert")
    doc = matrix.main(["--family", "sap", "--out", str(tmp_path), "--set", f"params.model_dir={bert}",
                       "--set", "data.train_subsample=32", "--set", "data.test_subsample=16",
                       "--set", "params.eia_samples=4", "--set", "params.inverter_samples=64"])
    assert doc["family"] == "sap" and not doc["skipped"]
    cell = {(r["defense"], r["strength"], r["attack"]): r["value"] for r in doc["rows"]}
    grid = {(d, s) for d, s, _ in matrix.sap_points(full=False)}
    assert {(d, s) for d, s, _ in cell} == grid and len(grid) == 5
    for attack in ("embedding_inversion", "learned_inversion"):
        assert cell[("none", None, attack)] == 1.0  # control: split 0 without noise names every token
        assert cell[("dchi", 20.0, attack)] < 0.2
        assert cell[("santext", 14.0, attack)] < 0.5
    assert set(doc["dcs"]) == {"none", "dchi", "santext"}
    assert json.loads((tmp_path / "matrix.json").read_text())["rows"] == doc["rows"]
    assert (tmp_path / "matrix.png").exists() and (tmp_path / "frontier.png").exists()
