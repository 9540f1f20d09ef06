"""Adapters are not resent when unchanged (parties/llm/p3eft/theta_cache.py): same run bit for bit,
fewer bytes in the ledger, and the curious server attacks the same θ it would have received whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import Message

from parties.llm.p3eft.theta_cache import FULL, THETA, ThetaSender, ThetaStore
from tests.tiny_lms import tiny_lm_dir
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py



def _request(src: int, versions, tensors: dict[str, np.ndarray]) -> Message:
    content = wire.records(**{THETA: versions}, **({"adapter": wire.arrays(**tensors)} if tensors else {}))
    return wire.make("train.forward", src=src, dst=0, round=wire.round_tag(0, 0), content=content)


def _received(m: Message) -> dict[str, torch.Tensor]:
    rec = m.content.array_records.get("adapter")
    return {} if rec is None else {k: torch.from_numpy(np.array(wire.from_array(a))) for k, a in rec.items()}


def test_only_changed_tensors_travel_and_the_server_rebuilds_the_whole_set():
    a = {"x.lora_A.w": np.ones((2, 3), np.float32), "x.lora_B.w": np.zeros((3, 2), np.float32)}
    sender, store = ThetaSender(), ThetaStore()
    delta, v = sender.outgoing(server=0, adapter=0, tensors=a)
    assert set(delta) == set(a) and (v["base"], v["version"]) == (FULL, 0)
    full = store.resolve(_request(5, v, delta), adapter=0, received=dict(_received(_request(5, v, delta))))
    delta, v = sender.outgoing(server=0, adapter=0, tensors=a)  # same θ again (e.g. the backprop of the step)
    assert delta == {} and (v["base"], v["version"]) == (0, 1)
    assert {k: t.tolist() for k, t in store.resolve(_request(5, v, {}), adapter=0, received={}).items()} == \
        {k: t.tolist() for k, t in full.items()}
    b = {**a, "x.lora_B.w": np.full((3, 2), -0.0, np.float32)}  # −0.0: equal as numbers, not bit for bit
    delta, v = sender.outgoing(server=0, adapter=0, tensors=b)
    assert set(delta) == {"x.lora_B.w"} and (v["base"], v["version"]) == (1, 2)
    got = store.resolve(_request(5, v, delta), adapter=0, received=_received(_request(5, v, delta)))
    assert torch.signbit(got["x.lora_B.w"]).all() and torch.equal(got["x.lora_A.w"], torch.ones(2, 3))
    delta, v = sender.outgoing(server=1, adapter=0, tensors=b)  # another server holds nothing yet: all of it
    assert set(delta) == set(a) and (v["base"], v["version"]) == (FULL, 0)  # numbered per server: nothing of 0's


def test_a_delta_on_a_version_the_server_does_not_hold_is_refused():
    a = {"x.lora_A.w": np.ones((2, 3), np.float32)}
    sender = ThetaSender()
    sender.outgoing(server=0, adapter=0, tensors=a)
    delta, v = sender.outgoing(server=0, adapter=0, tensors={"x.lora_A.w": np.zeros((2, 3), np.float32)})
    fresh = ThetaStore()  # e.g. a server rebuilt while the client kept going
    with pytest.raises(ProtocolError, match="delta on version 0, this server holds version -1"):
        fresh.resolve(_request(5, v, delta), adapter=0, received=_received(_request(5, v, delta)))
    sender.forget()  # after a state load the client assumes nothing is held: the next request is whole
    delta, v = sender.outgoing(server=0, adapter=0, tensors=a)
    assert set(delta) == set(a) and v["base"] == FULL


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    return tiny_lm_dir(tmp_path_factory.mktemp("llama"), "llama")


def _run(llama, tmp_path, strategy: str, resend: bool, **params):
    from parties.llm.p3eft.server import ModelServer
    from simulations.cli.runner import execute, resolve_config
    from vfl.runtime.transport.inprocess import InProcessTransport

    raw = {"name": "theta-cache", "strategy": strategy, "num_parties": 1, "seed": 1, "dataset": "rt-polarity",
           "data": {"train_subsample": 48, "test_subsample": 32}, "privacy": {"noise_rng": "seeded"},
           "train": {"epochs": 2, "batch_size": 16, "eval_batch_size": 16, "optimizer": "adam", "lr": 0.01},
           "params": {"max_len": 16, "model_dir": llama, "lora_rank": 4, "leak_window": 48, "leak_theta_steps": 2,
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


@pytest.mark.slow
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
