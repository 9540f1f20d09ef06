"""FedBCD local updates (train.local_steps = Q): the tests over Ray actors."""

from __future__ import annotations

import numpy as np
import pytest

import strategies  # noqa: F401
from tests.engine.runtime.test_local_updates import B, N, _cfg, _run  # noqa: F401


@pytest.mark.ray
def test_q3_over_ray_matches_inprocess(ray_local):
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = _cfg("pbm", {"b": 16}, q=3, optimizer="adam")
    ray_s, ray_h, ray_states = _run(cfg, RayTransport())
    ref_s, ref_h, _ = _run(cfg)
    assert [r["train_loss"] for r in ray_h] == [r["train_loss"] for r in ref_h]  # seeded: same run
    assert ray_s["total_bytes_up"] == ref_s["total_bytes_up"] and ray_s["epsilon"] == ref_s["epsilon"]
    exchanges = 2 * int(np.ceil(N / B))
    assert all({float(s["step"]) for s in st["optimizer"]["state"].values()} == {3.0 * exchanges}
               for st in ray_states.values())
