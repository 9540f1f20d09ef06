"""Privacy–utility frontier: test accuracy vs the accountant's ε vs what the attacks actually recover.

For NPQ and a (b, β) grid of PBM and the LDP baseline (σ² = 2M/(bβ²), matched to the same (b, β)),
train the same config with recorded views, then run the two attacks the strategies are meant to
stop or not: label inference by a passive party (from the gradients it received) and feature
reconstruction by the server (a decoder trained on a 20 % auxiliary slice). Prints a table; writes
DIR/frontier.json (``rows``: strategy, b, beta, test_acc, epsilon, label_leak, feature_mse, ...)
and DIR/frontier.png.

    python -m simulations.benchmarks.frontier --out bench-out/frontier            # digits-5p, ~15 min on 2 cores
    python -m simulations.benchmarks.frontier --out DIR --quick                   # 2x2 grid, a few minutes
    python -m simulations.benchmarks.frontier --out DIR --full                    # mnist5k quadrants (CNN)
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from simulations.cli.runner import execute, resolve_config  # noqa: E402
from simulations.report.plots import save_png_pdf  # noqa: E402
from simulations.report.render import RUN_ATTACKS, load_run  # noqa: E402
from simulations.report.run import Skipped  # noqa: E402

GRID: dict[str, list[Any]] = {"b": [2, 8, 32], "beta": [0.05, 0.1, 0.25]}
QUICK: dict[str, list[Any]] = {"b": [2, 32], "beta": [0.05, 0.25]}
COLORS = {"npq": "black", "pbm": "tab:blue", "ldp": "tab:orange"}


def settings(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"strategy": "npq", "b": None, "beta": None}]
    for strategy in ("pbm", "ldp"):
        rows += [{"strategy": strategy, "b": b, "beta": beta} for b in grid["b"] for beta in grid["beta"]]
    return rows


def run_point(base: str, overrides: list[str], row: dict[str, Any], *, epochs: int, out: Path) -> dict[str, Any]:
    sets = [*overrides, f"strategy={row['strategy']}", "params={}", f"train.epochs={epochs}",
            "transport.kind=inprocess", "privacy.record_views=true", "attack.canaries=0"]
    if row["b"] is not None:
        sets += [f"params.b={row['b']}", f"params.beta={row['beta']}"]
    cfg = resolve_config(base, sets)
    tag = row["strategy"] + (f"-b{row['b']}-beta{row['beta']}" if row["b"] is not None else "")
    path = out / "runs" / tag
    shutil.rmtree(path, ignore_errors=True)
    t0 = time.perf_counter()
    summary = execute(cfg, out_dir=path, progress=False).summary
    run = load_run(path)
    res = dict(row)
    res.update(test_acc=summary.get("final_test_acc"), epsilon=summary.get("epsilon"),
               sigma=getattr(run.strategy, "sigma", None) if row["strategy"] == "ldp" else None)
    for name, key in (("label_inference", "label_leak"), ("feature_reconstruction", "feature_mse")):
        try:
            (att,) = RUN_ATTACKS.get(name)(run)
            res[key], res[f"{key}_chance"] = att.value, att.baseline
        except Skipped as exc:
            res[key], res[f"{key}_chance"] = None, None
            res[f"{key}_skipped"] = str(exc)
    res["wall_s"] = time.perf_counter() - t0
    shutil.rmtree(path / "views", ignore_errors=True)  # the views are large; the numbers are kept
    return res


def plot(rows: list[dict[str, Any]], path: Path, title: str) -> None:
    panels = (("test_acc", "test accuracy"), ("label_leak", "label inference (passive party)"),
              ("feature_mse", "feature MSE / aux-mean MSE (server)"))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    finite = [r["epsilon"] for r in rows if r["epsilon"] is not None and math.isfinite(r["epsilon"])]
    for ax, (key, label) in zip(axes, panels, strict=True):
        for strategy in ("pbm", "ldp"):
            pts = sorted((r["epsilon"], _y(r, key)) for r in rows if r["strategy"] == strategy
                         and r["epsilon"] is not None and _y(r, key) is not None)
            if pts:
                ax.scatter(*zip(*pts, strict=True), color=COLORS[strategy], label=strategy, s=22)
        npq = next((r for r in rows if r["strategy"] == "npq"), None)
        if npq is not None and _y(npq, key) is not None:
            ax.axhline(_y(npq, key), color="black", ls="--", lw=1, label="npq (no privacy, ε = ∞)")
        chance = [float(r[f"{key}_chance"]) for r in rows if r.get(f"{key}_chance") is not None]
        if key == "label_leak" and chance:
            ax.axhline(sum(chance) / len(chance), color="gray", ls=":", lw=1, label="chance")
        if key == "feature_mse":
            ax.axhline(1.0, color="gray", ls=":", lw=1, label="chance (aux mean)")
        ax.set_xscale("log")
        if finite:
            ax.set_xlim(min(finite) / 2, max(finite) * 2)
        ax.set(xlabel="accountant ε (upper bound)", ylabel=label)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_png_pdf(fig, path)


def _y(row: dict[str, Any], key: str) -> float | None:
    v = row.get(key)
    if v is None:
        return None
    if key == "feature_mse":
        return float(v) / float(row["feature_mse_chance"]) if row.get("feature_mse_chance") else None
    return float(v)


def _fmt(v: Any) -> str:
    return "-" if v is None else (f"{v:.4g}" if isinstance(v, float) else str(v))


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/frontier")
    ap.add_argument("--full", action="store_true", help="mnist5k quadrants (CNN bottoms) instead of digits-5p")
    ap.add_argument("--quick", action="store_true", help="a 2x2 grid (validation)")
    ap.add_argument("--epochs", type=int, help="training epochs per point (default 10; --full 5)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="extra config overrides")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    base = "mnist5k-quadrants" if args.full else "digits-5p"
    epochs = args.epochs or (5 if args.full else 10)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    header = ("strategy", "b", "beta", "test_acc", "epsilon", "label_leak", "label_leak_chance", "feature_mse",
              "feature_mse_chance", "wall_s")
    print("  ".join(f"{h:>12}" for h in header))
    for point in settings(QUICK if args.quick else GRID):
        row = run_point(base, args.overrides, point, epochs=epochs, out=out)
        rows.append(row)
        print("  ".join(f"{_fmt(row.get(h)):>12}" for h in header), flush=True)
    command = "python -m simulations.benchmarks.frontier " + " ".join(argv if argv is not None else sys.argv[1:])
    with open(out / "frontier.json", "w") as f:
        json.dump({"config": base, "epochs": epochs, "command": command, "rows": rows}, f, indent=2)
    plot(rows, out / "frontier.png", f"{base}, {epochs} epochs: utility vs accountant ε vs measured attacks")
    print(f"wrote {out / 'frontier.json'} and {out / 'frontier.png'}")
    return rows


if __name__ == "__main__":
    main()
