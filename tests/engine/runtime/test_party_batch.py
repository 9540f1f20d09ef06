"""Parties sharing a host take the server's gradient with one fused backward (parties/vertical/party_batch.py):
the run is bit-identical to one party per host (parameters, optimizer state, metrics, bytes), and
the fused path really ran (it can fail: a wrong order or a missed step changes the parameters)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import strategies  # noqa: F401
from parties.vertical import party as vertical
from parties.vertical import party_batch
from strategies.base.vertical import VerticalStrategy
from tests.support.helpers import run_with_states
from vfl.engine.schema import load_run_config
from vfl.runtime.fast import torch_step as fast_step

M, N, B = 3, 200, 50


def _cfg(strategy: str, params: dict[str, Any], *, per_host: int, q: int = 1, optimizer: str = "sgd",
         **train: Any):
    return load_run_config({
        "strategy": strategy, "num_parties": M, "seed": 5, "params": params,
        "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
        "train": {"epochs": 2, "batch_size": B, "lr": 0.05, "optimizer": optimizer, "local_steps": q, **train},
        "privacy": {"noise_rng": "seeded"}, "transport": {"parties_per_actor": per_host}})


def _run(cfg, transport=None) -> tuple[dict[str, Any], list[dict[str, Any]], dict[int, dict[str, Any]]]:
    return run_with_states(cfg, num_train=N, transport=transport)


def _flat(state: Any) -> list[Any]:
    if isinstance(state, dict):
        return [x for k in sorted(state, key=str) for x in [k, *_flat(state[k])]]
    if isinstance(state, list | tuple):
        return [x for v in state for x in _flat(v)]
    return [state]


def _assert_identical(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]]) -> None:
    assert sorted(a) == sorted(b)
    for nid in a:
        fa, fb = _flat(a[nid]), _flat(b[nid])
        assert len(fa) == len(fb)
        for x, y in zip(fa, fb, strict=True):
            if isinstance(x, torch.Tensor):
                assert torch.equal(x, y), f"node {nid}"
            else:
                assert x == y, f"node {nid}"


@pytest.mark.parametrize(("strategy", "params", "q", "optimizer"), [
    ("npq", {}, 1, "sgd"), ("npq", {}, 2, "adam"), ("ldp", {"sigma": 1.0}, 1, "sgd"), ("npq+secagg", {}, 1, "sgd")])
def test_fused_host_is_bit_identical_to_one_party_per_host(monkeypatch, strategy, params, q, optimizer):
    fused_calls: list[int] = []

    def spy(base, deliveries):
        out = vertical_train_together(base, deliveries)
        if out is not None:
            fused_calls.append(len(deliveries))
        return out

    vertical_train_together = vertical.train_together
    monkeypatch.setattr(vertical, "train_together", spy)
    sep_summary, sep_hist, sep_states = _run(_cfg(strategy, params, per_host=1, q=q, optimizer=optimizer))
    assert fused_calls == []  # one party per host: nothing to fuse
    fused_summary, fused_hist, fused_states = _run(_cfg(strategy, params, per_host=M, q=q, optimizer=optimizer))
    steps = -(-N // B)
    assert fused_calls == [M] * (2 * steps)  # every gradient delivery (2 epochs x steps)
    _assert_identical(fused_states, sep_states)
    assert [r["train_loss"] for r in fused_hist] == [r["train_loss"] for r in sep_hist]
    for key in ("total_bytes_up", "total_bytes_down", "payload_bytes_up", "payload_bytes_down", "setup_bytes",
                "eval_bytes", "bytes_per_party"):
        assert fused_summary[key] == sep_summary[key], key


def test_a_delivery_the_batch_path_does_not_cover_falls_back():
    """Several messages for one party (or none with a gradient): None, the host goes one by one."""
    from flwr.common import Message

    class Stub:
        pass

    assert vertical.train_together(vertical.PassiveParty, [(Stub(), [Message.__new__(Message)])]) is None  # type: ignore[list-item]


def _torch_steps_only(monkeypatch: Any) -> None:
    """The reference: every optimizer takes torch's own ``step()`` (no fused step anywhere)."""
    monkeypatch.setattr(fast_step, "fused_step", lambda optimizers: False)
    monkeypatch.setattr(party_batch, "fused_step", lambda optimizers: False)


def _spy_fused_step(monkeypatch) -> list[tuple[int, bool]]:
    calls: list[tuple[int, bool]] = []
    real = fast_step.fused_step  # the module's own (callers restore patches before asking for a spy)

    def spy(optimizers):
        out = real(optimizers)
        calls.append((len(optimizers), out))
        return out

    monkeypatch.setattr(party_batch, "fused_step", spy)
    return calls


def _assert_same_run(a, b) -> None:
    _assert_identical(a[2], b[2])
    assert [r["train_loss"] for r in a[1]] == [r["train_loss"] for r in b[1]]
    for key in ("total_bytes_up", "total_bytes_down", "payload_bytes_up", "payload_bytes_down", "eval_bytes"):
        assert a[0][key] == b[0][key], key


@pytest.mark.parametrize(("optimizer", "train", "q"), [
    ("sgd", {"momentum": 0.9, "weight_decay": 1e-3}, 1), ("adam", {"weight_decay": 1e-3}, 2), ("adamw", {}, 1)])
def test_fused_optimizer_step_is_bit_identical_to_torch_steps(monkeypatch, optimizer, train, q):
    """The host's parties step in one multi-tensor call (vfl/runtime/fast/torch_step.py): same bits as each
    party's own torch ``optimizer.step()`` on its own host (parameters, momentum/Adam state, losses, bytes)."""
    _torch_steps_only(monkeypatch)
    ref = _run(_cfg("npq", {}, per_host=1, q=q, optimizer=optimizer, **train))
    monkeypatch.undo()
    calls = _spy_fused_step(monkeypatch)
    fused = _run(_cfg("npq", {}, per_host=M, q=q, optimizer=optimizer, **train))
    assert calls == [(M, True)] * (2 * -(-N // B))  # every gradient delivery took the fused step
    _assert_same_run(fused, ref)


def test_parties_with_different_hyperparameters_step_one_by_one(monkeypatch):
    """A party with its own learning rate: the fused step steps aside, and the run is still identical."""
    party_node = VerticalStrategy.party_node

    def own_lr(self, spec, *args, **kwargs):
        node = party_node(self, spec, *args, **kwargs)
        node.optimizer.param_groups[0]["lr"] *= 1 + 0.25 * spec.node_id
        return node

    monkeypatch.setattr(VerticalStrategy, "party_node", own_lr)
    cfg = _cfg("npq", {}, per_host=M, optimizer="sgd", momentum=0.5)
    with monkeypatch.context() as mp:
        _torch_steps_only(mp)
        ref = _run(cfg)
    calls = _spy_fused_step(monkeypatch)
    out = _run(cfg)
    assert calls == [(M, False)] * (2 * -(-N // B))  # asked every time, declined every time
    _assert_same_run(out, ref)
    lrs = [ref[2][nid]["optimizer"]["param_groups"][0]["lr"] for nid in range(1, M + 1)]
    assert len(set(lrs)) == M  # the parties really had their own learning rates
