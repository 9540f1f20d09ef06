"""The peer comparison: the same vertical FL task through Flower's simulation engine and through this project.

The task is the overhead benchmark's (``simulations/benchmarks/overhead.py``: HAR-shaped data, NPQ with
MLP bottoms on contiguous feature slices and an MLP head, sum fusion, B = 100, SGD), with M parties,
``--steps`` training steps of one epoch and the same test rows. Each system runs in its own subprocess
(Flower's Ray and ours never share a process), interleaved per M: flower, vfl in-process, vfl over Ray.
Flower runs Flower's own vertical-FL design (``simulations/benchmarks/peers_flower.py``); the project
runs ``vfl.engine.engine.Engine`` with the ``inprocess`` and ``ray`` transports. Same initial weights, data and
batch order on both sides, so equal work shows as equal accuracy.

    python -m simulations.benchmarks.peers --out DIR [--full] [--parties 5,20] [--steps 40] [--repeats 1]

Writes ``DIR/peers.json``: ``rows`` of ``{system, transport, parties, step_ms, startup_s, bytes_per_step,
final_acc, repeats, runs_step_ms}`` and ``equal_accuracy`` per M. ``step_ms``: median training step after ``--warmup`` steps; ``startup_s``: seconds from
launching the subprocess to the end of the first training step (imports, runtime and workers, data,
set-up, first step); ``bytes_per_step``: serialized bytes of every message of a step (Flower: the
protobuf of each Message, flwr's serde, both directions; the project: its CommLedger, train phase,
envelope and authentication included); ``final_acc``: test accuracy after the last step. With
``--repeats`` > 1 the rows are medians over repeats.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

ACC_TOL = 0.005  # same init, data and batch order: the accuracies may differ only by float summation order
SYSTEMS = (("flower", "flwr-simulation-ray"), ("vfl", "inprocess"), ("vfl", "ray"))


def task_sets(*, parties: int, steps: int, batch: int, test: int, data_dir: str) -> list[str]:
    """The overhead benchmark's defaults at M parties, one epoch of ``steps`` steps."""
    from simulations.benchmarks.overhead import DEFAULTS

    return [*DEFAULTS, f"num_parties={parties}", "train.epochs=1", f"train.batch_size={batch}",
            f"data.train_subsample={steps * batch}", f"data.test_subsample={test}", f"data.data_dir={data_dir}"]


def vfl_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """Train with the project's Engine over ``spec['transport']``; time each step from the driver."""
    from dataclasses import replace

    import torch

    from simulations.cli.runner import resolve_config
    from simulations.data.source import ConfigDataSource
    from vfl.engine.engine import Engine
    from vfl.runtime.transport.inprocess import InProcessTransport
    from vfl.runtime.transport.ray_transport import RayTransport

    cfg = resolve_config(spec.get("config"), spec["sets"])
    cfg = replace(cfg, transport=replace(cfg.transport, kind=spec["transport"]))
    torch.set_num_threads(cfg.train.threads_per_actor)
    transport = (InProcessTransport() if spec["transport"] == "inprocess"
                 else RayTransport(temp_dir=str(Path(spec["result"]).parent / "ray-tmp")))
    marks: list[tuple[float, float, int]] = []  # (perf_counter, wall clock, steps done): pipelined runs report
    # every few steps, so a step's time is a block's time over its steps

    cpu_marks: list[float] = []  # CPU seconds of the driver and the host actors at each mark

    def on_step(epoch: int, done: int, eng: Engine) -> None:
        marks.append((time.perf_counter(), time.time(), done))
        cpu_marks.append(host_cpu_s())

    engine = Engine(cfg, transport, ConfigDataSource.from_config(cfg), progress=False, on_step=on_step)
    try:
        result = engine.run()
    finally:
        transport.shutdown()
    step_s: list[float] = []
    for (t_a, _, d_a), (t_b, _, d_b) in zip(marks, marks[1:], strict=False):
        step_s += [(t_b - t_a) / (d_b - d_a)] * (d_b - d_a)
    if step_s:
        median = statistics.median(step_s[spec["warmup"]:] or step_s)
    else:  # one report for the whole run (fewer steps than the pipelined loop's sync interval): the epoch's mean
        median = result.history[0]["train_s"] / marks[0][2]
    first_end = marks[0][1] - (marks[0][2] - 1) * median  # the first report less the steps after the first
    tot = engine.ledger.totals("train")
    return {"system": "vfl", "transport": spec["transport"], "parties": cfg.num_parties, "steps": spec["steps"],
            "step_ms": median * 1e3, "startup_s": first_end - spec["t0"],
            "bytes_per_step": (tot["bytes_up"] + tot["bytes_down"]) / spec["steps"],
            "final_acc": result.summary["final_test_acc"], "step_ms_all": [s * 1e3 for s in step_s],
            "data_plane": cfg.transport.data_plane, "auth": cfg.auth,
            "cpu_ms_per_step": cpu_ms_per_step(marks, cpu_marks, warmup=spec["warmup"]),
            "startup_cpu_s": cpu_marks[0] if cpu_marks else None}


def host_cpu_s() -> float:
    """CPU seconds of this process and of its Ray host actors (Ray's own daemons left out): less noisy
    under load than wall time, and what a speed-up that saves Python work saves."""
    me = psutil.Process()
    total = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            if p is me or " ".join(p.cmdline()[:1]).startswith("ray::NodeHost"):
                t = p.cpu_times()
                total += t.user + t.system
        except psutil.Error:  # a process that ended between the listing and the read
            pass
    return total


