"""SIGTERM while the driver blocks in ``ray.get`` (e.g. a restart waiting for a hung host) is
reported as SIGTERM (exit 143), not SIGINT (130): Ray turns the handler's ``Interrupted`` into a
plain ``KeyboardInterrupt``, and the CLI recovers the signal that was received."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from simulations.cli import signals

pytestmark = [pytest.mark.ray]


def test_sigterm_inside_ray_get_exits_143(ray_local):
    import ray

    @ray.remote
    def slow() -> None:
        time.sleep(30)

    ref = slow.remote()
    with signals.terminate_as_interrupt():
        threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(KeyboardInterrupt) as info:
            ray.get(ref, timeout=25)
    ray.cancel(ref, force=True)
    # The control: what arrives is Ray's plain KeyboardInterrupt, which the CLI used to call SIGINT (130).
    assert not isinstance(info.value, signals.Interrupted)
    got = signals.as_interrupted(info.value)
    assert (got.exit_code, str(got)) == (143, "SIGTERM")


def test_a_plain_ctrl_c_is_still_sigint():
    with signals.terminate_as_interrupt():
        got = signals.as_interrupted(KeyboardInterrupt())
    assert (got.exit_code, str(got)) == (130, "SIGINT")
