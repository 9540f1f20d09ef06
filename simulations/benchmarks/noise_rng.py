"""Cost of unpredictable noise: PBM training steps with the keystream binomial of ``vfl.core.rng.NoiseSource``
(``privacy.noise_rng`` crypto and seeded) against the old ``torch.Generator`` binomial, which is
kept HERE ONLY as the baseline (it is predictable from its 64-bit seed, so the framework never uses it).

    python -m simulations.benchmarks.noise_rng --out DIR [--pairs 6] [--rounds 2]

digits-5p-like run (5 parties, MLP [128, 64] bottoms, P = 16, B = 100, SecAgg), in-process, one
torch thread, b in {16, 64}, noise_rng crypto and seeded. Paired timing on a shared machine: ONE
run alternates its epochs between the torch baseline and the keystream sampler (after a warm-up),
so each keystream epoch is compared with the torch epoch just before it; the reported ratio is
the median of those pair ratios (also the ratio of the minima: contention only adds time).
Writes ``DIR/noise_rng.json`` (``per_step`` rows with ``torch_ms_per_step``,
``keystream_ms_per_step``, ``ratio``, ``ratio_of_minima``; ``target_ratio`` 1.10; ``sampler_us``
per (B, P) draw) and prints a table.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import vfl.privacy.mechanisms.pbm as mechanisms
from simulations.cli.runner import resolve_config
from simulations.data.source import ConfigDataSource
from vfl.core.rng import NoiseSource
from vfl.engine.engine import Engine
from vfl.runtime.transport.inprocess import InProcessTransport

TRIALS = (16, 64)
MODES = ("crypto", "seeded")
TARGET = 1.10
_seeds = itertools.count(1)


def torch_pbm_encode(x: torch.Tensor, *, b: int, beta: float, c: float) -> torch.Tensor:
    """The pre-NoiseSource sampler: a torch.Generator seeded per round, torch.binomial (baseline only)."""
    mechanisms.validate_pbm(b=b, beta=beta, c=c)
    p = 0.5 + beta * (x.detach().to(torch.float64) / c).clamp(-1.0, 1.0)
    gen = torch.Generator().manual_seed(next(_seeds))
    return torch.binomial(torch.full_like(p, float(b)), p, generator=gen).to(torch.int64)


@dataclass
class Switch:
    """Which sampler the PBM mod calls now; flipped between epochs of ONE run (paired timing)."""

    torch_baseline: bool = False


@contextmanager
def switchable(switch: Switch) -> Iterator[None]:
    real = mechanisms.pbm_encode

    def encode(x: torch.Tensor, *, b: int, beta: float, c: float, noise: NoiseSource) -> torch.Tensor:
        if switch.torch_baseline:
            return torch_pbm_encode(x, b=b, beta=beta, c=c)
        return real(x, b=b, beta=beta, c=c, noise=noise)

    mechanisms.pbm_encode = encode  # the PBM mod binds it when the parties are built
    try:
        yield
    finally:
        mechanisms.pbm_encode = real


def paired_run(*, b: int, mode: str, pairs: int, base: str, sets: list[str]) -> dict[str, Any]:
    """One run of 1 + 2·pairs epochs: warm-up, then torch and keystream epochs alternating."""
    cfg = resolve_config(base, ["name=noise-rng-bench", "transport.kind=inprocess", f"train.epochs={1 + 2 * pairs}",
                                f"params.b={b}", f"privacy.noise_rng={mode}", *sets])
    switch = Switch(torch_baseline=False)

    def flip(epoch: int, record: dict[str, Any], engine: Engine) -> None:
        switch.torch_baseline = epoch % 2 == 0  # epochs 1, 3, ...: torch; 2, 4, ...: keystream

    with switchable(switch):
        engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False,
                        on_epoch_end=flip)
        history = engine.run().history
    steps = engine.strategy.steps_per_epoch()
    ms = [r["train_s"] / steps * 1e3 for r in history[1:]]
    torch_ms, key_ms = ms[0::2], ms[1::2]
    return {"torch_ms": torch_ms, "keystream_ms": key_ms, "steps_per_epoch": steps,
            "pair_ratios": [k / t for t, k in zip(torch_ms, key_ms, strict=True)]}


def sampler_us(b: int, shape: tuple[int, int], repeat: int = 200) -> dict[str, float]:
    """Median µs of one (B, P) PBM draw: keystream binomial vs torch.binomial (old and a reused generator)."""
    p = 0.5 + 0.25 * (torch.rand(shape, dtype=torch.float64) * 2 - 1)
    src, gen, full = (NoiseSource.fresh(), torch.Generator().manual_seed(0),
                      torch.full(shape, float(b), dtype=torch.float64))
    calls = {
        "keystream": lambda: src.binomial(b, p),
        "seeded_round_source_and_draw": lambda: NoiseSource.for_round(
            "seeded", seed=0, purpose="pbm", node=1, phase="train", epoch=0, step=0).binomial(b, p),
        "torch_new_generator": lambda: torch.binomial(full, p, generator=torch.Generator().manual_seed(7)),
        "torch_reused_generator": lambda: torch.binomial(full, p, generator=gen),
    }
    out = {}
    for name, fn in calls.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[name] = statistics.median(times) * 1e6
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--config", default="digits-5p", help="base config (default: digits-5p, PBM + SecAgg)")
    ap.add_argument("--pairs", type=int, default=6, help="(torch, keystream) epoch pairs per run, after a warm-up")
    ap.add_argument("--rounds", type=int, default=2, help="repetitions of every (b, mode) run")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # what each actor uses (train.threads_per_actor = 1)
    runs: dict[str, dict[str, Any]] = {}
    for _ in range(args.rounds):
        for b in TRIALS:
            for mode in MODES:
                r = paired_run(b=b, mode=mode, pairs=args.pairs, base=args.config, sets=args.overrides)
                key = f"b{b}_{mode}"
                runs.setdefault(key, {"torch_ms": [], "keystream_ms": [], "pair_ratios": []})
                for k in ("torch_ms", "keystream_ms", "pair_ratios"):
                    runs[key][k] += r[k]
                runs[key]["steps_per_epoch"] = r["steps_per_epoch"]
    cfg = resolve_config(args.config, args.overrides)
    shape = (cfg.train.batch_size, cfg.model.embed_dim)
    rows = {key: {"torch_ms_per_step": statistics.median(r["torch_ms"]),
                  "keystream_ms_per_step": statistics.median(r["keystream_ms"]),
                  "ratio": statistics.median(r["pair_ratios"]),
                  "ratio_of_minima": min(r["keystream_ms"]) / min(r["torch_ms"])} for key, r in runs.items()}
    raw = {str(b): sampler_us(b, shape) for b in TRIALS}
    result = {
        "config": {"base": args.config, "dataset": cfg.dataset, "num_parties": cfg.num_parties,
                   "batch_size": cfg.train.batch_size, "embed_dim": cfg.model.embed_dim, "pairs": args.pairs,
                   "rounds": args.rounds, "cpus": os.cpu_count(), "torch_threads": 1,
                   "secagg": bool(getattr(cfg.params, "secagg", False))},
        "per_step": rows, "target_ratio": TARGET,
        "meets_target": all(r["ratio"] <= TARGET for r in rows.values()),
        "sampler_us": raw, "epochs": runs,
    }
    print(f"{'run':<12} {'torch ms/step':>14} {'keystream ms/step':>18} {'ratio':>7} {'ratio of minima':>16}")
    for key, r in rows.items():
        print(f"{key:<12} {r['torch_ms_per_step']:>14.3f} {r['keystream_ms_per_step']:>18.3f} {r['ratio']:>7.3f} "
              f"{r['ratio_of_minima']:>16.3f}")
    print(f"{'b':>4} " + " ".join(f"{k:>22}" for k in raw[str(TRIALS[0])]) + "   (µs per (B, P) draw)")
    for b in TRIALS:
        print(f"{b:>4} " + " ".join(f"{v:>22.1f}" for v in raw[str(b)].values()))
    print(f"target: median paired ratio <= {TARGET} -> {'met' if result['meets_target'] else 'MISSED'}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "noise_rng.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {out / 'noise_rng.json'}")
    return result


if __name__ == "__main__":
    main()
