"""Training that goes non-finite stops with ONE line naming the epoch, the step and the first
non-finite quantity, exit code 3, the last good checkpoint kept and no summary.json (a NaN loss
used to finish "successfully" with ``final_train_loss: null`` at chance accuracy)."""

from __future__ import annotations

import json

import pytest

from simulations.cli.main import EXIT_NONFINITE, main

TINY = ["strategy=npq", "params={}", "num_parties=2", "auth=false", "data.train_subsample=64",
        "data.test_subsample=32", "train.batch_size=16", "train.epochs=3", "model.bottom_hidden=[8]",
        "model.head_hidden=[8]", "model.embed_dim=4"]
M = "tests.support.nonfinite_models"


def _run(tmp_path, extra):
    sets = [x for o in [*TINY, *extra] for x in ("--set", o)]
    return main(["run", "demo", "--out", str(tmp_path / "r"), "--transport", "inprocess", "--no-progress", *sets])


@pytest.mark.parametrize("extra,needle", [
    ([f"model.bottom={M}:nan_bottom"], "epoch 1, step 1: the embedding of party0 (node 1) holds NaN or inf"),
    ([f"model.head={M}:inf_head"], "epoch 1, step 1: the head's output (logits) holds NaN or inf"),
    ([f"model.head={M}:nan_weight_head"], "epoch 1, step 1: the head's weight 'inner.0.bias' holds NaN or inf"),
    ([f"model.bottom={M}:nan_bottom", "model.fusion=concat"],
     "epoch 1, step 1: the embedding of party0 (node 1) holds NaN or inf"),
    ([f"model.bottom={M}:nan_bottom", "strategy=npq+secagg", "auth=true"],
     "epoch 1, step 1: the embedding of party0 holds NaN or inf (before its encoding)"),
    ([f"model.bottom={M}:nan_bottom", "strategy=pbm", "params={b: 8, beta: 0.25, secagg: false}"],
     "epoch 1, step 1: the embedding of party0 holds NaN or inf (before its encoding)"),
], ids=["party-embedding", "logits", "head-weights", "concat", "secagg", "pbm"])
def test_non_finite_training_stops_in_one_line(extra, needle, tmp_path, capsys):
    assert _run(tmp_path, extra) == EXIT_NONFINITE == 3
    out = capsys.readouterr()
    err = out.err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("vfl: run failed: training went non-finite at ") and needle in err, err
    assert "; last checkpoint: " in err and "resume with: vfl run --resume" in err, err
    run = tmp_path / "r"
    assert not (run / "summary.json").exists()  # never a finished run with a null loss
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [0] and rows[0]["train_loss"] is not None
    assert any((run / "checkpoints").iterdir())  # the last good epoch stays resumable


def test_control_the_same_models_before_the_bad_call_finish(tmp_path, monkeypatch):
    """Control: the same run with the bad call moved past the end trains to a finite loss and exit 0."""
    import tests.support.nonfinite_models as nm

    monkeypatch.setattr(nm, "BAD_CALL", 10_000)
    assert _run(tmp_path, [f"model.bottom={M}:nan_bottom", f"model.head={M}:inf_head"]) == 0
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["final_train_loss"] is not None and s["epochs"] == 3


