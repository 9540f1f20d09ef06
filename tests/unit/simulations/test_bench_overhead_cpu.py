"""The overhead benchmark's CPU per process: the transport epochs' CPU only (not the paired floor's)."""

from __future__ import annotations

import time

import pytest

from simulations.benchmarks.overhead import cpu_ms_per_step, cpu_paired


def _burn(seconds: float) -> None:
    """Spend ``seconds`` of this process's CPU time."""
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


class _Actors:
    """A transport whose one 'actor' is this process (``host_call(name, "pid")``, as RayTransport's)."""

    actors = {"parties-0": object()}

    def host_call(self, group: str, method: str) -> int:
        import os

        assert (group, method) == ("parties-0", "pid")
        return os.getpid()


def test_cpu_paired_counts_the_transport_epoch_not_the_floor() -> None:
    floors: list[int] = []
    hook, readings = cpu_paired(lambda epoch: (floors.append(epoch), _burn(0.3)), _Actors())
    hook(0)  # end of the warm-up epoch: the first reading, then its floor epoch
    _burn(0.06)  # the transport's next epoch
    hook(1)
    assert floors == [0, 1] and len(readings) == 1
    for name in ("driver", "parties-0"):  # (both are this process here)
        assert 0.03 < readings[0][name] < 0.2, readings  # the 0.3 s floors are left out


def test_cpu_ms_per_step_medians_total_and_wall() -> None:
    epochs = [{"driver": 0.1, "server": 0.3}, {"driver": 0.2, "server": 0.1}, {"driver": 0.3, "server": 0.2}]
    out = cpu_ms_per_step(epochs, wall_s=[9.0, 0.4, 0.5, 0.6], steps=100)  # wall: the last 3 epochs
    assert out == pytest.approx({"driver": 2.0, "server": 2.0, "total": 4.0, "wall": 5.0})
    assert cpu_ms_per_step([], wall_s=[1.0], steps=10) == {}
