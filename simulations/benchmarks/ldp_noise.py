"""Cost of the LDP noise per party and step: the exact discrete Gaussian on the grid against the old
float32 Gaussian, both drawn from a crypto ``NoiseSource`` (the AES keystream included).

    python -m simulations.benchmarks.ldp_noise --out bench-out [--batch 64] [--dim 16] [--repeats 200] \
        [--e2e-epochs 3]

Writes ``DIR/ldp_noise.json``: ``sigma`` (the demo's LDP σ = C·sqrt(2M/(bβ²)) at M = 4, b = 16,
β = .25, C = 1), ``levels`` and ``sigma2_grid`` of the grid, and one row per noise kind with
``ms_per_step`` (median wall time over ``repeats`` steps of one party's batch × dim embedding),
``cpu_ms_per_step`` (mean CPU time of this process: robust on a shared machine),
``us_per_element`` (from the CPU time) and ``ratio`` (CPU, to the float path). With
``--e2e-epochs N`` also ``e2e``: the demo config in-process with ``strategy=ldp`` and each noise,
``wall_s`` and ``cpu_s`` of the whole run of N epochs (start-up and evaluation included), after a
warm-up run, each kind twice in alternation. One thread.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from vfl.core.rng import NoiseSource
from vfl.privacy.mechanisms.gaussian import (
    discrete_gaussian_perturb,
    gaussian_perturb,
    ldp_grid,
    ldp_sigma,
)


def _times_ms(step: Callable[[], Any], repeats: int) -> tuple[float, float]:
    """(median wall ms, mean CPU ms) of ``step``."""
    step()  # warm-up
    times = []
    cpu0 = time.process_time()
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3, (time.process_time() - cpu0) / repeats * 1e3


def e2e(*, epochs: int) -> list[dict[str, Any]]:
    """Per-step wall and CPU time of the demo run in-process with ldp and each noise kind."""
    from simulations.cli.runner import execute, resolve_config

    rows = []
    execute(resolve_config("demo", ["transport.kind=inprocess", "strategy=ldp", "train.epochs=1"]), out_dir=None,
            progress=False)  # warm-up: imports, data, torch start-up
    for kind in ("float", "discrete", "float", "discrete"):
        cfg = resolve_config("demo", ["transport.kind=inprocess", "strategy=ldp", f"params={{noise: {kind}}}",
                                      f"train.epochs={epochs}"])
        cpu0, t0 = time.process_time(), time.perf_counter()
        res = execute(cfg, out_dir=None, progress=False)
        rows.append({"noise": kind, "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - cpu0,
                     "epochs": epochs, "final_test_acc": res.summary.get("final_test_acc"),
                     "epsilon": res.summary.get("epsilon"),
                     "epsilon_is_guarantee": res.summary.get("epsilon_is_guarantee")})
    return rows


def measure(*, batch: int, dim: int, repeats: int, c: float = 1.0) -> dict[str, Any]:
    """Median ms per step of each noise kind on a batch × dim embedding in [-c, c]."""
    torch.set_num_threads(1)
    sigma = ldp_sigma(b=16, beta=0.25, num_parties=4, c=c)
    levels, sigma2 = ldp_grid(sigma=sigma, c=c)
    x = torch.rand(batch, dim) * 2 * c - c
    noise = NoiseSource.fresh()
    rows: list[dict[str, Any]] = []
    for kind, step in (("float", lambda: gaussian_perturb(x, sigma=sigma, noise=noise)),
                       ("discrete", lambda: discrete_gaussian_perturb(x, sigma=sigma, c=c, noise=noise))):
        ms, cpu = _times_ms(step, repeats)
        rows.append({"noise": kind, "ms_per_step": ms, "cpu_ms_per_step": cpu, "us_per_element": cpu * 1e3 / (batch * dim)})
    for r in rows:
        r["ratio"] = r["cpu_ms_per_step"] / rows[0]["cpu_ms_per_step"]
    return {"batch": batch, "dim": dim, "repeats": repeats, "sigma": sigma, "levels": levels,
            "sigma2_grid": sigma2, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--e2e-epochs", type=int, default=0, help="also time the demo run (ldp, in-process)")
    args = ap.parse_args(argv)
    res = measure(batch=args.batch, dim=args.dim, repeats=args.repeats)
    if args.e2e_epochs:
        res["e2e"] = e2e(epochs=args.e2e_epochs)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ldp_noise.json").write_text(json.dumps(res, indent=2))
    for r in res["rows"]:
        print(f"{r['noise']:9s} wall {r['ms_per_step']:7.3f} ms/step  cpu {r['cpu_ms_per_step']:7.3f} ms/step "
              f"{r['us_per_element']:6.3f} us/elem  x{r['ratio']:.1f}")
    for r in res.get("e2e", []):
        print(f"demo ldp {r['noise']:9s} wall {r['wall_s']:6.1f} s  cpu {r['cpu_s']:6.1f} s  ({r['epochs']} epochs)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
