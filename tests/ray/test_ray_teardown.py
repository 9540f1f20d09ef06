"""Ending a local Ray: the autoscaler monitor is SIGKILLed before ``ray.shutdown``, quietly (a real local Ray)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

DRIVER = textwrap.dedent("""
    import json, psutil
    from vfl.runtime.transport.ray_teardown import monitors
    from vfl.runtime.transport.ray_transport import RayTransport
    t = RayTransport(num_cpus=1)
    mons = [p.pid for p in monitors()]
    session = psutil.Process().children(recursive=True)
    t.shutdown()
    alive = [p.pid for p in session if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    print(json.dumps({"monitors": mons, "alive": alive}))
""")


@pytest.mark.ray
def test_local_ray_shutdown_ends_its_monitor_quietly():
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = subprocess.run([sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(out["monitors"]) == 1  # a local Ray has one, ended at shutdown
    assert out["alive"] == []  # no process of the session outlives the shutdown
    assert "autoscaler" not in proc.stderr.lower()  # SIGTERM would make it report a "failure"
