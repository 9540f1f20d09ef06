"""The secagg_attacks benchmark writes the attack x mode table the issue asks for (cost runs are
measured by hand: they train the demo over Ray)."""

from __future__ import annotations

import json

from simulations.benchmarks.secagg_attacks import main
from vfl.schema import load_run_config


def test_attack_table_json(tmp_path, capsys) -> None:
    out = main(["--out", str(tmp_path), "--no-cost"])
    saved = json.loads((tmp_path / "secagg_attacks.json").read_text())
    assert saved == json.loads(json.dumps(out)) and (saved["parties"], saved["threshold"]) == (4, 2)
    rows = {(r["attack"], r["mode"], r["auth"]): r for r in saved["results"]}
    attacks = {"key_swap", "single_survivor", "redeclared_dropout", "late_survivor"}
    assert {a for a, _, _ in rows} == attacks
    assert load_run_config({"strategy": "pbm"}).params.secagg_mode == "semi-honest"  # the default
    for attack in attacks:
        assert rows[(attack, "malicious", True)]["inputs_opened"] == 0
        assert rows[(attack, "malicious", True)]["detected"] is True
        if attack != "late_survivor":  # the default mode with auth on stops the other three
            assert rows[(attack, "semi-honest", True)]["inputs_opened"] == 0
    assert rows[("key_swap", "semi-honest", False)]["inputs_opened"] == 4  # unsigned keys: every input
    assert rows[("late_survivor", "semi-honest", True)]["inputs_opened"] == 1  # no consistency check
    assert "late_survivor" in capsys.readouterr().out
