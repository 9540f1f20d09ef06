"""Training that goes non-finite inside a Ray actor stops with ONE line of its own type."""

from __future__ import annotations

import pytest

from tests.e2e.test_nonfinite import TINY, M  # noqa: F401


@pytest.mark.ray
def test_non_finite_in_a_ray_actor_keeps_its_type(tmp_path, ray_local):
    """Over Ray the party's error crosses the actor boundary as NonFiniteError (not a PartyFailure that
    a restart would retry forever), and the run directory keeps epoch 0."""
    from simulations.cli.runner import execute, resolve_config
    from vfl.core.errors import NonFiniteError
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = resolve_config("demo", [*TINY, f"model.bottom={M}:nan_bottom", "transport.kind=ray"])
    with pytest.raises(NonFiniteError, match=r"epoch 1, step 1: the embedding of party0 \(node 1\)"):
        execute(cfg, out_dir=tmp_path / "r", progress=False, transport=RayTransport())
    assert not (tmp_path / "r" / "summary.json").exists() and (tmp_path / "r" / "metrics.jsonl").read_text()
