"""``train.checkpoint_every_steps``: a split-LLM run stopped inside an epoch leaves a checkpoint after its last
N-th step, and ``--resume`` goes on from there to the same result as the run never stopped: the same
losses step by step, the same held-out metrics, the same leak scores, the same adapters (``p3eft`` with
seeded noise, two servers, the θ-difference attack on; ``ushape-lora``). The control: without the
option the stopped run leaves no checkpoint at all."""

from __future__ import annotations

import pytest
import torch

import strategies  # noqa: F401
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.rundir import RunDir
from vfl.engine.schema import load_run_config
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


class Stopped(Exception):
    pass


def _p3eft(model_dir: str, every: int) -> dict:
    return {"name": "mid-epoch", "strategy": "p3eft", "dataset": "rt-polarity", "num_parties": 1, "seed": 5,
            "data": {"train_subsample": 32, "test_subsample": 8},
            "train": {"epochs": 2, "batch_size": 8, "optimizer": "adamw", "lr": 1e-2, "log_every_steps": 1,
                      "checkpoint_every_steps": every},
            "privacy": {"noise_rng": "seeded"},
            "params": {"model_dir": model_dir, "max_len": 12, "lora_rank": 2, "servers": 2, "leak_theta_steps": 1,
                       "leak_theta_iters": 5, "leak_window": 16}}


def _ushape(model_dir: str, every: int) -> dict:
    return {"name": "mid-epoch-u", "strategy": "ushape-lora", "dataset": "tiny-instruct", "num_parties": 1, "seed": 5,
            "data": {"train_subsample": 20, "test_subsample": 4},
            "train": {"epochs": 2, "batch_size": 4, "optimizer": "adamw", "lr": 1e-2, "log_every_steps": 1,
                      "checkpoint_every_steps": every},
            "params": {"model_dir": model_dir, "max_len": 24, "lora_rank": 2, "gen_samples": 2, "max_new_tokens": 3}}


def _run(raw: dict, path, *, resume: bool = False, stop_at: tuple[int, int] | None = None,
         steps: list | None = None):
    cfg = load_run_config(raw)
    run_dir = RunDir(path)
    if not resume:
        run_dir.write_config(cfg.to_dict())

    def on_step(epoch: int, done: int, engine: Engine) -> None:
        if steps is not None:
            steps.append((epoch, done))
        if (epoch, done) == stop_at:
            raise Stopped()

    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), run_dir=run_dir, progress=False,
                    on_step=on_step)
    result = engine.run(resume=resume)
    nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}
    return result, nodes


def _adapters(nodes: dict) -> dict[str, torch.Tensor]:
    out = {}
    for nid, node in nodes.items():
        state = node.state()
        for k, v in state.get("lora", {}).items():
            out[f"{nid}/{k}"] = v
        for i, a in enumerate(state.get("adapters", [])):
            out.update({f"{nid}/{i}/{k}": v for k, v in a.items()})
    return out


def _flat(value: object) -> list[float]:
    """A metric as a flat list (``step_loss`` is [[step, loss], ...])."""
    if isinstance(value, list):
        return [float(x) for pair in value for x in pair]
    return [float("nan") if value is None else float(value)]  # type: ignore[arg-type]  # NaN is null in the file


KEYS = {"p3eft": ("train_loss", "train_acc", "step_loss", "test_acc", "test_loss", "leak", "leak_act", "leak_grad",
                  "leak_theta", "leak_probe"),
        "ushape-lora": ("train_loss", "train_ppl", "step_loss", "test_loss", "test_ppl", "rouge_l")}


@pytest.mark.parametrize(("strategy", "build", "stop_at"), [("p3eft", _p3eft, (1, 3)), ("ushape-lora", _ushape, (0, 3))])
def test_a_run_stopped_mid_epoch_resumes_to_the_uninterrupted_result(llama, tmp_path, strategy, build, stop_at):
    full, full_nodes = _run(build(llama, 2), tmp_path / "full")
    with pytest.raises(Stopped):  # stopped one step after the checkpoint at step 2 of that epoch
        _run(build(llama, 2), tmp_path / "cut", stop_at=stop_at)
    ckpt = RunDir(tmp_path / "cut").load_checkpoint()
    assert ckpt is not None and (ckpt.epoch + 1, ckpt.step) == (stop_at[0], 2)
    assert ckpt.folder.name == f"step_{stop_at[0]:05d}_0000002"
    resumed, nodes = _run(build(llama, 2), tmp_path / "cut", resume=True)
    rows = RunDir(tmp_path / "cut").read_metrics()
    assert [r["epoch"] for r in rows] == [0, 1]
    checked = 0
    for a, b in zip(RunDir(tmp_path / "full").read_metrics(), rows, strict=True):
        for k in KEYS[strategy]:
            want, got = (_flat(r[k]) for r in (a, b))
            assert want == pytest.approx(got, rel=1e-6, abs=1e-9, nan_ok=True), (a["epoch"], k)
            checked += 1
    assert checked == 2 * len(KEYS[strategy])
    want, got = _adapters(full_nodes), _adapters(nodes)
    assert want.keys() == got.keys() and len(want) > 4
    for k, v in want.items():
        torch.testing.assert_close(got[k], v, rtol=1e-6, atol=1e-8, msg=k)


def test_without_step_checkpoints_a_run_stopped_in_its_first_epoch_leaves_none(llama, tmp_path):
    with pytest.raises(Stopped):
        _run(_ushape(llama, 0), tmp_path / "cut", stop_at=(0, 3))
    assert RunDir(tmp_path / "cut").load_checkpoint() is None


def test_a_strategy_without_mid_epoch_checkpoints_refuses_the_key():
    with pytest.raises(ConfigError, match=r"train\.checkpoint_every_steps.*at the end of each epoch only"):
        load_run_config({"strategy": "npq", "train": {"checkpoint_every_steps": 5}})


def test_a_restart_goes_back_to_the_mid_epoch_checkpoint(llama, tmp_path, monkeypatch):
    """``train.on_failure: restart``: the model server's host dies in the 4th step of epoch 0 (round train:0:3,
    ``VFL_FAULT_INJECT``, once); the run returns to the snapshot after 2 steps and finishes as the
    uninterrupted run does."""
    import os

    from vfl.runtime import faults

    raw = {**_ushape(llama, 2), "train": {**_ushape(llama, 2)["train"], "on_failure": "restart", "max_restarts": 1}}
    full, _ = _run(raw, tmp_path / "full")
    monkeypatch.setenv(faults.FAULT_ENV, "server@0:3")
    real = faults._die

    def die(fault, replies, *, in_driver):
        os.environ.pop(faults.FAULT_ENV, None)
        real(fault, replies, in_driver=in_driver)

    monkeypatch.setattr(faults, "_die", die)
    steps: list = []
    restarted, _ = _run(raw, tmp_path / "cut", steps=steps)
    (restart,) = restarted.summary["restarts"]
    assert restart["epoch"] == 0
    # died in its 4th step; back to the snapshot after 2 steps: the 3rd runs again, not the 1st
    assert steps[:5] == [(0, 1), (0, 2), (0, 3), (0, 3), (0, 4)]
    for a, b in zip(full.history, restarted.history, strict=True):
        assert _flat(a["step_loss"]) == pytest.approx(_flat(b["step_loss"]), rel=1e-6)
        assert a["test_ppl"] == pytest.approx(b["test_ppl"], rel=1e-6)
