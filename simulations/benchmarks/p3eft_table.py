"""P3EFT's Table 1 in miniature, offline: accuracy and label leakage of head-only, Regular FT
(split-lora), distance correlation, PSLF and P3EFT on the same subsample, plus the step-time
overhead of P3EFT (n = 2, m = 2, two servers) over split-lora.

Every row is a real run through the engine (in-process transport, every byte counted; the leak is
the worst over training of the servers' spectral/norm/k-means attacks on what they saw). Step
time is reported three ways: measured in-process (the two servers run one after the other),
estimated with the servers in parallel (measured step − the non-critical server time), and
measured over Ray actors (one per server, really in parallel). Default: a subsample that finishes
in well under 30 min on 2 CPU cores; ``--full`` uses all data.

Besides the paper's metrics every row carries the attacks of P3EFT §3.3 that a server can run on
what it keeps: ``leak_theta`` (g_h recovered from successive adapter states, the θ-difference
attack), ``leak_cat`` (all adapter sets' activations concatenated), ``leak_sign`` (sign-invariant
clustering) and ``leak_probe`` (cross-validated logistic regression, supervised). The rows
``p3eft+rotate`` (params.rotate_servers, 4 servers) and ``p3eft+noise`` (params.theta_noise) are the
paper's two mitigations. ``--model-dir`` runs on another (e.g. tiny) model.

    python -m simulations.benchmarks.p3eft_table --out bench-out
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

STRATEGIES = ("head-only", "split-lora", "dcor", "pslf", "p3eft", "p3eft+rotate", "p3eft+noise")
VARIANTS = {"p3eft+rotate": ("p3eft", {"servers": 4, "rotate_servers": True}),  # + theta_noise: --theta-noise
            "p3eft+noise": ("p3eft", {})}
ROW_KEYS = ("test_acc", "leak", "leak_act", "leak_grad", "leak_spectral", "leak_norm", "leak_kmeans", "leak_theta",
            "leak_cat", "leak_sign", "leak_probe", "step_s", "step_s_parallel", "total_bytes_up", "total_bytes_down",
            "wall_s")


def run_config(args: argparse.Namespace, strategy: str, *, epochs: int | None = None, train: int | None = None,
               transport: str = "inprocess") -> dict[str, Any]:
    """The bundled ``<strategy>-rt`` config with this benchmark's data, epochs and transport."""
    from simulations.cli.runner import read_config_file

    strategy, extra = VARIANTS.get(strategy, (strategy, {}))
    cfg = read_config_file(f"{strategy}-rt")
    sub = {} if args.full and train is None else {"train_subsample": train or args.train, "test_subsample": args.test}
    cfg.update(name=f"table-{strategy}", dataset=args.dataset, seed=args.seed, data=sub,
               transport={"kind": transport, "cpus_per_actor": 0.5})
    cfg["train"] = {**cfg.get("train", {}), "epochs": epochs or args.epochs, "batch_size": args.batch_size,
                    "lr": args.lr, **({"optimizer": args.optimizer} if args.optimizer else {})}
    cfg["params"] = {**cfg.get("params", {}), "max_len": args.max_len, **extra}
    if args.model_dir:
        cfg["params"]["model_dir"] = args.model_dir
    if args.leak_window:
        cfg["params"]["leak_window"] = args.leak_window
    if strategy != "head-only":
        cfg["params"]["leak_theta_steps"] = args.leak_theta_steps
    return cfg


def run_row(args: argparse.Namespace, strategy: str, out: Path) -> dict[str, Any]:
    from simulations.cli.runner import execute, resolve_config

    t0 = time.perf_counter()
    cfg = run_config(args, strategy)
    if strategy == "p3eft+noise":
        cfg["params"]["theta_noise"] = args.theta_noise
    res = execute(resolve_config(cfg), out_dir=out / "runs" / strategy, progress=False)
    row = {"strategy": strategy, **{k: res.summary.get(k) for k in ROW_KEYS}}
    per_kind = res.summary.get("train_bytes_per_step", {})
    row["bytes_per_step"] = sum(v["bytes"] for v in per_kind.values() if v["direction"] != "control")
    row["bytes_per_step_by_kind"] = {k: v["bytes"] for k, v in per_kind.items()}
    row["seconds"] = time.perf_counter() - t0
    return row


