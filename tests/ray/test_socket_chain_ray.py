"""Vertical training over the socket data plane (``transport.data_plane: socket``) is the task path
bit for bit: same losses, parameters and every byte and message count; every training step went
through the socket chain; a host killed mid-run is a PartyFailure the engine restarts from (a new
chain over the new actor); an exception inside a host is a PartyFailure naming its parties; after
close the actors serve ordinary Ray tasks again. In-process and skip-party refuse it."""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

import pytest
import torch

import strategies  # noqa: F401
from tests.support.helpers import ChainSpy, run_with_states, state_tensors
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config

M, N, B = 3, 240, 50
LEDGER_KEYS = ("total_bytes_up", "total_bytes_down", "payload_bytes_up", "payload_bytes_down",
               "messages_up", "messages_down", "bytes_by_kind", "epsilon")


def _cfg(strategy: str, params: dict[str, Any], *, plane: str, **transport: Any):
    return load_run_config({"strategy": strategy, "num_parties": M, "seed": 3, "params": params,
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": B, "lr": 0.05, "optimizer": "adam"},
                            "privacy": {"noise_rng": "seeded"},
                            "transport": {"kind": "ray", "data_plane": plane, **transport}})


@pytest.mark.ray
@pytest.mark.parametrize(("strategy", "params"), [("npq+secagg", {}), ("pbm", {"b": 16})])
def test_the_socket_chain_equals_the_task_path(ray_local, strategy, params):
    from vfl.runtime.transport.ray_transport import RayTransport

    ref = _cfg(strategy, params, plane="ray", max_actors=2)  # the task path's result: the in-process run's
    ref = replace(ref, transport=replace(ref.transport, kind="inprocess"))  # (bit for bit: tests/ray/test_all_strategies)
    ref_s, ref_h, ref_states = run_with_states(ref, num_train=N)
    transport = RayTransport()
    spy = ChainSpy(transport, "socket_chain")
    s, h, states = run_with_states(_cfg(strategy, params, plane="socket", max_actors=2), num_train=N,
                                   transport=transport)
    assert spy.runs == 2 * -(-N // B)  # every training step went over the sockets
    assert [r["train_loss"] for r in h] == [r["train_loss"] for r in ref_h]
    assert [r["test_acc"] for r in h] == [r["test_acc"] for r in ref_h]
    for key in LEDGER_KEYS:
        assert s.get(key) == ref_s.get(key), key
    assert s["transport"] == "ray" and ref_s["transport"] == "inprocess"
    for a, b in zip(state_tensors(states), state_tensors(ref_states), strict=True):
        assert torch.equal(a, b)


def _killed_run(kill: str | None):
    """pbm+secagg over Ray on sockets; ``kill`` a host actor a moment after step 16 of epoch 1 (a
    step is then in flight in the chain). Returns the result and the chain runs."""
    from tests.support.helpers import BlobSource
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({"num_parties": 3, "seed": 2, "strategy": "pbm", "params": {"b": 8, "secagg": True},
                           "train": {"epochs": 2, "batch_size": 8, "lr": 0.05},
                           "transport": {"kind": "ray", "max_actors": 1, "data_plane": "socket"},
                           "privacy": {"noise_rng": "seeded"}})
    transport = RayTransport()
    spy = ChainSpy(transport, "socket_chain")
    timers: list[threading.Timer] = []

    def on_step(epoch, done, engine):
        if kill and (epoch, done) == (1, 16) and not timers:
            timers.append(threading.Timer(0.02, transport.kill, args=(kill,)))
            timers[0].start()

    try:
        return Engine(cfg, transport, BlobSource(num_parties=3, num_train=240, num_test=60), progress=False,
                      on_step=on_step).run(), spy.runs
    finally:
        for t in timers:
            t.join()
        transport.shutdown()


@pytest.mark.ray
def test_a_host_killed_mid_run_is_a_party_failure_and_the_restart_runs_over_a_new_chain(ray_local):
    reference, runs = _killed_run(None)
    assert runs == 2 * 30
    result, _ = _killed_run("parties-0")
    (restart,) = result.summary["restarts"]
    assert "party1" in restart["party"] and restart["epoch"] == 1 and "died" in restart["cause"]
    for a, b in zip(reference.history, result.history, strict=True):
        assert (a["train_loss"], a["test_acc"], a["epsilon"]) == (b["train_loss"], b["test_acc"], b["epsilon"])
    assert result.summary["total_bytes_up"] == reference.summary["total_bytes_up"]


@pytest.mark.ray
@pytest.mark.timeout(400, method="thread")
def test_a_party_that_hangs_in_the_socket_chain_is_replaced_and_the_run_never_hangs(ray_local, monkeypatch):
    """A straggler inside a socket step: a PartyFailure after round_timeout_s, the stuck actor is
    killed and replaced (the server's loop stops, its actor is kept), and a second hang ends the run
    with the restart budget spent."""
    from tests.support.helpers import BlobSource
    from vfl.core.errors import PartyFailure
    from vfl.engine.engine import Engine
    from vfl.runtime.faults import FAULT_ENV
    from vfl.runtime.transport.ray_transport import RayTransport

    monkeypatch.setenv(FAULT_ENV, "party1@1:2!hang")  # fires again in the replaced actor: two failures
    cfg = load_run_config({"num_parties": 3, "seed": 2, "strategy": "npq",
                           "train": {"epochs": 2, "batch_size": 8, "on_failure": "restart", "max_restarts": 1},
                           "transport": {"kind": "ray", "max_actors": 1, "data_plane": "socket",
                                         "round_timeout_s": 3}})
    transport = RayTransport()
    first: dict[str, Any] = {}

    def on_epoch_end(epoch: int, record: dict[str, Any], engine: Engine) -> None:
        first.update(transport.actors)

    try:
        engine = Engine(cfg, transport, BlobSource(num_parties=3, num_train=240, num_test=60), progress=False,
                        on_epoch_end=on_epoch_end)
        with pytest.raises(PartyFailure, match=r"round_timeout_s=3 \(socket chain\); gave up after 1 restart"):
            engine.run()
        restarts = engine.recovery.restarts
        assert transport.actors["server"] is first["server"]  # only the stuck host was killed
        assert transport.actors["parties-0"] is not first["parties-0"]
    finally:
        transport.shutdown()
    assert len(restarts) == 1 and restarts[0]["epoch"] == 1 and "no answer" in restarts[0]["cause"]


def _no_nodes(specs):
    return {}


@pytest.mark.ray
def test_a_host_exception_names_its_parties_and_closed_actors_serve_tasks_again(ray_local):
    from vfl.core.errors import PartyFailure
    from vfl.runtime.host import NodeHost
    from vfl.runtime.message import BROADCAST, Wire
    from vfl.runtime.transport.socket.chain import SocketChain

    remote = ray_local.remote(NodeHost)
    actors = {n: remote.options(num_cpus=0.1).remote(_no_nodes, [], 1) for n in ("server", "parties-0")}
    names = {"server": "server", "parties-0": "party1, party2"}
    hops = (("server",), ("parties-0",))
    ok = Wire(src=7, dst=123, kind="train.x", round="train:0:0", data=b"", payload=0)  # for no node here: dropped
    bad = Wire(src=7, dst=BROADCAST, kind="train.x", round="train:0:1", data=b"not a message", payload=0)
    chain = SocketChain(ray_local, actors, hops, names=names.__getitem__, dead=lambda: "")
    try:
        assert chain.run([ok], round="train:0:0", timeout_s=30) == []
        with pytest.raises(PartyFailure, match=r"party server failed in round train:0:1: \w+Error"):
            chain.run([bad], round="train:0:1", timeout_s=30)
    finally:
        chain.close()
    assert ray_local.get([a.drain_outbox.remote() for a in actors.values()], timeout=30) == [[], []]
    with pytest.raises(ray_local.exceptions.RayTaskError, match="not a message|decode|Error"):
        ray_local.get(actors["server"].deliver_piped.remote([bad]), timeout=30)  # the task path runs again
    chain = SocketChain(ray_local, actors, hops, names=names.__getitem__, dead=lambda: "")  # a new chain works
    try:
        assert chain.run([ok], round="train:0:2", timeout_s=30) == []
    finally:
        chain.close()


def test_socket_is_refused_in_process_and_with_skip_party():
    with pytest.raises(ConfigError, match="transport.data_plane: got 'socket' with transport.kind: inprocess"):
        load_run_config({"transport": {"kind": "inprocess", "data_plane": "socket"}})
    with pytest.raises(ConfigError, match="transport.data_plane: got 'socket' with train.on_dropout: skip-party"):
        load_run_config({"transport": {"kind": "ray", "data_plane": "socket"}, "train": {"on_dropout": "skip-party"}})
    assert load_run_config({}).transport.data_plane == "ray"  # the default: the current behaviour


def test_socket_uses_the_chain_at_any_run_length():
    from parties.secagg.plan import secagg_round_plan
    from strategies.base.socket_epoch import SOCKET, TASK, data_plane, plane_summary, socket_chain

    class G:
        party_groups = ["p0", "p1"]

        def socket_chain(self, hops):
            return tuple(tuple(h) for h in hops)

    cfg = _cfg("npq", {}, plane="socket")
    assert socket_chain(G(), cfg, server="s", plan=secagg_round_plan()) == (("s",), ("p0", "p1"), ("s",), ("p0", "p1"))
    assert data_plane(cfg) == SOCKET and plane_summary(cfg)["compiled_graph_choice"]["chosen"] == SOCKET
    ray = _cfg("npq", {}, plane="ray")
    assert socket_chain(G(), ray, server="s", plan=secagg_round_plan()) is None and data_plane(ray) == TASK
