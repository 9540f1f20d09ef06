"""A run against a local 2-node Ray cluster started by the test (own temp dir, torn down after)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.ray_cluster import LocalCluster

pytestmark = [pytest.mark.ray]
VFL = str(Path(sys.executable).parent / "vfl")


def test_cli_joins_a_two_node_cluster(tmp_path):
    with LocalCluster(workers=1, cpus_per_node=1) as cluster:
        out = tmp_path / "run"
        env = dict(os.environ, RAY_AUTH_MODE="disabled")
        proc = subprocess.run([VFL, "run", "demo", "--address", cluster.address, "--out", str(out), "--no-progress",
                               "--set", "train.epochs=2", "--set", "transport.parties_per_actor=1",
                               "--set", "transport.cpus_per_actor=0.3"],
                              capture_output=True, text=True, env=env, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
        probe = (f"import ray, json; ray.init(address={cluster.address!r}, configure_logging=False, "
                 "log_to_driver=False); print(json.dumps(sum(n['Alive'] for n in ray.nodes())))")
        nodes = subprocess.run([sys.executable, "-c", probe],
            capture_output=True, text=True, env=env, timeout=120)
        assert nodes.stdout.strip().splitlines()[-1] == "2"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["transport"] == "ray" and summary["epochs"] == 2