def ray_step_times(args: argparse.Namespace, out: Path) -> dict[str, float]:
    """Seconds per training step over Ray actors (servers in parallel), short runs of both."""
    import shutil
    import tempfile

    from simulations.cli.runner import execute, resolve_config
    from vfl.runtime.transport.ray_transport import RayTransport

    times = {}
    for strategy in ("split-lora", "p3eft"):
        cfg = resolve_config(run_config(args, strategy, epochs=1, train=args.timing_steps * args.batch_size,
                                        transport="ray"))
        temp = tempfile.mkdtemp(prefix="p3t-")  # Ray's socket paths must stay under 107 bytes
        transport = RayTransport(temp_dir=temp)
        try:
            res = execute(cfg, out_dir=out / "timing" / strategy, progress=False, transport=transport)
        finally:
            transport.shutdown()
            shutil.rmtree(temp, ignore_errors=True)
        times[strategy] = float(res.summary["step_s"])
    return times


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for r in rows:
        if r["leak"] is None or r["test_acc"] is None:
            continue
        ax.scatter(100 * r["leak"], 100 * r["test_acc"], s=40)
        ax.annotate(r["strategy"], (100 * r["leak"], 100 * r["test_acc"]), textcoords="offset points", xytext=(5, 4))
    ax.set_xlabel("leak (worst over training, %) — lower is more private")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("accuracy vs label leakage (MiniLM, rt-polarity)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    save_png_pdf(fig, path, dpi=120)


def fmt(v: Any, scale: float = 1.0, digits: int = 1) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{scale * v:.{digits}f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--full", action="store_true", help="all training and test data (hours on CPU)")
    ap.add_argument("--dataset", default="rt-polarity", help="rt-polarity (packaged) or sst2 (GLUE TSV in data_dir)")
    ap.add_argument("--train", type=int, default=1200)
    ap.add_argument("--test", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--max-len", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    ap.add_argument("--timing-steps", type=int, default=12, help="steps of the Ray timing runs (0 = skip)")
    ap.add_argument("--model-dir", default=None, help="params.model_dir of every row (default: the packaged MiniLM)")
    ap.add_argument("--optimizer", default=None, choices=("sgd", "adam", "adamw"), help="train.optimizer "
                    "(default: the configs', adamw)")
    ap.add_argument("--leak-window", type=int, default=0, help="params.leak_window (0: the configs')")
    ap.add_argument("--leak-theta-steps", type=int, default=8, help="params.leak_theta_steps (theta-difference "
                    "attack pairs per epoch and adapter set)")
    ap.add_argument("--theta-noise", type=float, default=1e-3, help="params.theta_noise of the p3eft+noise row")
    ap.add_argument("--timing-only", action="store_true", help="only the Ray timing runs (split-lora and p3eft, "
                    "--timing-steps steps each): the step-time ratio with the servers really in parallel")
    args = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)  # in-process: one core for the whole conversation, like one Ray actor
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.timing_only:
        steps = ray_step_times(args, out)
        ratio = steps["p3eft"] / steps["split-lora"]
        print(f"Ray step s: split-lora {steps['split-lora']:.3f}, p3eft {steps['p3eft']:.3f}; ratio {ratio:.2f}")
        (out / "p3eft_timing.json").write_text(json.dumps(
            {"config": vars(args), "timing": {"ray_step_s": steps, "ray_ratio": ratio}}, indent=2, default=str))
        return 0
    rows = []
    for strategy in args.strategies:
        rows.append(run_row(args, strategy, out))
        print(f"  {strategy}: acc {fmt(rows[-1]['test_acc'], 100)} leak {fmt(rows[-1]['leak'], 100)} "
              f"({rows[-1]['seconds']:.0f} s)", flush=True)
    by = {r["strategy"]: r for r in rows}
    timing: dict[str, Any] = {}
    if "p3eft" in by and "split-lora" in by:
        p, s = by["p3eft"], by["split-lora"]
        timing = {"inprocess_ratio": p["step_s"] / s["step_s"],
                  "parallel_estimate_ratio": p["step_s_parallel"] / s["step_s_parallel"]}
        if args.timing_steps:
            ray = ray_step_times(args, out)
            timing.update(ray_step_s=ray, ray_ratio=ray["p3eft"] / ray["split-lora"])
    print(f"\n{'strategy':<13} {'acc %':>6} {'leak %':>7} {'act %':>6} {'grad %':>7} {'theta %':>8} {'cat %':>6} "
          f"{'sign %':>7} {'probe %':>8} {'step s':>7} {'par. s':>7} {'KB/step':>8}")
    for r in rows:
        print(f"{r['strategy']:<13} {fmt(r['test_acc'], 100):>6} {fmt(r['leak'], 100):>7} {fmt(r['leak_act'], 100):>6} "
              f"{fmt(r['leak_grad'], 100):>7} {fmt(r['leak_theta'], 100):>8} {fmt(r['leak_cat'], 100):>6} "
              f"{fmt(r['leak_sign'], 100):>7} {fmt(r['leak_probe'], 100):>8} {fmt(r['step_s'], 1, 3):>7} "
              f"{fmt(r['step_s_parallel'], 1, 3):>7} {fmt(r['bytes_per_step'], 1e-3, 0):>8}")
    for k, v in timing.items():
        print(f"{k}: {v if isinstance(v, dict) else round(v, 3)}")
    report = {"config": {k: v for k, v in vars(args).items()}, "rows": rows, "timing": timing}
    (out / "p3eft_table.json").write_text(json.dumps(report, indent=2, default=str))
    plot(rows, out / "p3eft_table.png")
    print(f"wrote {out / 'p3eft_table.json'} and {out / 'p3eft_table.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
