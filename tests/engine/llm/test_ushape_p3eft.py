"""``ushape-p3eft``: ``ushape-lora`` with P3EFT's private backprop. The recombined gradient is exact (the
run trains as ``ushape-lora`` does, to float32 rounding); each model server receives only its random
piece of dLoss/d(body output), far larger than the gradient, and keeps no adapters of its own; the
client's checkpoint holds the body's adapters and restores them. The attack on the pieces is in
``test_ushape_privacy.py``."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.ushape.private import PiecesClient, PieceServer
from parties.llm.ushape.wire import CLIENT_ID, SERVER_ID, Kind
from simulations.data.source import ConfigDataSource
from tests.engine.llm.test_ushape import ushape_config
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def run_tapped(cfg_dict: dict, server_cls) -> tuple:
    """A run with every server node's received messages kept; (result, nodes by id, messages)."""
    cfg = load_run_config(cfg_dict)
    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False)
    seen: list = []
    orig = server_cls.handle

    def tap(self, messages):
        seen.extend(messages)
        return orig(self, messages)

    server_cls.handle = tap
    try:
        result = engine.run()
    finally:
        server_cls.handle = orig
    return result, {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}, seen


@pytest.fixture(scope="module")
def pair(llama):
    """The same 2-epoch run as ushape-lora (control) and ushape-p3eft."""
    from parties.llm.ushape.server import BodyServer

    base = ushape_config(llama, epochs=2, gen_samples=2)
    plain = run_tapped(base, BodyServer)
    private = run_tapped({**base, "strategy": "ushape-p3eft"}, PieceServer)
    return plain, private


def test_private_backprop_trains_exactly_as_the_plain_split(pair):
    (plain, pn, _), (priv, qn, _) = pair
    for a, b in zip(plain.history, priv.history, strict=True):
        assert b["train_loss"] == pytest.approx(a["train_loss"], rel=1e-5)
        assert b["test_ppl"] == pytest.approx(a["test_ppl"], rel=1e-4)
    assert plain.history[-1]["train_loss"] < plain.history[0]["train_loss"] - 0.2
    client = qn[CLIENT_ID]
    assert isinstance(client, PiecesClient)
    server_lora = pn[SERVER_ID].lora_state()
    assert set(server_lora) == set(client.body_lora)
    for name, p in client.body_lora.items():  # the body's adapters: the client's copy = the plain server's
        assert float(server_lora[name].abs().max()) > 0, name  # trained (B starts at 0)
        torch.testing.assert_close(p.detach(), server_lora[name], rtol=1e-3, atol=1e-5)
    assert [x["generation"] for x in priv.summary["samples"]] == [x["generation"] for x in plain.summary["samples"]]


def priv_summary_keys(pair) -> set:
    return set(pair[1][0].summary)


def test_each_server_gets_one_piece_far_above_the_gradient_and_never_the_gradient(pair):
    (_, _, plain_seen), (_, qn, seen) = pair
    servers = sorted(n for n, node in qn.items() if isinstance(node, PieceServer))
    assert servers == [SERVER_ID, 2] and priv_summary_keys(pair) >= {"servers", "grad_noise", "theta_noise"}
    true = np.array(wire.get_array(next(m for m in plain_seen if m.metadata.message_type == Kind.TRAIN_BODY_GRAD),
                                   "grad", "g"))  # step 0:0 is the same in both runs
    pieces = {int(m.metadata.dst_node_id): np.array(wire.get_array(m, "grad", "g")) for m in seen
              if m.metadata.message_type == Kind.TRAIN_BODY_GRAD and wire.round_of(m) == "train:0:0"}
    assert set(pieces) == set(servers)
    rms = float(np.sqrt((true ** 2).mean()))
    for sid, piece in pieces.items():
        assert piece.shape == true.shape
        assert float(np.sqrt((piece ** 2).mean())) > 10 * rms, sid
        cos = float((piece * true).sum() / np.linalg.norm(piece) / np.linalg.norm(true))
        assert abs(cos) < 0.2, (sid, cos)
    # the forward: both servers get the release and the adapters, only the first answers; evaluation
    # and generation go to the first only
    kinds = {(int(m.metadata.dst_node_id), m.metadata.message_type) for m in seen}
    assert {(2, Kind.EVAL_HEAD), (2, Kind.GEN_HEAD)}.isdisjoint(kinds)
    assert {(SERVER_ID, Kind.EVAL_HEAD), (SERVER_ID, Kind.GEN_HEAD), (2, Kind.TRAIN_HEAD)} <= kinds


def test_the_client_checkpoint_holds_the_body_adapters_and_a_restored_client_resends_them(pair):
    (_, _, _), (_, qn, _) = pair
    client = qn[CLIENT_ID]
    state = client.state()
    assert any(k.startswith("body.") for k in state["lora"])
    before = {k: v.clone() for k, v in client.lora_state().items()}
    for p in client.params:
        p.data.zero_()
    client.load_state(state)
    assert all(torch.equal(before[k], v) for k, v in client.lora_state().items())
    assert client.theta.held == {}  # the next request carries the adapters whole
    assert qn[SERVER_ID].state() == {}  # the servers keep nothing worth a checkpoint
