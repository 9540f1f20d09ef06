"""Ray's session files go to a short ``vflray-*`` folder (socket paths must stay < 108 chars); the
transport that made that folder removes it at shutdown, so runs leave nothing behind in /tmp."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray]

_SCRIPT = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from vfl.runtime.transport.ray_transport import RayTransport
    asked = sys.argv[1]
    t = RayTransport(temp_dir=asked, num_cpus=1)
    made = Path(Path(asked + ".path").read_text().strip())
    assert made.name.startswith("vflray-") and made.is_dir(), made
    assert any(made.iterdir()), "Ray wrote its session files there"
    t.shutdown()
    print(made)
""")


def test_a_ray_temp_folder_made_by_the_transport_is_removed_at_shutdown(tmp_path):
    asked = tmp_path / ("a-run-directory-with-a-long-name-" + "x" * 40) / "ray-tmp"  # too long for sockets
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(asked)], capture_output=True, text=True, env=env,
                         timeout=300, cwd=Path(__file__).resolve().parents[2])
    assert out.returncode == 0, out.stderr[-2000:]
    made = Path(out.stdout.strip().splitlines()[-1])
    assert made.name.startswith("vflray-")
    assert not made.exists(), f"{made} left behind"
