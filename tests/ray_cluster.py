"""Start and stop a private local multi-node Ray cluster for tests (never `ray stop`, which would
kill every Ray on the machine): we terminate only the processes of our own temp dir and port."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

RAY = str(Path(sys.executable).parent / "ray")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalCluster:
    """``ray start --head`` + ``ray start --address`` on 127.0.0.1 with their own temp dir."""

    def __init__(self, workers: int = 1, cpus_per_node: int = 1) -> None:
        self.port = free_port()
        self.temp = tempfile.mkdtemp(prefix="vflc-")
        self.workers = workers
        self.cpus = cpus_per_node
        self.env = dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _ray(self, *args: str) -> None:
        subprocess.run([RAY, "start", *args, "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}",
                        f"--temp-dir={self.temp}", "--disable-usage-stats"], check=True, env=self.env,
                       capture_output=True, timeout=120)

    def __enter__(self) -> LocalCluster:
        self._ray("--head", f"--port={self.port}", "--include-dashboard=false")
        for _ in range(self.workers):
            self._ray(f"--address={self.address}")
        return self

    def _ours(self) -> list[psutil.Process]:
        roots = []
        for p in psutil.process_iter(["cmdline"]):
            args = " ".join(p.info["cmdline"] or [])
            if self.temp in args or f":{self.port}" in args:
                roots.append(p)
        procs = {p.pid: p for p in roots}
        for p in roots:
            try:
                for c in p.children(recursive=True):
                    procs[c.pid] = c
            except psutil.NoSuchProcess:
                pass
        procs.pop(os.getpid(), None)
        return list(procs.values())

    def __exit__(self, *exc: object) -> None:
        procs = self._ours()
        for p in procs:
            try:
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _, alive = psutil.wait_procs(procs, timeout=15)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)