def cpu_ms_per_step(marks: list[tuple[float, float, int]], cpu: list[float], *, warmup: int) -> float | None:
    """CPU ms per training step over consecutive reports within an epoch (an interval across an epoch's end
    holds its evaluation and checkpoint), after the first ``warmup`` steps."""
    spent = steps = seen = 0.0
    for (_, _, d_a), (_, _, d_b), c_a, c_b in zip(marks, marks[1:], cpu, cpu[1:], strict=False):
        if d_b > d_a:
            seen += d_b - d_a
            if seen > warmup:
                spent, steps = spent + c_b - c_a, steps + d_b - d_a
    return spent * 1e3 / steps if steps else None


def launch(system: str, transport: str, *, sets: list[str], steps: int, warmup: int, out: Path,
           timeout: float) -> dict[str, Any]:
    """One run in a fresh subprocess; ``t0`` is taken before the spawn so imports count in start-up."""
    result = out / f"{system}-{transport}-{len(os.listdir(out))}.json"
    spec = {"system": system, "transport": transport, "sets": sets, "steps": steps, "warmup": warmup,
            "result": str(result), "t0": time.time()}
    env = {**os.environ, "PEERS_SPEC": json.dumps(spec)}
    log = out / f"{result.stem}.log"
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "simulations.benchmarks.peers", "--worker"], env=env, stdout=f, stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0 or not result.exists():
        tail = log.read_text().splitlines()[-5:]
        raise RuntimeError(f"{system}/{transport} failed (rc {proc.returncode}), see {log}: {tail}")
    return json.loads(result.read_text())  # type: ignore[no-any-return]


def _median_row(runs: list[dict[str, Any]]) -> dict[str, Any]:
    row = dict(runs[0])
    for k in ("step_ms", "startup_s", "bytes_per_step", "final_acc"):
        vals = [r[k] for r in runs if r[k] is not None]
        row[k] = statistics.median(vals) if vals else None
    row["repeats"] = len(runs)
    row["runs_step_ms"] = [r["step_ms"] for r in runs]  # the single repeats (docs/performance.md shows their scatter)
    return row


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | transport | M | step ms | start-up s | bytes/step | test acc |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        b = "n/a" if r["bytes_per_step"] is None else f"{r['bytes_per_step']:,.0f}"
        lines.append(f"| {r['system']} | {r['transport']} | {r['parties']} | {r['step_ms']:.1f} | "
                     f"{r['startup_s']:.1f} | {b} | {r['final_acc']:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--full", action="store_true", help="M in 5,20,50 and 100 steps (default: 5,20 and 40)")
    ap.add_argument("--parties", help="comma list of M (overrides --full's)")
    ap.add_argument("--steps", type=int, help="training steps per run (default 40; --full 100)")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of the step_ms median")
    ap.add_argument("--repeats", type=int, default=1, help="interleaved rounds over all systems")
    ap.add_argument("--test", type=int, default=1000, help="test rows both systems are scored on")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run before it is killed")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:  # inside the subprocess: run one system, write its result
        spec = json.loads(os.environ["PEERS_SPEC"])
        if spec["system"] == "flower":
            from simulations.benchmarks.peers_flower import run

            run(spec)
        else:
            Path(spec["result"]).write_text(json.dumps(vfl_worker(spec)))
        return {}
    from simulations.benchmarks.overhead import synthetic_har

    out = Path(args.out)
    runs_dir = out / "peers-runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    parties = [int(m) for m in (args.parties or ("5,20,50" if args.full else "5,20")).split(",")]
    steps = args.steps or (100 if args.full else 40)
    data_dir = str(synthetic_har(out / "data"))
    load = os.getloadavg()
    raw: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for m in parties:
        sets = task_sets(parties=m, steps=steps, batch=100, test=args.test, data_dir=data_dir)
        for _ in range(args.repeats):
            for system, transport in SYSTEMS:
                r = launch(system, transport, sets=sets, steps=steps, warmup=args.warmup, out=runs_dir,
                           timeout=args.timeout)
                raw.setdefault((system, transport, m), []).append(r)
                print(f"M={m:<3} {system:<6} {transport:<20} {r['step_ms']:9.1f} ms/step  start-up "
                      f"{r['startup_s']:6.1f} s  acc {r['final_acc']:.4f}", flush=True)
    rows = [_median_row(v) for v in raw.values()]
    equal = {str(m): max(r["final_acc"] for r in rows if r["parties"] == m)
             - min(r["final_acc"] for r in rows if r["parties"] == m) <= ACC_TOL for m in parties}
    result = {"rows": rows, "equal_accuracy": equal, "acc_tolerance": ACC_TOL, "steps": steps, "warmup": args.warmup, "batch_size": 100, "test_rows": args.test,
              "cpus": os.cpu_count(), "loadavg_before": load, "loadavg_after": os.getloadavg(),
              "command": " ".join(["python -m simulations.benchmarks.peers", *(argv if argv is not None else sys.argv[1:])])}
    (out / "peers.json").write_text(json.dumps(result, indent=2))
    print("\n" + table(rows))
    print(f"equal accuracy (within {ACC_TOL}) per M: {equal}")
    print(f"load average before {load[0]:.2f}, after {result['loadavg_after'][0]:.2f}; wrote {out / 'peers.json'}")
    return result


if __name__ == "__main__":
    main()
