"""SecAgg mode ``announced`` over Ray: the task path and the socket data plane run its two-hop plan (no unmask
exchange) and train what the in-process run trains, bit for bit, with the same bytes on the wire."""

from __future__ import annotations

from typing import Any

import pytest
import torch

import strategies  # noqa: F401
from tests.support.helpers import run_with_states
from vfl.engine.schema import load_run_config

pytestmark = [pytest.mark.ray]
M, N, B = 3, 240, 50
LEDGER_KEYS = ("total_bytes_up", "total_bytes_down", "messages_up", "messages_down", "bytes_by_kind", "epsilon")


def _cfg(transport: dict[str, Any]):
    return load_run_config({"strategy": "pbm", "num_parties": M, "seed": 3,
                            "params": {"b": 8, "secagg_mode": "announced"},
                            "model": {"embed_dim": 6, "bottom_hidden": [8], "head_hidden": [8]},
                            "train": {"epochs": 2, "batch_size": B, "lr": 0.05},
                            "privacy": {"noise_rng": "seeded"}, "transport": transport})


def _params(states: dict[int, dict[str, Any]]) -> list[torch.Tensor]:
    return [t for nid in sorted(states) for st in states[nid].values() if isinstance(st, dict)
            for t in st.values() if isinstance(t, torch.Tensor)]


def test_ray_task_path_and_socket_plane_train_the_in_process_parameters(ray_local):
    from vfl.runtime.transport.ray_transport import RayTransport

    ref, ref_h, ref_states = run_with_states(_cfg({"kind": "inprocess"}), num_train=N)
    kinds = set(ref["bytes_by_kind"])  # no exchange after the embeddings, no seed shares at set-up
    assert {"train.forward", "query.secagg_roster"} <= kinds and not any(
        w in k for k in kinds for w in ("unmask", "shares", "deliver"))
    for plane in ("ray", "socket"):
        s, h, states = run_with_states(_cfg({"kind": "ray", "data_plane": plane, "max_actors": 2}),
                                       num_train=N, transport=RayTransport())
        assert [r["train_loss"] for r in h] == [r["train_loss"] for r in ref_h], plane
        assert [r["test_acc"] for r in h] == [r["test_acc"] for r in ref_h], plane
        for key in LEDGER_KEYS:
            assert s.get(key) == ref.get(key), (plane, key)
        for a, b in zip(_params(states), _params(ref_states), strict=True):
            assert torch.equal(a, b)
