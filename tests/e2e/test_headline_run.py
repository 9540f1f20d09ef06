"""`vfl run`'s final JSON line and epoch lines carry the run's headline keys: a label_rr run shows its
``epsilon_label`` (1.0), not only the feature ε of the strategy."""

from __future__ import annotations

import json

from simulations.cli.main import main


def test_label_rr_run_shows_epsilon_label_on_every_line(tmp_path, capsys) -> None:
    out = tmp_path / "rr"
    assert main(["run", "demo", "--out", str(out), "--transport", "inprocess", "--no-progress",
                 "--set", "train.epochs=2", "--set", "params.b=8",
                 "--set", "defenses=[{kind: label_rr, epsilon: 1.0}]"]) == 0
    lines = capsys.readouterr().out.splitlines()
    final = json.loads(next(x for x in lines if x.startswith("{")))
    assert final["epsilon_label"] == 1.0 and final["epsilon"] > 1.0  # both scopes, side by side
    epochs = [x for x in lines if x.startswith("epoch ")]
    assert len(epochs) == 2 and all(" epsilon_label 1 " in x for x in epochs), epochs
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["epsilon_label"] for r in rows] == [1.0, 1.0]  # randomized once: the same ε every epoch
