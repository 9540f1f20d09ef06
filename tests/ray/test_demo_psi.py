"""`vfl run demo-psi` over Ray actors: the demo through per-party files and PSI, and a bad party file's type kept."""

from __future__ import annotations

import pytest

from simulations.cli.runner import execute, resolve_config
from tests.e2e.test_demo_psi import _broken_config  # noqa: F401
from vfl.runtime.transport.ray_transport import RayTransport


@pytest.mark.ray
def test_demo_psi_over_ray(tmp_path, ray_local):
    cfg = resolve_config("demo-psi", ["train.epochs=2"])
    s = execute(cfg, out_dir=tmp_path / "ray", progress=False, transport=RayTransport()).summary
    assert s["transport"] == "ray" and s["psi_intersection_size"] == round(0.8 * 1797)
    assert s["final_test_acc"] > 0.3 and s["signature_bytes"] > 0 and s["psi_bytes"] > 0


@pytest.mark.ray
def test_a_bad_party_file_in_a_ray_actor_keeps_its_type(tmp_path, ray_local):
    from vfl.core.errors import DataError

    cfg = resolve_config(_broken_config(tmp_path), ["transport.parties_per_actor=1"])
    with pytest.raises(DataError, match=r"gone\.csv: file not found \(data\.parties\[1\]\.path\)"):
        execute(cfg, out_dir=tmp_path / "run", progress=False, transport=RayTransport())
