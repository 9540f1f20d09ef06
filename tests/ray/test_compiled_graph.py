"""Vertical training over a Ray Compiled Graph (``transport.compiled_graph: on``) is the task path
bit for bit: same losses, parameters, optimizer state and every byte count; a host that fails
inside the compiled chain is a PartyFailure the engine restarts from (the chain is rebuilt over
the new actor); the chain is really used. ``auto`` compiles only long runs; in-process and skip-party never compile."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
import torch

import strategies  # noqa: F401
from strategies.base.compiled_epoch import MIN_AUTO_STEPS, compiled_chain
from tests.support.helpers import ChainSpy, run_with_states, state_tensors
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config

M, N, B = 3, 240, 50
LEDGER_KEYS = ("total_bytes_up", "total_bytes_down", "payload_bytes_up", "payload_bytes_down",
               "messages_up", "messages_down", "bytes_by_kind", "epsilon")


def _cfg(strategy: str, params: dict[str, Any], *, compiled: str, **transport: Any):
    return load_run_config({"strategy": strategy, "num_parties": M, "seed": 3, "params": params,
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": B, "lr": 0.05, "optimizer": "adam"},
                            "privacy": {"noise_rng": "seeded"},
                            "transport": {"kind": "ray", "compiled_graph": compiled, **transport}})


@pytest.mark.ray
@pytest.mark.parametrize(("strategy", "params"), [("npq+secagg", {}), ("pbm", {"b": 16})])  # npq: a subset of npq+secagg
def test_compiled_graph_equals_the_task_path(ray_local, strategy, params):
    from vfl.runtime.transport.ray_transport import RayTransport

    ref_s, ref_h, ref_states = run_with_states(_cfg(strategy, params, compiled="off", max_actors=2),
                                               num_train=N, transport=RayTransport())
    transport = RayTransport()
    spy = ChainSpy(transport)
    s, h, states = run_with_states(_cfg(strategy, params, compiled="on", max_actors=2), num_train=N,
                                   transport=transport)
    assert spy.runs == 2 * -(-N // B)  # every training step went through the compiled graph
    assert [r["train_loss"] for r in h] == [r["train_loss"] for r in ref_h]
    assert [r["test_acc"] for r in h] == [r["test_acc"] for r in ref_h]
    for key in LEDGER_KEYS:
        assert s.get(key) == ref_s.get(key), key
    for a, b in zip(state_tensors(states), state_tensors(ref_states), strict=True):
        assert torch.equal(a, b)


def _killed_run(kill: str | None, **train: Any):
    """pbm+secagg over Ray, compiled; ``kill`` a host actor a moment after step 16 of epoch 1 (a
    step is then in flight inside the compiled graph). Returns the result and the chain runs."""
    import threading

    from tests.support.helpers import BlobSource
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = load_run_config({"num_parties": 3, "seed": 2, "strategy": "pbm", "params": {"b": 8, "secagg": True},
                           "train": {"epochs": 2, "batch_size": 8, "lr": 0.05, **train},
                           "transport": {"kind": "ray", "max_actors": 1, "compiled_graph": "on"},
                           "privacy": {"noise_rng": "seeded"}})
    transport = RayTransport()
    spy = ChainSpy(transport)
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
def test_a_host_killed_inside_the_compiled_chain_restarts_over_a_new_chain(ray_local):
    reference, runs = _killed_run(None)
    assert runs == 2 * 30
    result, _ = _killed_run("parties-0")  # restart (the Ray default): a new chain over the new actor
    (restart,) = result.summary["restarts"]
    assert "party1" in restart["party"] and restart["epoch"] == 1
    for a, b in zip(reference.history, result.history, strict=True):
        assert (a["train_loss"], a["test_acc"], a["epsilon"]) == (b["train_loss"], b["test_acc"], b["epsilon"])
    assert result.summary["total_bytes_up"] == reference.summary["total_bytes_up"]
    assert "died" in restart["cause"]  # the chain's PartyFailure (on_failure: fail would raise it)



@pytest.mark.ray
@pytest.mark.timeout(400, method="thread")  # before the fix the restart waited forever (in C: no signal gets through)
def test_a_party_that_hangs_inside_the_compiled_chain_is_replaced_and_the_run_never_hangs(ray_local, monkeypatch):
    """A straggler inside a compiled step (its host never answers): a PartyFailure after
    round_timeout_s, the chain's stuck actor is killed and replaced (the server's is kept), and a
    second hang ends the run with the restart budget spent, instead of Ray's teardown waiting forever."""
    from tests.support.helpers import BlobSource
    from vfl.core.errors import PartyFailure
    from vfl.engine.engine import Engine
    from vfl.runtime.faults import FAULT_ENV
    from vfl.runtime.transport.ray_transport import RayTransport

    monkeypatch.setenv(FAULT_ENV, "party1@1:2!hang")  # fires again in the replaced actor: two failures
    cfg = load_run_config({"num_parties": 3, "seed": 2, "strategy": "npq",
                           "train": {"epochs": 2, "batch_size": 8, "on_failure": "restart", "max_restarts": 1},
                           "transport": {"kind": "ray", "max_actors": 1, "compiled_graph": "on",
                                         "round_timeout_s": 3}})
    transport = RayTransport()
    first: dict[str, Any] = {}
    restarts: list[dict[str, Any]] = []

    def on_epoch_end(epoch: int, record: dict[str, Any], engine: Engine) -> None:
        first.update(transport.actors)

    try:
        engine = Engine(cfg, transport, BlobSource(num_parties=3, num_train=240, num_test=60), progress=False,
                        on_epoch_end=on_epoch_end)
        with pytest.raises(PartyFailure, match=r"round_timeout_s=3 \(compiled graph\); gave up after 1 restart"):
            engine.run()
        restarts = engine.recovery.restarts
        assert transport.actors["server"] is first["server"]  # reset in place: only the stuck host was killed
        assert transport.actors["parties-0"] is not first["parties-0"]
    finally:
        transport.shutdown()
    assert len(restarts) == 1 and restarts[0]["epoch"] == 1 and "no answer" in restarts[0]["cause"]

