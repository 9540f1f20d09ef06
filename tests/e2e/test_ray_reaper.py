"""The watcher that ends a SIGKILLed driver's Ray agents: it reaps what it was told about, and it is small."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil

from vfl.runtime.transport.ray_reaper import Reaper


def _register(reaper: Reaper, proc: subprocess.Popen[bytes]) -> None:
    reaper._send(f"{proc.pid} {psutil.Process(proc.pid).create_time()!r}")


def test_reaper_ends_registered_processes_when_the_driver_pipe_closes():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    reaper = Reaper()
    try:
        _register(reaper, victim)
        assert reaper.proc is not None and reaper.proc.stdin is not None
        reaper.proc.stdin.close()  # the driver died: no "done"
        reaper.proc.wait(timeout=30)
        assert victim.wait(timeout=30) != 0  # terminated by the reaper, not finished
    finally:
        if victim.poll() is None:
            victim.kill()


def test_reaper_stands_down_without_touching_anything():
    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    reaper = Reaper()
    try:
        _register(reaper, victim)
        reaper.stand_down()
        assert victim.poll() is None
    finally:
        victim.kill()
        victim.wait()


def test_reaper_does_not_import_torch():
    """It runs as a plain script: no package import, so no torch in the watcher (~500 MiB resident otherwise)."""
    reaper = Reaper()
    try:
        assert reaper.proc is not None
        proc = psutil.Process(reaper.proc.pid)
        last, steady = -1, 0
        for _ in range(200):  # until it waits on its pipe: resident size unchanged for 1 s
            rss = proc.memory_info().rss
            steady = steady + 1 if rss == last else 0
            if steady >= 10:
                break
            last = rss
            time.sleep(0.1)
        assert not any("libtorch" in m.path for m in proc.memory_maps())
        assert proc.memory_info().rss < 200 * 2**20
    finally:
        reaper.stand_down()
