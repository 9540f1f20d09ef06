"""``overhead --scaling``: per-step wall time and summed RSS over Ray as the number of parties grows.

For each M: NPQ with M parties on the overhead benchmark's data, two epochs of ``steps`` steps over
Ray; ``step_ms`` is the second (warm) epoch's training seconds per step and ``rss_gib`` the summed
resident memory of the driver and every host actor (psutil) after it; ``uss_gib``, ``pss_gib`` and the
``session_*`` sums (every process, Ray's own included) come beside it (``simulations.benchmarks.memory``).
The actors are packed by the product default (``transport.max_actors: 0``). Writes ``DIR/scaling.json``
(``{"rows": [{"parties", "step_ms", "rss_gib", "uss_gib", ...}]}``) and ``DIR/scaling.png``. ``growth`` also
trains the first M for max(growth) steps and prints the summed RSS after each of those step counts.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import psutil

from simulations.benchmarks import memory
from simulations.data.source import ConfigDataSource
from vfl.engine.engine import Engine
from vfl.engine.schema import RunConfig
from vfl.runtime.transport.ray_transport import RayTransport

GIB = 2**30


def summed_rss(engine: Engine) -> float:
    """GiB resident in the driver plus every host actor process (same machine)."""
    pids = {psutil.Process().pid} | {engine.transport.host_call(g.name, "pid") for g in engine.groups}
    return sum(psutil.Process(p).memory_info().rss for p in pids) / GIB


def run_memory(engine: Engine) -> dict[str, Any]:
    """``memory.summarize`` of every process of the run (driver, actors, Ray's daemons, the reaper)."""
    actors = {engine.transport.host_call(g.name, "pid"): g.name for g in engine.groups}
    return memory.summarize(memory.session_processes(actors))


def _cfg(cfg: RunConfig, *, parties: int, steps: int, epochs: int) -> RunConfig:
    t = dataclasses.replace(cfg.train, epochs=epochs, eval_every=100000)
    d = dataclasses.replace(cfg.data, train_subsample=steps * cfg.train.batch_size,
                            test_subsample=cfg.train.batch_size)
    return dataclasses.replace(cfg, num_parties=parties, train=t, data=d, transport=dataclasses.replace(
        cfg.transport, kind="ray", max_actors=0))  # the product default: auto_max_actors


def one_point(cfg: RunConfig, *, parties: int, steps: int, temp_dir: str) -> dict[str, Any]:
    run = _cfg(cfg, parties=parties, steps=steps, epochs=2)
    mem: list[dict[str, Any]] = []
    engine = Engine(run, RayTransport(temp_dir=temp_dir), ConfigDataSource.from_config(run), progress=False,
                    on_epoch_end=lambda epoch, rec, eng: mem.append(run_memory(eng)))
    t0 = time.perf_counter()
    try:
        history = engine.run().history
    finally:
        engine.transport.shutdown()
    return {"parties": parties, "step_ms": history[-1]["train_s"] / steps * 1e3, **mem[-1],
            "actors": len(engine.groups), "steps": steps,
            "total_s": time.perf_counter() - t0}


def growth_check(cfg: RunConfig, *, parties: int, marks: list[int], temp_dir: str) -> dict[int, float]:
    """Summed RSS after each step count in ``marks`` (one run of max(marks) steps)."""
    probe = _cfg(cfg, parties=parties, steps=100, epochs=1)
    n_train = len(ConfigDataSource.from_config(probe).partition()[1].y_train)  # the subsample may be smaller
    per_epoch = -(-n_train // cfg.train.batch_size)
    run = _cfg(cfg, parties=parties, steps=100, epochs=-(-max(marks) // per_epoch))
    seen: dict[int, float] = {}

    def on_step(epoch: int, done: int, eng: Engine) -> None:
        total = epoch * per_epoch + done
        for m in marks:
            if m not in seen and total >= m:
                seen[m] = summed_rss(eng)

    engine = Engine(run, RayTransport(temp_dir=temp_dir), ConfigDataSource.from_config(run), progress=False,
                    on_step=on_step)
    try:
        engine.run()
    finally:
        engine.transport.shutdown()
    return seen


def run_scaling(cfg: RunConfig, *, out: Path, parties: list[int], steps: int, growth: list[int]) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    temp = str(out / "ray-tmp")
    rows: list[dict[str, Any]] = []
    print(f"{'parties':>8} {'actors':>7} {'step_ms':>9} {'rss_gib':>9} {'uss_gib':>9} {'session':>9} {'total_s':>8}",
          flush=True)
    for m in parties:
        row = one_point(cfg, parties=m, steps=steps, temp_dir=temp)
        rows.append(row)
        print(f"{m:>8} {row['actors']:>7} {row['step_ms']:>9.2f} {row['rss_gib']:>9.3f} {row['uss_gib']:>9.3f} "
              f"{row['session_rss_gib']:>9.3f} {row['total_s']:>8.1f}", flush=True)
        (out / "scaling.json").write_text(json.dumps({"rows": rows}, indent=2))  # partial results survive
    result: dict[str, Any] = {"rows": rows, "steps_per_point": steps, "batch_size": cfg.train.batch_size,
                              "dataset": cfg.dataset, "strategy": cfg.strategy}
    print(f"\nmemory by process at M={rows[-1]['parties']} (rss_gib = driver + actors RSS; session = every process):")
    print(memory.table(rows[-1]))
    if growth:
        seen = growth_check(cfg, parties=parties[0], marks=growth, temp_dir=temp)
        result["rss_growth_gib"] = {str(k): v for k, v in sorted(seen.items())}
        print("summed RSS after " + ", ".join(f"{k} steps: {v:.3f} GiB" for k, v in sorted(seen.items()))
              + f" (M={parties[0]})")
    (out / "scaling.json").write_text(json.dumps(result, indent=2))
    plot(rows, out / "scaling.png")
    print(f"wrote {out / 'scaling.json'}, {out / 'scaling.png'}")
    return result


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    m = [r["parties"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(m, [r["step_ms"] for r in rows], "o-", color="C0")
    ax.set(xlabel="parties M", ylabel="ms per step (Ray)", xscale="log")
    ax2 = ax.twinx()
    ax2.plot(m, [r["rss_gib"] for r in rows], "s--", color="C1", label="summed RSS")
    if all("uss_gib" in r for r in rows):
        ax2.plot(m, [r["uss_gib"] for r in rows], "^:", color="C2", label="summed USS")
    ax2.set_ylabel("driver + actors memory (GiB)", color="C1")
    ax2.set_ylim(bottom=0)
    ax2.legend(loc="upper left")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    save_png_pdf(fig, path)
