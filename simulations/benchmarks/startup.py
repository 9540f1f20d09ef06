"""``overhead --startup``: where a 1-epoch demo's seconds go, per transport, from a fresh interpreter.

Each transport runs in its own subprocess (a user's ``vfl run`` starts cold: imports, Ray and actors
included), ``--rounds`` times, interleaved. The parts are consecutive and sum to ``total_s``:
``interpreter`` (spawn to the first line), ``import`` (torch, the runtime, the strategies, flwr; Ray's import is in ``ray_init``),
``data`` (the driver's data source: paths and partition plan), ``ray_init`` (``RayTransport()``: the
local cluster; 0 in-process), ``hosts`` (``transport.start``: actors created and each host's nodes
built, data loaded inside them), ``setup`` (``Engine.protocol_setup``: authentication, PSI, SecAgg keys),
``train`` (the epoch's steps, the first included), ``eval``, ``shutdown``. Writes ``DIR/startup.json``
with ``startup_s`` per transport (medians over rounds of each part, and ``ready_s``: everything
before the first step) and the Ray/in-process ratio of ``total_s``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PARTS = ("interpreter", "import", "data", "ray_init", "hosts", "setup", "train", "eval", "shutdown")


def worker(spec: dict[str, Any]) -> dict[str, Any]:
    """One cold 1-epoch run; every part timed from the driver."""
    t_first = time.time()
    marks = {"interpreter": t_first - spec["t0"]}
    t = time.perf_counter()
    import torch  # noqa: F401

    import strategies  # noqa: F401  (fills the strategy registry, as the CLI does)
    from simulations.datasource import make_data_source
    from simulations.runner import resolve_config
    from vfl.engine import Engine
    from vfl.transport.inprocess import InProcessTransport
    from vfl.transport.ray_transport import RayTransport
    marks["import"] = time.perf_counter() - t
    cfg = resolve_config(spec["config"], spec["sets"])
    t = time.perf_counter()
    data = make_data_source(cfg)
    marks["data"] = time.perf_counter() - t
    t = time.perf_counter()
    transport = RayTransport() if cfg.transport.kind == "ray" else InProcessTransport()
    marks["ray_init"] = time.perf_counter() - t
    engine = Engine(cfg, transport, data, progress=False)
    start, setup = transport.start, engine.protocol_setup

    def timed(name: str, fn: Any) -> Any:
        def run(*a: Any, **k: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                marks[name] = marks.get(name, 0.0) + time.perf_counter() - t0
        return run

    transport.start = timed("hosts", start)  # type: ignore[method-assign]
    engine.protocol_setup = timed("setup", setup)  # type: ignore[method-assign]
    t = time.perf_counter()
    try:
        record = engine.run().history[0]
    finally:
        t_shut = time.perf_counter()
        transport.shutdown()
        marks["shutdown"] = time.perf_counter() - t_shut
    run_s = t_shut - t
    marks["train"] = record["train_s"]
    marks["eval"] = run_s - marks["hosts"] - marks["setup"] - marks["train"]  # evaluation and epoch book-keeping
    marks["total"] = time.time() - spec["t0"]
    marks["ready"] = sum(marks[p] for p in ("interpreter", "import", "data", "ray_init", "hosts", "setup"))
    marks["test_acc"] = record.get("test_acc")
    return marks


def run_startup(*, config: str, sets: list[str], out: Path, rounds: int) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict[str, Any]]] = {"inprocess": [], "ray": []}
    for _ in range(rounds):
        for kind in runs:
            spec = {"config": config, "sets": [*sets, "train.epochs=1", f"transport.kind={kind}"],
                    "transport": kind, "t0": time.time()}
            env = {**os.environ, "VFL_STARTUP_SPEC": json.dumps(spec)}
            proc = subprocess.run([sys.executable, "-m", "simulations.benchmarks.startup"], env=env,
                                  capture_output=True, text=True, timeout=900)
            if proc.returncode != 0:
                raise RuntimeError(f"startup run over {kind} failed: {proc.stderr.strip().splitlines()[-3:]}")
            runs[kind].append(json.loads(proc.stdout.strip().splitlines()[-1]))
            r = runs[kind][-1]
            print(f"{kind:<10} total {r['total']:6.2f} s  ready {r['ready']:6.2f} s  " +
                  " ".join(f"{p} {r.get(p, 0.0):.2f}" for p in PARTS), flush=True)
    keys = (*PARTS, "ready", "total")
    startup = {k: {p: statistics.median(r.get(p, 0.0) for r in v) for p in keys} for k, v in runs.items()}
    result = {"config": config, "sets": sets, "rounds": rounds, "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
              "startup_s": startup, "runs": runs,
              "ray_over_inprocess_total": startup["ray"]["total"] / startup["inprocess"]["total"],
              "target_ray_over_inprocess": 2.0}
    print(f"\nseconds      {' '.join(f'{p:>11}' for p in keys)}")
    for k, v in startup.items():
        print(f"{k:<12} {' '.join(f'{v[p]:>11.2f}' for p in keys)}")
    print(f"ray / inprocess (total): {result['ray_over_inprocess_total']:.2f} (goal <= 2.0)")
    (out / "startup.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {out / 'startup.json'}")
    return result


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(os.environ["VFL_STARTUP_SPEC"]))))
