"""The training step's data planes over Ray, quiet and under contention: the task path (a Ray task per hop,
``transport.data_plane: ray``) against the socket chain (``socket``), per-step ms at M in --parties,
narrow and wide bottoms, in one run (one Ray). The command keeps its old name: it measured the Ray
Compiled Graph and its ``auto`` probe against the task path until the compiled graph was removed
(the socket chain was faster wherever both were measured, docs/performance.md).

    python -m simulations.benchmarks.compiled_auto --out DIR [--parties 5,20] [--widths 64,1024]

Each (M, width, load) cell runs the same NPQ training (HAR-shaped synthetic data, B = 100,
``--steps`` steps per epoch, ``--epochs`` epochs) on each plane, in an order rotated per cell; the
contention arm runs a CPU burner process (one busy Python loop) beside the run. Writes
``DIR/compiled_auto.json``: ``rows`` (one per run: ``parties``, ``width``, ``load``, ``path`` (``ray`` or
``socket``), ``steady_ms`` = the last epoch's ms per step, ``run_ms`` = all epochs') and ``cells`` with
``socket_over_task`` (steady and whole run) per cell; prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from simulations.benchmarks.overhead import DEFAULTS, synthetic_har
from simulations.cli.runner import resolve_config
from simulations.data.source import ConfigDataSource
from vfl.engine.engine import Engine
from vfl.engine.schema import RunConfig
from vfl.runtime.transport.ray_transport import RayTransport

PATHS = ("ray", "socket")  # transport.data_plane
BURNER = "while True:\n    pass\n"


def one_run(cfg: RunConfig, *, path: str, steps: int) -> dict[str, Any]:
    """One Ray run on the data plane ``path``; per-step ms of the last epoch and of the whole run."""
    run = replace(cfg, transport=replace(cfg.transport, data_plane=path))
    engine = Engine(run, RayTransport(), ConfigDataSource.from_config(run), progress=False)
    try:
        result = engine.run()
    finally:
        engine.transport.shutdown()
    train_s = [r["train_s"] for r in result.history]
    row = {"path": path, "steady_ms": train_s[-1] / steps * 1e3, "run_ms": sum(train_s) / (steps * len(train_s)) * 1e3,
           "epoch_ms": [round(s / steps * 1e3, 2) for s in train_s], "final_loss": result.history[-1]["train_loss"]}
    return row


def cell(base: RunConfig, *, parties: int, width: int, load: str, steps: int, rotate: int) -> list[dict[str, Any]]:
    """Both planes for one (M, width, load), with a burner process for ``contention``."""
    cfg = replace(base, num_parties=parties, model=replace(base.model, bottom_hidden=(width,)))
    burner = subprocess.Popen([sys.executable, "-c", BURNER]) if load == "contention" else None
    try:
        order = PATHS[rotate % 2:] + PATHS[:rotate % 2]
        rows = [{"parties": parties, "width": width, "load": load, **one_run(cfg, path=p, steps=steps)} for p in order]
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
    losses = {r["final_loss"] for r in rows}
    if len(losses) != 1:
        raise AssertionError(f"planes disagree on the final loss at M={parties}, width={width}: {losses}")
    return rows


def summarize(rows: list[dict[str, Any]], *, steps: int) -> list[dict[str, Any]]:
    """Per cell: ms per plane and the socket chain over the task path (steady state and whole run)."""
    cells: dict[tuple[int, int, str], dict[str, Any]] = {}
    for r in rows:
        c = cells.setdefault((r["parties"], r["width"], r["load"]),
                             {"parties": r["parties"], "width": r["width"], "load": r["load"]})
        c[f"{r['path']}_steady_ms"], c[f"{r['path']}_run_ms"] = round(r["steady_ms"], 2), round(r["run_ms"], 2)
    for c in cells.values():
        for kind in ("steady", "run"):
            c[f"socket_over_task_{kind}"] = round(c[f"socket_{kind}_ms"] / c[f"ray_{kind}_ms"], 3)
    return list(cells.values())


def table(cells: list[dict[str, Any]]) -> str:
    lines = ["| M | bottom | load | task ms | socket ms | socket/task: steady, this run |", "|---|---|---|---|---|---|"]
    for c in cells:
        lines.append(f"| {c['parties']} | [{c['width']}] | {c['load']} | {c['ray_steady_ms']:.1f} | "
                     f"{c['socket_steady_ms']:.1f} | {c['socket_over_task_steady']:.2f}, {c['socket_over_task_run']:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--parties", default="5,20")
    ap.add_argument("--widths", default="64,1024", help="bottom hidden widths (one layer)")
    ap.add_argument("--loads", default="quiet,contention")
    ap.add_argument("--steps", type=int, default=40, help="training steps per epoch")
    ap.add_argument("--epochs", type=int, default=3, help="epochs per run")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--summarize", help="re-summarize an existing compiled_auto.json (no runs)")
    args = ap.parse_args(argv)
    if args.summarize:
        report = json.loads(Path(args.summarize).read_text())
        report["cells"] = summarize(report["rows"], steps=report["steps_per_epoch"])
        Path(args.summarize).write_text(json.dumps(report, indent=2))
        print(table(report["cells"]))
        return report
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets = [*DEFAULTS, f"data.data_dir={synthetic_har(out / 'data')}", f"train.epochs={args.epochs}",
            f"data.train_subsample={args.steps * 100}", "data.test_subsample=100", "transport.kind=ray",
            "transport.max_actors=1", *args.overrides]  # server + one party actor, as overhead
    base = resolve_config(None, sets)
    import ray

    ray.init(num_cpus=os.cpu_count() or 2, _temp_dir=tempfile.mkdtemp(prefix="vflca-"), include_dashboard=False,
             configure_logging=False, log_to_driver=False)
    t0, rows, load0 = time.perf_counter(), [], os.getloadavg()
    try:
        i = 0
        for m in (int(x) for x in args.parties.split(",")):
            for w in (int(x) for x in args.widths.split(",")):
                for load in args.loads.split(","):
                    rows += cell(base, parties=m, width=w, load=load, steps=args.steps, rotate=i)
                    i += 1
                    print(json.dumps(rows[-2:]), flush=True)
    finally:
        ray.shutdown()
    cells = summarize(rows, steps=args.steps)
    report = {"steps_per_epoch": args.steps, "epochs": args.epochs, "batch_size": base.train.batch_size,
              "cpus": os.cpu_count(), "max_actors": base.transport.max_actors,
              "loadavg_start": load0, "loadavg_end": os.getloadavg(), "wall_s": time.perf_counter() - t0,
              "rows": rows, "cells": cells}
    (out / "compiled_auto.json").write_text(json.dumps(report, indent=2))
    print(table(cells))
    return report


if __name__ == "__main__":
    main()
