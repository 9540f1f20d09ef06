"""``ushape-lora`` through the runner and the CLI: the bundled config runs (with a model directory), and
``vfl generate`` answers from the run's checkpoint exactly what the run decoded through the split."""

from __future__ import annotations

import json

import pytest

from simulations.cli.main import main
from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SMALL = ["train.epochs=2", "data.train_subsample=32", "data.test_subsample=4", "params.gen_samples=2",
         "params.max_new_tokens=6", "train.eval_batch_size=16"]


@pytest.mark.parametrize("strategy", ["ushape-lora", "ushape-p3eft"])
def test_the_bundled_config_trains_and_vfl_generate_answers_from_its_checkpoint(llama, tmp_path, capsys, strategy):
    """(``ushape-p3eft``: the body's adapters come from the client's checkpoint.)"""
    res = execute(resolve_config("instruct-u-tiny", [f"params.model_dir={llama}", f"strategy={strategy}", *SMALL]),
                  out_dir=tmp_path, progress=False)
    s = res.summary
    assert s["strategy"] == strategy and s["test_ppl"] > 1 and 0 <= s["rouge_l"] <= 1
    sample = s["samples"][0]
    capsys.readouterr()
    assert main(["generate", str(tmp_path), "--prompt", sample["prompt"], "--prompt", "Add 1 and 2."]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [x["prompt"] for x in out] == [sample["prompt"], "Add 1 and 2."]
    assert out[0]["generation"] == sample["generation"]  # the checkpoint holds what the run decoded with


def test_without_a_model_dir_the_config_is_a_one_line_error(capsys):
    assert main(["run", "instruct-u-tiny", "--dry-run"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "params.model_dir" in err[0] and "vfl tiny-lm llama DIR" in err[0]


def test_generate_refuses_another_strategys_run(tmp_path, capsys):
    (tmp_path / "config.resolved.yaml").write_text("strategy: pbm\nnum_parties: 2\n")
    assert main(["generate", str(tmp_path), "--prompt", "hi"]) != 0
    assert "ushape-lora" in capsys.readouterr().err


@pytest.mark.parametrize("strategy", ["ushape-lora", "ushape-p3eft"])
def test_a_resumed_run_continues_where_the_uninterrupted_one_goes(llama, tmp_path, strategy):
    """Both nodes' adapters and optimizers (the server's, built at set-up, takes the checkpoint's state)
    come back: 1 epoch + resume to 2 equals 2 epochs straight. ``ushape-p3eft``: the client's body
    adapters come back, the fresh servers get them whole; seeded noise replays the same pieces."""
    from simulations.cli.runner import resume_run

    base = [f"params.model_dir={llama}", f"strategy={strategy}", "privacy.noise_rng=seeded", *SMALL]
    straight = execute(resolve_config("instruct-u-tiny", base), out_dir=tmp_path / "a", progress=False)
    execute(resolve_config("instruct-u-tiny", [*base, "train.epochs=1"]), out_dir=tmp_path / "b", progress=False)
    resumed = resume_run(tmp_path / "b", overrides=["train.epochs=2"], progress=False)
    assert resumed.history[-1]["train_loss"] == pytest.approx(straight.history[-1]["train_loss"], rel=1e-6)
    assert resumed.summary["samples"] == straight.summary["samples"]
