"""``overhead --startup``: where a 1-epoch demo's seconds go, per transport, from a fresh interpreter.

Each transport runs in its own subprocess (a user's ``vfl run`` starts cold: imports, Ray and actors
included), ``--rounds`` times, interleaved. The parts are consecutive and sum to ``total_s``:
``interpreter`` (spawn to the first line), ``import`` (torch, the runtime, the strategies, flwr; Ray's import is in ``ray_init``),
``data`` (the driver's data source: paths and partition plan), ``ray_init`` (``RayTransport()``: the
local cluster; 0 in-process), ``hosts`` (``transport.start``: actors created and each host's nodes
built, data loaded inside them), ``setup`` (``Engine.protocol_setup``: authentication, PSI, SecAgg keys),
``train`` (the epoch's steps, the first included), ``eval``, ``shutdown``. Writes ``DIR/startup.json``
with ``startup_s`` per transport (medians over rounds of each part, and ``ready_s``: everything
before the first step) and the Ray/in-process ratio of ``total_s``; ``cpu_s`` per transport (CPU
seconds of the driver, the host actors and Ray's own processes, read just before the shutdown) and
``ray_cpu_floor_s`` (that CPU over the cores plus the shutdown: the least wall time the Ray run could
take on this machine with every core busy); ``import_cpu_s``: what each actor's imports cost alone.
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
    from simulations.cli.runner import resolve_config
    from simulations.data.source import make_data_source
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.inprocess import InProcessTransport
    from vfl.runtime.transport.ray_transport import RayTransport
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
    probe_s = 0.0
    try:
        record = engine.run().history[0]
        t_shut = time.perf_counter()
        marks["cpu_s"] = session_cpu(transport)  # before shutdown: every process of the run still exists
        probe_s = time.perf_counter() - t_shut
    finally:
        t_shut = time.perf_counter()
        transport.shutdown()
        marks["shutdown"] = time.perf_counter() - t_shut
    run_s = t_shut - t - probe_s
    marks["train"] = record["train_s"]
    marks["eval"] = run_s - marks["hosts"] - marks["setup"] - marks["train"]  # evaluation and epoch book-keeping
    marks["total"] = time.time() - spec["t0"] - probe_s  # the benchmark's own CPU probe is no part of the run
    marks["ready"] = sum(marks[p] for p in ("interpreter", "import", "data", "ray_init", "hosts", "setup"))
    marks["test_acc"] = record.get("test_acc")
    return marks


def session_cpu(transport: Any) -> dict[str, float]:
    """CPU seconds (user + system) spent so far by the driver, the host actors and Ray's own processes
    (GCS, raylet, agents, idle workers, the reaper): what the cores had to run before the run could end."""
    import psutil

    from simulations.benchmarks.memory import role_of

    actors: dict[int, str] = {}
    for name in getattr(transport, "actors", {}):
        actors[int(transport.host_call(name, "pid"))] = name
    me = psutil.Process()
    out = {"driver": 0.0, "actors": 0.0, "ray": 0.0, "n_actors": 0.0}
    for p in [me, *me.children(recursive=True)]:
        try:
            cpu = p.cpu_times()
            role = role_of(pid=p.pid, name=p.name(), cmdline=" ".join(p.cmdline()), driver=me.pid, actors=actors)
        except psutil.Error:  # exited while being read
            continue
        key = "driver" if role == "driver" else "actors" if role.startswith("actor:") else "ray"
        out[key] += cpu.user + cpu.system
        out["n_actors"] += key == "actors"
        if key == "ray":  # which of Ray's own processes (and the reaper) spent it
            out[role] = out.get(role, 0.0) + cpu.user + cpu.system
    out["total"] = out["driver"] + out["actors"] + out["ray"]
    return out


def import_cpu() -> dict[str, float]:
    """CPU seconds of what every host actor imports, one after another in a fresh interpreter (no other
    process competing): Ray, torch, flwr, the runtime and strategies; ``optimizer``: the first optimizer,
    made as the nodes make it (``vfl.runtime.optim.make_optimizer``: torch's ``Optimizer`` imports ``torch._dynamo``
    unless ``vfl.runtime.fast.torch_light`` can skip it; ``dynamo_imported`` 1/0 says whether it did); ``torch._dynamo``:
    what that import costs (0 when the optimizer already paid it)."""
    code = ("import json, resource, sys\n"
            "def cpu():\n r = resource.getrusage(resource.RUSAGE_SELF); return r.ru_utime + r.ru_stime\n"
            "def optimizer():\n import torch\n from vfl.runtime.optim import make_optimizer\n"
            " make_optimizer(torch.nn.Linear(2, 2).parameters(), name='sgd', lr=0.1, momentum=0.0, weight_decay=0.0)\n"
            "out = {'interpreter': cpu()}\n"
            "for name, step in (('ray', ['ray']), ('torch', ['torch']), ('flwr', ['flwr.common']),\n"
            "                   ('runtime', ['vfl.runtime.host', 'strategies']), ('optimizer', optimizer),\n"
            "                   ('torch._dynamo', ['torch._dynamo'])):\n"
            " if name == 'torch._dynamo': out['dynamo_imported'] = float('torch._dynamo' in sys.modules)\n"
            " c = cpu()\n step() if callable(step) else [__import__(m) for m in step]\n out[name] = cpu() - c\n"
            "print(json.dumps(out))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"import probe failed: {proc.stderr.strip().splitlines()[-3:]}")
    return {k: round(v, 3) for k, v in json.loads(proc.stdout.strip().splitlines()[-1]).items()}


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
            print(f"{'':<10} cpu_s " + " ".join(f"{p} {v:.2f}" for p, v in r["cpu_s"].items()), flush=True)
    keys = (*PARTS, "ready", "total")
    startup = {k: {p: statistics.median(r.get(p, 0.0) for r in v) for p in keys} for k, v in runs.items()}
    cpu_keys = ("driver", "actors", "ray", "total", "n_actors")
    cpu = {k: {p: statistics.median(r["cpu_s"].get(p, 0.0) for r in v)
               for p in sorted({q for r in v for q in r["cpu_s"]}, key=lambda q: (q not in cpu_keys, q))}
           for k, v in runs.items()}
    cores = os.cpu_count() or 1
    # The least wall time Ray's run could take with every core busy all the time: the CPU its processes
    # spent (driver, actors, Ray's own) over the cores, plus the shutdown (Ray waits on its processes).
    floor = cpu["ray"]["total"] / cores + startup["ray"]["shutdown"]
    result = {"config": config, "sets": sets, "rounds": rounds, "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
              "startup_s": startup, "cpu_s": cpu, "import_cpu_s": import_cpu(), "runs": runs,
              "ray_cpu_floor_s": floor, "ray_cpu_floor_over_inprocess": floor / startup["inprocess"]["total"],
              # in-process is one process doing one thing at a time: on an idle machine its wall time is its CPU
              "ray_cpu_floor_over_inprocess_cpu": floor / cpu["inprocess"]["total"],
              "ray_over_inprocess_total": startup["ray"]["total"] / startup["inprocess"]["total"],
              "target_ray_over_inprocess": 2.0}
    print(f"\nseconds      {' '.join(f'{p:>11}' for p in keys)}")
    for k, v in startup.items():
        print(f"{k:<12} {' '.join(f'{v[p]:>11.2f}' for p in keys)}")
    print(f"cpu_s        {' '.join(f'{p:>11}' for p in cpu_keys)}")
    for k, v in cpu.items():
        print(f"{k:<12} {' '.join(f'{v[p]:>11.2f}' for p in cpu_keys)}  " +
              " ".join(f"{p} {x:.2f}" for p, x in v.items() if p not in cpu_keys))
    print(f"import cpu_s (one process, alone): {result['import_cpu_s']}")
    print(f"ray / inprocess (total): {result['ray_over_inprocess_total']:.2f} (goal <= 2.0); Ray's CPU over "
          f"{cores} cores + shutdown: {floor:.2f} s = {result['ray_cpu_floor_over_inprocess']:.2f} x in-process "
          f"({result['ray_cpu_floor_over_inprocess_cpu']:.2f} x in-process CPU)")
    (out / "startup.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {out / 'startup.json'}")
    return result


if __name__ == "__main__":
    print(json.dumps(worker(json.loads(os.environ["VFL_STARTUP_SPEC"]))))
