"""What each kept speed-up saves, on the demo over Ray and on the peer task at M = 20 over Ray, in one
interleaved run (docs/performance.md keeps the table and what was deleted).

    python -m simulations.benchmarks.speedups --out DIR [--repeats 6] [--variants all,plain,...]

Variants: ``all`` (every speed-up, the default), ``no_<name>`` for each speed-up of
``vfl.runtime.accel.SPEEDUPS`` (``VFL_PLAIN=<name>``: that one falls back to the plain flwr/torch code),
``plain`` (``VFL_PLAIN=all``) and ``socket`` (``transport.data_plane: socket``, the opt-in step over TCP).
Each run is its own subprocess (``simulations.benchmarks.peers``' worker: its Ray, its step times), in an
order shuffled per round with a seeded generator. Per run: ``step_ms`` (median wall ms per training step
after the warm-up), ``cpu_ms_per_step`` (CPU of the driver and the host actors per step: steadier under
load), ``startup_s`` and ``startup_cpu_s`` (to the end of the first step). ``DIR/speedups.json``: ``rows``
and ``summary``: per workload and variant the medians and the paired ratios to ``all`` of the same round
(a ratio above 1: the variant is slower, i.e. the speed-up it removes saves time).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from simulations.benchmarks.overhead import synthetic_har
from simulations.benchmarks.peers import task_sets
from vfl.runtime.accel import PLAIN_ENV, SPEEDUPS

VARIANTS: dict[str, tuple[dict[str, str], list[str]]] = {
    "all": ({}, []),
    **{f"no_{name}": ({PLAIN_ENV: name}, []) for name in SPEEDUPS},
    "plain": ({PLAIN_ENV: "all"}, []),
    "socket": ({}, ["transport.data_plane=socket"]),
}
KEYS = ("step_ms", "cpu_ms_per_step", "startup_s", "startup_cpu_s")


def workloads(data_dir: str, *, demo_epochs: int, steps: int) -> dict[str, dict[str, Any]]:
    """The demo over Ray (4 parties, PBM + SecAgg announced) and the peer task at M = 20 over Ray."""
    return {
        "demo": {"config": "demo", "sets": [f"train.epochs={demo_epochs}", "transport.kind=ray"],
                 "steps": 23 * demo_epochs, "warmup": 5},
        "peers20": {"config": None, "steps": steps, "warmup": 5,
                    "sets": [*task_sets(parties=20, steps=steps, batch=100, test=1000, data_dir=data_dir),
                             "transport.kind=ray"]},
    }


def launch(spec: dict[str, Any], env: dict[str, str], out: Path, timeout: float) -> dict[str, Any]:
    """One run in a fresh subprocess (the peers benchmark's worker), ``env`` added to its environment."""
    result = out / f"{spec['name']}-{len(os.listdir(out))}.json"
    spec = {**spec, "result": str(result), "t0": time.time(), "system": "vfl", "transport": "ray"}
    log = out / f"{result.stem}.log"
    with open(log, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "simulations.benchmarks.peers", "--worker"],
                              env={**os.environ, **env, "PEERS_SPEC": json.dumps(spec)}, stdout=f,
                              stderr=subprocess.STDOUT, timeout=timeout)
    if proc.returncode != 0 or not result.exists():
        raise RuntimeError(f"{spec['name']} failed (rc {proc.returncode}), see {log}")
    return json.loads(result.read_text())  # type: ignore[no-any-return]


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per workload and variant: medians of ``KEYS`` and the median ratio to ``all`` within each round."""
    out = []
    for w in dict.fromkeys(r["workload"] for r in rows):
        base = {r["round"]: r for r in rows if r["workload"] == w and r["variant"] == "all"}
        for v in dict.fromkeys(r["variant"] for r in rows if r["workload"] == w):
            got = [r for r in rows if r["workload"] == w and r["variant"] == v]
            row: dict[str, Any] = {"workload": w, "variant": v, "runs": len(got)}
            for k in KEYS:
                vals = [r[k] for r in got if r[k] is not None]
                ratios = [r[k] / base[r["round"]][k] for r in got if r["round"] in base and r[k] and base[r["round"]][k]]
                row[k] = round(statistics.median(vals), 3) if vals else None
                row[f"{k}_ratio"] = round(statistics.median(ratios), 3) if ratios else None
            out.append(row)
    return out


def table(summary: list[dict[str, Any]]) -> str:
    lines = ["| workload | variant | step ms (x all) | CPU ms/step (x all) | start-up s (x all) | start-up CPU s (x all) |",
             "|---|---|---|---|---|---|"]
    for r in summary:
        cells = [f"{r[k]:.2f} ({r[f'{k}_ratio']:.2f})" if r[k] is not None and r[f"{k}_ratio"] is not None else "n/a"
                 for k in KEYS]
        lines.append(f"| {r['workload']} | {r['variant']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--repeats", type=int, default=6, help="interleaved rounds over every variant")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--workloads", default="demo,peers20")
    ap.add_argument("--demo-epochs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=40, help="training steps of the peer task")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per run before it is killed")
    args = ap.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    if unknown := sorted(set(variants) - set(VARIANTS)):
        ap.error(f"unknown variant {', '.join(unknown)}; allowed: {', '.join(VARIANTS)}")
    out = Path(args.out)
    runs = out / "speedups-runs"
    runs.mkdir(parents=True, exist_ok=True)
    loads = workloads(str(synthetic_har(out / "data")), demo_epochs=args.demo_epochs, steps=args.steps)
    names = [w for w in args.workloads.split(",") if w]
    order = random.Random(0)  # the order of the runs only: a fixed shuffle per round
    rows: list[dict[str, Any]] = []
    load0 = os.getloadavg()
    for rnd in range(args.repeats):
        for w in names:
            todo = list(variants)
            order.shuffle(todo)
            for v in todo:
                env, sets = VARIANTS[v]
                spec = {**loads[w], "name": f"{w}-{v}", "sets": loads[w]["sets"] + sets}
                r = launch(spec, env, runs, args.timeout)
                rows.append({"round": rnd, "workload": w, "variant": v, **{k: r[k] for k in KEYS},
                             "final_acc": r["final_acc"], "loadavg": os.getloadavg()[0]})
                print(json.dumps(rows[-1]), flush=True)
    summary = summarize(rows)
    report = {"rows": rows, "summary": summary, "repeats": args.repeats, "cpus": os.cpu_count(),
              "loadavg_before": load0, "loadavg_after": os.getloadavg(),
              "command": " ".join(["python -m simulations.benchmarks.speedups", *(argv or sys.argv[1:])])}
    (out / "speedups.json").write_text(json.dumps(report, indent=2))
    print("\n" + table(summary))
    print(f"load average before {load0[0]:.2f}, after {report['loadavg_after'][0]:.2f}; wrote {out / 'speedups.json'}")
    return report


if __name__ == "__main__":
    main()
