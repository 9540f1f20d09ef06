"""The envelope benchmark (#29.2): the tests through in-process engine runs."""

from __future__ import annotations

import json

from simulations.benchmarks.envelope import main


def test_demo_run_reads_every_counted_message(tmp_path) -> None:
    out = main(["--out", str(tmp_path), "--epochs", "1"])
    saved = json.loads((tmp_path / "envelope.json").read_text())
    assert saved == json.loads(json.dumps(out))
    assert saved["captured_messages"] == saved["messages"] > 0
    assert saved["info_bound_bytes"] == sum(saved["info_bound_parts"].values())
    assert saved["wire_bytes"] > saved["info_bound_bytes"] and saved["ratio"] > 1
    assert saved["learning_floor"] <= saved["ratio_learning"]
    assert sum(saved["envelope_parts"].values()) == saved["wire_bytes"] - saved["info_bound_bytes"]
    assert min(saved["envelope_parts"].values()) > 0
    for dirs in saved["per_kind"].values():
        for row in dirs.values():
            assert row["captured_messages"] == row["messages"] and row["wire_bytes"] >= row["info_bound_bytes"]
            assert row["envelope_parts"]["records"] >= 0
    assert (tmp_path / "envelope.md").read_text().startswith("| kind |")
