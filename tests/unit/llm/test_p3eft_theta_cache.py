"""Adapters are not resent when unchanged (parties/llm/p3eft/theta_cache.py): same run bit for bit,
fewer bytes in the ledger, and the curious server attacks the same θ it would have received whole."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from flwr.common import Message

from parties.llm.p3eft.theta_cache import FULL, THETA, ThetaSender, ThetaStore
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


