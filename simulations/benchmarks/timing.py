"""Seconds per training epoch of a run over a given transport, with the runtime's profile counters
(shared by the overhead and two-node benchmarks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from simulations.data.source import ConfigDataSource
from vfl.engine.engine import Engine
from vfl.engine.schema import RunConfig
from vfl.runtime import profile
from vfl.runtime.transport.inprocess import InProcessTransport


def transport_epochs(cfg: RunConfig, data: ConfigDataSource, transport: Any, *,
                     between: Callable[[int], None] | None = None) -> tuple[list[float], dict[str, float]]:
    """Seconds per training epoch, and the profile counters (seconds per category) summed over the
    driver and every host after the warm-up epoch. ``between(epoch)`` runs after each epoch, outside
    its timing and its counters (``overhead``: one floor epoch per transport epoch, interleaved)."""
    def hosts_counters(reset: bool) -> list[dict[str, dict[str, float]]]:
        if isinstance(transport, InProcessTransport):  # hosts live in the driver: one set of counters
            return []
        return [transport.host_call(g.name, "profile_counters", reset) for g in engine.groups]

    def after_warmup(epoch: int, record: dict[str, Any], eng: Engine) -> None:
        if between is not None:
            on, profile.enabled = profile.enabled, False  # the floor's epoch is not the transport's cost
            try:
                between(epoch)
            finally:
                profile.enabled = on
        if epoch == 0:
            hosts_counters(True)
            profile.reset()

    engine = Engine(cfg, transport, data, progress=False, on_epoch_end=after_warmup)
    try:
        result = engine.run()
        parts = [*hosts_counters(False), profile.counters()]
    finally:
        transport.shutdown()
    total: dict[str, float] = {k: 0.0 for k in profile.CATEGORIES}
    for part in parts:
        for k, v in part.items():
            total[k] += v["s"]
    return [r["train_s"] for r in result.history], total
