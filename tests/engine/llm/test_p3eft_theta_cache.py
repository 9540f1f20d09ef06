"""Adapters are not resent when unchanged (parties/llm/p3eft/theta_cache.py): the tests through in-process engine runs."""

from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _run(llama, tmp_path, strategy: str, resend: bool, **params):
    from parties.llm.p3eft.server import ModelServer
    from simulations.cli.runner import execute, resolve_config
    from vfl.runtime.transport.inprocess import InProcessTransport

    raw = {"name": "theta-cache", "strategy": strategy, "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 48, "test_subsample": 32}, "privacy": {"noise_rng": "seeded"},
           "train": {"epochs": 2, "batch_size": 16, "eval_batch_size": 16, "optimizer": "adam", "lr": 0.01},
           "params": {"max_len": 16, "model_dir": llama, "lora_rank": 4, "leak_window": 48, "leak_theta_steps": 2,
                      "leak_theta_iters": 10,  # the attack runs on what each side holds; equal either way
                      "resend_adapters": resend, **params}}
    transport = InProcessTransport()
    res = execute(resolve_config(raw), out_dir=tmp_path / f"{strategy}-{resend}", progress=False, transport=transport)
    nodes = [n for h in transport.hosts.values() for n in h.nodes.values()]
    client = next(n for n in nodes if not isinstance(n, ModelServer))
    return res, client


def _numbers(row: dict) -> dict:
    return {k: v for k, v in row.items()
            if isinstance(v, int | float) and "bytes" not in k and "payload" not in k  # the wire changes
            and not k.endswith("_s") and "_s_" not in k}  # timings vary run to run


@pytest.mark.parametrize(("strategy", "params"), [
    ("p3eft", {}),  # 2 servers, 2 adapter sets, m = 2
    ("p3eft", {"servers": 4, "rotate_servers": True, "theta_noise": 1e-3}),  # rotation + fresh noise per step
    ("split-lora", {}),
])
def test_same_run_bit_for_bit_with_fewer_bytes(llama, tmp_path, strategy, params):
    """Control: resend_adapters = true (every request carries all of θ); the default sends deltas. Same
    seed: the same adapters, head, losses and leak readings (the curious server's θ-difference and
    concatenation attacks run on what it holds, identical), and fewer bytes up in the ledger."""
    (old, c_old), (new, c_new) = (_run(llama, tmp_path, strategy, r, **params) for r in (True, False))
    for a_old, a_new in zip(c_old.adapters, c_new.adapters, strict=True):
        assert any(float(v.detach().abs().sum()) > 0 for k, v in a_old.items() if ".lora_B." in k)  # it trained
        for k, v in a_old.items():
            assert torch.equal(v.detach(), a_new[k].detach()), k
    for k, v in c_old.head.state_dict().items():
        assert torch.equal(v, c_new.head.state_dict()[k])
    assert len(old.history) == len(new.history) == 2
    for r_old, r_new in zip(old.history, new.history, strict=True):
        assert _numbers(r_old) == _numbers(r_new)
        assert "train_loss" in _numbers(r_old) and "leak" in _numbers(r_old)
    assert old.summary["leak_theta"] == new.summary["leak_theta"] and old.summary["leak_theta"] is not None
    per_old, per_new = old.summary["train_bytes_per_step"], new.summary["train_bytes_per_step"]
    up = {run: per["train.forward"]["bytes"] + per["train.backprop"]["bytes"] for run, per in (("old", per_old),
                                                                                         ("new", per_new))}
    assert up["new"] < up["old"]  # (with fresh θ noise every step a forward carries all of θ + the versions)
    assert per_new["train.backprop"]["bytes"] < per_old["train.backprop"]["bytes"]
    assert per_new["train.grads"]["bytes"] == per_old["train.grads"]["bytes"]  # replies untouched
    assert new.summary["eval_bytes"] < old.summary["eval_bytes"]  # every eval step after the first: no θ
