"""``overhead --two-node``: the Ray run on a private 2-node cluster on this machine vs. a 1-node one.

Both clusters are started here with ``ray start`` (own ``--temp-dir`` and port, 127.0.0.1) and
stopped by terminating only their own processes (never ``ray stop``, which would end every Ray on
the machine). The same config runs on both with ``transport.cpus_per_actor=1``: on the 1-node
cluster (2 CPUs) the server actor and the party actor share a node; on the 2-node cluster (1 CPU
each) they cannot, so every message crosses raylets and object stores. The clusters are measured
alternately (1,2,2,1 for 2 rounds); ``two_node_ratio`` is the ratio of their seconds per epoch
(medians over the epochs after each run's warm-up epoch).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psutil

from simulations.benchmarks.timing import transport_epochs
from vfl.runtime.host import NodeBuilder
from vfl.runtime.transport.base import HostGroup
from vfl.runtime.transport.ray_reaper import end_processes
from vfl.runtime.transport.ray_transport import RayTransport

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """``nodes`` Ray nodes (``ray start --head`` + ``ray start --address``) with ``cpus`` CPUs each."""

    def __init__(self, *, nodes: int, cpus: int) -> None:
        self.nodes, self.cpus = nodes, cpus
        self.port = free_port()
        self.temp = tempfile.mkdtemp(prefix="vflb-")  # short: Ray's socket paths must stay < 108 chars
        self.env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, *args: str) -> None:
        subprocess.run([RAY, "start", *args, "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
                        f"--temp-dir={self.temp}", "--disable-usage-stats"], check=True, env=self.env,
                       capture_output=True, timeout=180)

    def __enter__(self) -> LocalCluster:
        try:
            self._start("--head", f"--port={self.port}", "--include-dashboard=false")
            for _ in range(self.nodes - 1):
                self._start(f"--address={self.address}")
        except BaseException:
            self.__exit__()
            raise
        return self

    def _ours(self) -> list[psutil.Process]:
        """Processes of this cluster only: its temp dir or port on the command line, and their children."""
        roots = []
        for p in psutil.process_iter(["cmdline"]):
            args = " ".join(p.info["cmdline"] or [])
            if self.temp in args or f":{self.port}" in args:
                roots.append(p)
        procs = {p.pid: p for p in roots}
        for p in roots:
            try:
                procs.update({c.pid: c for c in p.children(recursive=True)})
            except psutil.NoSuchProcess:
                pass
        procs.pop(os.getpid(), None)
        return list(procs.values())

    def __exit__(self, *exc: object) -> None:
        end_processes(self._ours(), timeout=15)
        shutil.rmtree(self.temp, ignore_errors=True)


def _node_id(_actor: Any) -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


class PlacedRayTransport(RayTransport):
    """RayTransport that records on which Ray node each host actor runs (``placement``)."""

    placement: dict[str, str]

    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        super().start(groups, build, threads=threads)
        self.placement = {n: self._ray.get(a.__ray_call__.remote(_node_id)) for n, a in self.actors.items()}


def spread(placement: dict[str, str]) -> dict[str, int]:
    """Host group -> node index (0, 1, ... in order of first appearance): shows the actors' spread."""
    index: dict[str, int] = {}
    return {g: index.setdefault(node, len(index)) for g, node in placement.items()}


def measure(cfg: Any, data: Any, *, nodes: int, cpus: int) -> tuple[list[float], dict[str, int]]:
    """Seconds per epoch of ``cfg`` over Ray on a fresh private cluster of ``nodes`` x ``cpus``."""
    import ray

    with LocalCluster(nodes=nodes, cpus=cpus) as cluster:
        transport = PlacedRayTransport(address=cluster.address)
        try:
            epochs, _ = transport_epochs(cfg, data, transport)
        finally:
            ray.shutdown()
    return epochs, spread(transport.placement)


def abba(rounds: int) -> list[int]:
    """Node counts in measuring order: 1,2 then 2,1, ... (a load drift on a shared machine hits both
    topologies alike instead of biasing the ratio)."""
    return [n for r in range(rounds) for n in ((1, 2) if r % 2 == 0 else (2, 1))]


def two_node_ratio(cfg: Any, data: Any, *, rounds: int = 2) -> dict[str, Any]:
    """The same run on 1 node (2 CPUs) and on 2 nodes (1 CPU each), one actor per CPU, measured in
    ``abba(rounds)`` order; the ratio of the medians of their epochs after each run's warm-up epoch."""
    run = dataclasses.replace(cfg, transport=dataclasses.replace(cfg.transport, cpus_per_actor=1.0))
    epochs: dict[int, list[list[float]]] = {1: [], 2: []}
    placement: dict[int, dict[str, int]] = {}
    for nodes in abba(rounds):
        times, placement[nodes] = measure(run, data, nodes=nodes, cpus=2 // nodes)
        epochs[nodes].append(times)
    med = {n: statistics.median([t for times in runs for t in (times[1:] or times)]) for n, runs in epochs.items()}
    return {"two_node_ratio": med[2] / med[1], "one_node_ray_s_per_epoch": med[1], "two_node_ray_s_per_epoch": med[2],
            "two_node_placement": placement[2], "one_node_placement": placement[1], "two_node_rounds": rounds,
            "two_node_per_epoch_s": {"one_node": epochs[1], "two_node": epochs[2]}}
