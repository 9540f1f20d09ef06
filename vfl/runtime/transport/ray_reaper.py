"""Clean-up after a local Ray whose driver was SIGKILLed.

A local Ray's GCS and raylet end with the driver, but its dashboard and runtime-env agents stay
a minute or more (they try to report the raylet's death to a GCS that is gone), and Ray 2.60
cannot start without them. So the driver starts this small watcher with a pipe and tells it the
PIDs of the Ray processes it started; when the pipe closes without ``done`` (the driver died),
the watcher terminates those that are still the same processes (PID and start time match).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import IO

import psutil

DONE = "done"


class Reaper:
    """Driver side: ``watch_descendants()`` after starting Ray, ``stand_down()`` after shutting it."""

    def __init__(self) -> None:
        # Run this file as a script (-P: its folder not on sys.path), not ``-m vfl.runtime.transport...``:
        # the package import pulls in torch (~500 MiB resident) for a watcher that needs psutil.
        self.proc: subprocess.Popen[str] | None = subprocess.Popen(
            [sys.executable, "-P", os.path.abspath(__file__)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
        self._seen: set[int] = set()

    def _send(self, line: str) -> None:
        stdin: IO[str] | None = self.proc.stdin if self.proc is not None else None
        if stdin is None:
            return
        try:
            stdin.write(line + "\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass

    def watch_descendants(self) -> None:
        """Register every process this driver started (Ray's head processes, agents, workers)."""
        if self.proc is None:
            return
        for p in psutil.Process().children(recursive=True):
            if p.pid == self.proc.pid or p.pid in self._seen:
                continue
            try:
                self._send(f"{p.pid} {p.create_time()!r}")
                self._seen.add(p.pid)
            except psutil.Error:
                pass

    def reap_now(self) -> None:
        """Ray failed to start: end what it started (as if this driver had died), then the watcher exits."""
        if self.proc is None:
            return
        self.watch_descendants()
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=15)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.proc = None

    def stand_down(self) -> None:
        """Ray was shut down cleanly: let the watcher exit without touching anything."""
        if self.proc is None:
            return
        self._send(DONE)
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        self.proc = None


def _reap(procs: dict[int, float]) -> None:
    victims = []
    for pid, started in procs.items():
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - started) < 1e-3:  # not a recycled PID
                victims.append(p)
        except psutil.Error:
            pass
    end_processes(victims, timeout=3)


def end_processes(procs: list[psutil.Process], *, timeout: float) -> None:
    """SIGTERM each process, then SIGKILL those still alive after ``timeout`` seconds."""
    for p in procs:
        try:
            p.terminate()
        except psutil.Error:
            pass
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    for p in alive:
        try:
            p.kill()
        except psutil.Error:
            pass


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's to handle
    procs: dict[int, float] = {}
    for line in sys.stdin:
        text = line.strip()
        if text == DONE:
            return 0
        try:
            pid, started = text.split()
            procs[int(pid)] = float(started)
        except ValueError:
            continue
    if procs:  # EOF without "done": the driver is gone
        _reap(procs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
