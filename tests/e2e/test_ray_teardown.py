"""Ending a local Ray: the autoscaler monitor is SIGKILLed before ``ray.shutdown`` (which would wait 1 s
for it), only it, and the shutdown leaves no process of the session behind and prints nothing about it."""

from __future__ import annotations

import subprocess
import sys

from vfl.runtime.transport.ray_teardown import MONITOR, end_monitor, monitors

SLEEP = "import time; time.sleep(120)"


def test_end_monitor_ends_the_monitor_child_and_nothing_else():
    before = {p.pid for p in monitors()}  # in the full suite, the session's own local Ray has one: left alone

    def new_monitors() -> list:
        return [p for p in monitors() if p.pid not in before]

    monitor = subprocess.Popen([sys.executable, "-c", SLEEP, f"/site-packages/ray/{MONITOR}"])
    other = subprocess.Popen([sys.executable, "-c", SLEEP, "/site-packages/ray/dashboard/dashboard.py"])
    try:
        assert [p.pid for p in new_monitors()] == [monitor.pid]
        assert end_monitor(new_monitors()) == [monitor.pid]
        assert monitor.poll() is not None  # ended and reaped (SIGKILL: no handler of its own runs)
        assert other.poll() is None
        assert new_monitors() == [] and end_monitor([]) == []  # nothing left to end
    finally:
        for p in (monitor, other):
            if p.poll() is None:
                p.kill()
                p.wait()


