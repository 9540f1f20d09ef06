"""Ending a local Ray this driver started without Ray's one-second wait on its autoscaler monitor.

``ray.shutdown()`` ends the head's processes one after another, raylet and GCS first, each with
SIGTERM and up to one second to exit. The autoscaler monitor (``autoscaler/_private/monitor.py``;
on a local cluster a read-only provider with no workers to launch) answers SIGTERM by reporting
its "failure" to the GCS, which is gone by then, so it never exits by itself: Ray waits the full
second and then SIGKILLs it. Every local run paid that second (~10 % of a 1-epoch demo over Ray).
:func:`end_monitor` SIGKILLs it first, which is what Ray does to it a second later; it is only
called for a Ray this driver owns (never for a cluster it joined).
"""

from __future__ import annotations

import psutil

MONITOR = "autoscaler/_private/monitor.py"


def monitors(parent: psutil.Process | None = None) -> list[psutil.Process]:
    """The autoscaler monitors among the direct children of ``parent`` (default: this process)."""
    parent = parent or psutil.Process()
    out = []
    for child in parent.children():
        try:
            if any(arg.endswith(MONITOR) for arg in child.cmdline()):
                out.append(child)
        except psutil.Error:  # exited while being read
            continue
    return out


def end_monitor(procs: list[psutil.Process] | None = None, *, timeout_s: float = 1.0) -> list[int]:
    """SIGKILL this driver's local autoscaler monitor (or just ``procs``) and reap it; returns the PIDs ended."""
    procs = monitors() if procs is None else procs
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=timeout_s)
    return [p.pid for p in procs]
