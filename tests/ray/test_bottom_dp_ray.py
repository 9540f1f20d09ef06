"""``privacy.bottom_dp`` over Ray actors: Opacus runs inside the party actors and the run reports an
end-to-end ε (1 epoch of the digits-5p config, crypto noise)."""

from __future__ import annotations

import math

import pytest

from simulations.cli.runner import execute, resolve_config
from vfl.privacy import SCOPE_END_TO_END
from vfl.runtime.transport.ray_transport import RayTransport

pytestmark = [pytest.mark.ray]


def test_bottom_dp_runs_inside_ray_actors(tmp_path, ray_local):
    cfg = resolve_config("digits-5p", ["train.epochs=1", "data.train_subsample=300",
                                       "privacy.bottom_dp={noise_multiplier: 1.0, max_grad_norm: 1.0}"])
    assert cfg.transport.kind == "ray" and cfg.privacy.noise_rng == "crypto"
    s = execute(cfg, out_dir=tmp_path / "run", progress=False, transport=RayTransport()).summary
    assert s["transport"] == "ray" and s["epochs"] == 1
    assert s["epsilon_scope"] == SCOPE_END_TO_END and math.isfinite(s["epsilon"]) and s["epsilon"] > 0
    assert s["final_test_acc"] is not None
