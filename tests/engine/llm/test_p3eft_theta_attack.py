"""P3EFT §3.3's θ-difference attack, played by a model server over in-process runs: the control reads labels, noise closes it."""

from __future__ import annotations

import pytest

from simulations.cli.runner import execute, resolve_config

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _run(llama, tmp_path, **params):
    raw = {"name": "theta", "strategy": "p3eft", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 96, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "sgd", "lr": 0.01},
           "params": {"max_len": 16, "model_dir": llama, "lora_rank": 4, "leak_window": 96, "leak_theta_steps": 5,
                      **params}}
    return execute(resolve_config(raw), out_dir=tmp_path, progress=False).summary


def test_control_theta_attack_reads_labels_that_the_old_metrics_miss_and_noise_closes_it(llama, tmp_path):
    control = _run(llama, tmp_path / "control")
    assert control["leak_theta"] > 0.9  # g_h recovered from successive adapters: labels out
    assert max(control["leak_act"], control["leak_grad"], control["leak_cat"]) < control["leak_theta"] - 0.2
    assert control["leak"] == max(control[f"leak_{s}"] for s in ("act", "grad", "theta", "cat"))
    noisy = _run(llama, tmp_path / "noisy", theta_noise=1e-3)
    assert noisy["leak_theta"] < 0.75


def test_rotation_keeps_servers_off_consecutive_steps_but_two_step_differences_still_leak(llama, tmp_path):
    from parties.llm.p3eft.server import ModelServer
    from vfl.runtime.transport.inprocess import InProcessTransport

    transport = InProcessTransport()
    raw = {"name": "rot", "strategy": "p3eft", "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 96, "test_subsample": 16},
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "sgd", "lr": 0.01},
           "params": {"max_len": 16, "model_dir": llama, "lora_rank": 4, "leak_window": 96, "leak_theta_steps": 5,
                      "servers": 4, "rotate_servers": True}}
    summary = execute(resolve_config(raw), out_dir=tmp_path, progress=False, transport=transport).summary
    servers = [n for h in transport.hosts.values() for n in h.nodes.values() if isinstance(n, ModelServer)]
    for s in servers:
        steps = sorted({int(r.round.split(":")[2]) for r in s.received if r.kind.startswith("train.")})
        assert steps and all(b - a >= 2 for a, b in zip(steps, steps[1:], strict=False)), (s.node_id, steps)
        assert {x % 2 for x in steps} == {s.node_id % 2}
    assert summary["leak_theta"] > 0.8  # θ_{t+2} − θ_t = −lr(g_t + g_{t+1}): g_t's rows still stand out
