"""The Python API (``vfl.run``, ``vfl.account``) is what the CLI runs: same summary, same rows,
same files; it reaches the runner through the ``vfl.plugins`` entry points, not an upward import."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import vfl
from simulations.cli.main import main
from vfl.core.errors import ConfigError

TINY = ["params.b=8", "data.train_subsample=128", "data.test_subsample=64", "train.epochs=2"]


def test_run_returns_the_summary_and_rows_it_writes(tmp_path):
    out = tmp_path / "run"
    result = vfl.run("demo", out_dir=out, overrides=TINY)
    assert isinstance(result, vfl.RunResult) and result.run_dir == out
    assert result.summary == json.loads((out / "summary.json").read_text())
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert result.history == rows and [r["epoch"] for r in rows] == [0, 1]
    assert result.summary["transport"] == "inprocess" and result.summary["epochs"] == 2
    assert result.summary["final_test_acc"] == rows[-1]["test_acc"] is not None
    assert result.config.strategy == "pbm" and result.stopped is None


def test_run_from_a_mapping_writes_nothing_without_out_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = {"strategy": "npq", "dataset": "digits", "num_parties": 2, "train": {"epochs": 1, "batch_size": 64},
           "data": {"train_subsample": 128, "test_subsample": 64}}
    result = vfl.run(cfg)
    assert result.run_dir is None and list(tmp_path.iterdir()) == []
    assert len(result.history) == 1 and result.summary["strategy"] == "npq"
    assert result.summary["total_bytes_up"] > 0 and "epsilon" not in result.summary


def test_the_cli_writes_what_the_api_returns(tmp_path, capsys):
    out_api, out_cli = tmp_path / "api", tmp_path / "cli"
    api = vfl.run("demo", out_dir=out_api, overrides=[*TINY, "privacy.noise_rng=seeded"])
    args = ["run", "demo", "--out", str(out_cli), "--transport", "inprocess", "--no-progress"]
    assert main([*args, *[a for o in [*TINY, "privacy.noise_rng=seeded"] for a in ("--set", o)]]) == 0
    cli = json.loads((out_cli / "summary.json").read_text())
    for key in ("final_test_acc", "final_train_loss", "epsilon", "total_bytes_up", "total_bytes_down",
                "bytes_by_kind", "bytes_by_kind_direction"):
        assert cli[key] == api.summary[key], key


def test_account_mirrors_the_cli(capsys):
    kw = dict(mechanism="pbm", b=16, beta=0.25, parties=4, alpha=2.0, epochs=5, dim=16, delta=1e-5)
    report = vfl.account(**kw)
    assert main(["account", "--mechanism", "pbm", "--b", "16", "--beta", "0.25", "--parties", "4", "--alpha", "2",
                 "--epochs", "5", "--dim", "16", "--delta", "1e-5"]) == 0
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(report))
    assert report["epsilon"] > 0
    target = vfl.account(mechanism="pbm", b=16, parties=4, target_epsilon=report["epsilon"], epochs=5, dim=16,
                         delta=1e-5)
    assert target["epsilon"] <= report["epsilon"] * (1 + 1e-9) and 0 < target["beta"] <= 0.25
    with pytest.raises(ConfigError, match="--beta"):
        vfl.account(mechanism="pbm", b=16, parties=4, alpha=2.0)


def test_vfl_imports_nothing_above_it():
    """``import vfl; vfl.engine.api`` loads no strategies/parties/simulations module until a run asks."""
    code = ("import sys, vfl, vfl.engine.api, vfl.engine.engine, vfl.core.plugins\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('simulations', 'strategies', 'parties')]\n"
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
    root = Path(vfl.__file__).parent
    offenders = [str(p) for p in root.rglob("*.py")
                 for line in p.read_text().splitlines()
                 if line.lstrip().startswith(("import simulations", "from simulations", "import strategies",
                                              "from strategies", "import parties", "from parties"))]
    assert offenders == []


def test_summary_splits_every_kind_by_direction():
    result = vfl.run("demo", overrides=[*TINY, "train.epochs=1"])
    s = result.summary
    assert s["bytes_by_kind"]["train.forward"]["direction"] == "mixed"
    split = s["bytes_by_kind_direction"]["train.forward"]
    assert split["up"]["messages"] % 4 == 0 and split["up"]["messages"] > 0 < split["down"]["messages"]  # 4 parties reply
    for kind, row in s["bytes_by_kind"].items():
        dirs = s["bytes_by_kind_direction"][kind]
        assert sum(c["bytes"] for c in dirs.values()) == row["bytes"], kind
        assert row["direction"] == (next(iter(dirs)) if len(dirs) == 1 else "mixed"), kind


def test_a_run_with_models_by_import_string(tmp_path):
    result = vfl.run("demo", overrides=[*TINY, "model.bottom=tests.support.byo_models:TinyBottom",
                                        "model.head=tests.support.byo_models:TinyHead"])
    assert len(result.history) == 2 and result.summary["final_test_acc"] is not None


def test_an_unimportable_model_fails_before_the_run_directory(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "demo", "--out", str(out), "--transport", "inprocess", "--no-progress",
                 "--set", "model.bottom=my_missing_pkg.models:Net"]) == 2
    err = capsys.readouterr().err
    assert "model.bottom: cannot import 'my_missing_pkg.models:Net'" in err and not out.exists()


def test_device_auto_runs_on_what_the_host_has():
    result = vfl.run("demo", overrides=[*TINY, "train.epochs=1", "train.device=auto"])
    assert result.config.train.device == "auto" and result.summary["final_test_acc"] is not None


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("transport", ["inprocess", "ray"])
def test_the_demo_on_a_gpu_trains_as_on_the_cpu(transport):
    """``train.device=cuda``: the same seeded run as on the CPU (data, init and noise draws alike) gives
    the same losses up to the devices' float rounding; a tensor left on the wrong device fails the run,
    and a model that did not train would not match. (The tiny demo's accuracy alone is near chance:
    2 epochs of 128 rows gave 0.05-0.16 on the CPU, so a bound on it tested nothing.)"""
    import torch

    seeded = ["data.train_subsample=512", "data.test_subsample=128", "train.epochs=3", "privacy.noise_rng=seeded"]
    extra = ["transport.gpus_per_actor=0.2"] if transport == "ray" else []
    cpu = vfl.run("demo", transport="inprocess", overrides=[*seeded, "train.device=cpu"])
    torch.cuda.reset_peak_memory_stats()
    gpu = vfl.run("demo", transport=transport, overrides=[*seeded, "train.device=cuda", *extra])
    print([(r["train_loss"], r["test_acc"]) for r in cpu.history], [(r["train_loss"], r["test_acc"]) for r in gpu.history])
    assert cpu.history[-1]["train_loss"] < cpu.history[0]["train_loss"] - 0.05  # it trains: the match means something
    assert [r["train_loss"] for r in gpu.history] == pytest.approx([r["train_loss"] for r in cpu.history], rel=1e-2)
    assert abs(gpu.summary["final_test_acc"] - cpu.summary["final_test_acc"]) <= 8 / 128
    if transport == "inprocess":  # this process ran the models: they were on the GPU
        assert torch.cuda.max_memory_allocated() > 0


def test_resume_continues_and_tracking_may_be_switched_on(tmp_path):
    out = tmp_path / "run"
    first = vfl.run("demo", out_dir=out, overrides=[*TINY, "train.epochs=1"])
    assert len(first.history) == 1 and not (out / "metrics.csv").exists()
    more = vfl.resume_run(out, overrides=["train.epochs=2", "tracking=csv"])
    assert [r["epoch"] for r in more.history] == [0, 1] and more.config.train.epochs == 2
    assert more.summary == json.loads((out / "summary.json").read_text())
    assert len((out / "metrics.csv").read_text().splitlines()) == 3  # header + both epochs, not just the new one


def test_every_api_name_is_the_function_even_after_the_core_modules_load():
    import vfl.engine.resume  # noqa: F401
    import vfl.privacy.accounting.account  # noqa: F401  (modules of the same package must not shadow the API names)

    names = vfl._API  # the API functions (the extension exports include a registry and the message module)
    assert {"run", "resume_run", "account"} <= set(names) <= set(vfl.__all__)  # the loop below checks something
    for name in names:
        assert callable(getattr(vfl, name)) and not isinstance(getattr(vfl, name), type(vfl)), name
