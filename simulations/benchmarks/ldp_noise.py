"""Cost of the LDP noise per party and step: the exact discrete Gaussian on the grid against the old
float32 Gaussian, both drawn from a crypto ``NoiseSource`` (the AES keystream included).

    python -m simulations.benchmarks.ldp_noise --out bench-out [--batch 64] [--dim 16] [--repeats 200]

Writes ``DIR/ldp_noise.json``: ``sigma`` (the demo's LDP σ = C·sqrt(2M/(bβ²)) at M = 4, b = 16,
β = .25, C = 1), ``levels`` and ``sigma2_grid`` of the grid, and one row per noise kind with
``ms_per_step`` (median over ``repeats`` steps of one party's batch × dim embedding),
``us_per_element`` and ``ratio`` to the float path. One thread, one process.
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

from vfl.privacy.mechanisms import discrete_gaussian_perturb, gaussian_perturb, ldp_grid, ldp_sigma
from vfl.rng import NoiseSource


def _median_ms(step: Callable[[], Any], repeats: int) -> float:
    step()  # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def measure(*, batch: int, dim: int, repeats: int, c: float = 1.0) -> dict[str, Any]:
    """Median ms per step of each noise kind on a batch × dim embedding in [-c, c]."""
    torch.set_num_threads(1)
    sigma = ldp_sigma(b=16, beta=0.25, num_parties=4, c=c)
    levels, sigma2 = ldp_grid(sigma=sigma, c=c)
    x = torch.rand(batch, dim) * 2 * c - c
    noise = NoiseSource.fresh()
    rows = []
    for kind, step in (("float", lambda: gaussian_perturb(x, sigma=sigma, noise=noise)),
                       ("discrete", lambda: discrete_gaussian_perturb(x, sigma=sigma, c=c, noise=noise))):
        ms = _median_ms(step, repeats)
        rows.append({"noise": kind, "ms_per_step": ms, "us_per_element": ms * 1e3 / (batch * dim)})
    for r in rows:
        r["ratio"] = r["ms_per_step"] / rows[0]["ms_per_step"]
    return {"batch": batch, "dim": dim, "repeats": repeats, "sigma": sigma, "levels": levels,
            "sigma2_grid": sigma2, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dim", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args(argv)
    res = measure(batch=args.batch, dim=args.dim, repeats=args.repeats)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ldp_noise.json").write_text(json.dumps(res, indent=2))
    for r in res["rows"]:
        print(f"{r['noise']:9s} {r['ms_per_step']:8.3f} ms/step {r['us_per_element']:7.3f} us/elem  x{r['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