def test_auto_compiles_only_long_ray_runs_and_never_skip_party_or_inprocess():
    class G:
        party_groups = ["p0", "p1"]

        def chain(self, hops):
            return tuple(tuple(h) for h in hops)

    cfg = _cfg("npq", {}, compiled="auto")
    assert compiled_chain(G(), cfg, server="s", unmask_hops=0, steps=5) is None  # 10 steps: too short
    long = replace(cfg, train=replace(cfg.train, epochs=MIN_AUTO_STEPS))
    assert compiled_chain(G(), long, server="s", unmask_hops=1, steps=1) == (
        ("s",), ("p0", "p1"), ("s",), ("p0", "p1"))
    on = _cfg("npq", {}, compiled="on")
    assert compiled_chain(G(), on, server="s", unmask_hops=0, steps=1) == (("s",), ("p0", "p1"))
    skip = replace(on, train=replace(on.train, on_dropout="skip-party"))
    assert compiled_chain(G(), skip, server="s", unmask_hops=0, steps=1) is None
    with pytest.raises(ConfigError, match="transport.compiled_graph"):
        _cfg("npq", {}, compiled="sometimes")
    # YAML 1.1 reads on/off as booleans (--set transport.compiled_graph=on): they mean "on"/"off"
    assert _cfg("npq", {}, compiled=True).transport.compiled_graph == "on"
    assert _cfg("npq", {}, compiled=False).transport.compiled_graph == "off"
    from simulations.cli.runner import resolve_config
    assert resolve_config(None, ["transport.compiled_graph=on"], transport="ray").transport.compiled_graph == "on"
    assert resolve_config(None, []).transport.compiled_graph == "auto"  # the default


@pytest.mark.ray
@pytest.mark.timeout(400, method="thread")
def test_a_restart_after_a_hung_party_on_the_task_path_honours_round_timeout_s(ray_local, monkeypatch):
    """The reset of a host still stuck in its hang waits transport.round_timeout_s, not a fixed 120 s:
    two hangs and one restart with round_timeout_s=3 end in well under one old wait."""
    import time

    from tests.support.helpers import BlobSource
    from vfl.core.errors import PartyFailure
    from vfl.engine.engine import Engine
    from vfl.runtime.faults import FAULT_ENV
    from vfl.runtime.transport.ray_transport import RayTransport

    monkeypatch.setenv(FAULT_ENV, "party1@1:2!hang")
    cfg = load_run_config({"num_parties": 3, "seed": 2, "strategy": "npq",
                           "train": {"epochs": 2, "batch_size": 8, "on_failure": "restart", "max_restarts": 1},
                           "transport": {"kind": "ray", "max_actors": 1, "compiled_graph": "off",
                                         "round_timeout_s": 3}})
    transport = RayTransport()
    try:
        engine = Engine(cfg, transport, BlobSource(num_parties=3, num_train=240, num_test=60), progress=False)
        start = time.monotonic()
        with pytest.raises(PartyFailure, match="gave up after 1 restart"):
            engine.run()
        elapsed = time.monotonic() - start
    finally:
        transport.shutdown()
    assert len(engine.recovery.restarts) == 1
    assert elapsed < 100, f"{elapsed:.0f} s: the restart waited a fixed 120 s for the hung host"
