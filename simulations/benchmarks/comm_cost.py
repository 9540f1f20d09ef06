"""Communication cost to reach a target (the PBM-VFL paper's Tables 1-3 procedure).

For a grid of (b, beta), plus NPQ and the LDP baseline, train the same config, find the first
epoch whose metric reaches the target, and report the MEASURED wire megabytes up to that epoch
beside the paper's formula. Prints a table; writes DIR/comm_cost.json, DIR/comm_cost.csv and
DIR/comm_cost_curves.png.

    python -m simulations.benchmarks.comm_cost --out bench-out            # offline default grid
    python -m simulations.benchmarks.comm_cost --full --config har-5p --set data.data_dir=DATA

A ``--local-steps 1,3,5`` axis (FedBCD, ``train.local_steps``) runs every setting once per Q and adds
the exchanges, bytes and wall seconds to the target per Q (``--only pbm`` keeps it short):

    python -m simulations.benchmarks.comm_cost --only pbm --b 16 --beta 0.25 --local-steps 1,3,5 --epochs 6 --out bench-out
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from simulations.cli.runner import execute, resolve_config  # noqa: E402
from simulations.report.plots import save_png_pdf  # noqa: E402
from vfl.engine.schema import RunConfig  # noqa: E402
from vfl.runtime.costs import paper_formula_bytes  # noqa: E402

DEFAULT_GRID: dict[str, list[Any]] = {"b": [4, 16, 64], "beta": [0.1, 0.25]}
FULL_GRID: dict[str, list[Any]] = {"b": [4, 8, 16, 64, 128], "beta": [0.1, 0.15, 0.2, 0.25]}  # the paper's Activity grid


def settings(grid: dict[str, list[Any]], ldp_b: int, ldp_beta: float, *, local_steps: tuple[int, ...] = (1,),
             only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = [{"strategy": "npq", "b": None, "beta": None}]
    rows += [{"strategy": "pbm", "b": b, "beta": beta} for b in grid["b"] for beta in grid["beta"]]
    rows.append({"strategy": "ldp", "b": ldp_b, "beta": ldp_beta})
    rows = [r for r in rows if not only or r["strategy"] in only]
    return [{**r, "local_steps": q} for r in rows for q in local_steps]


def run_one(base: str, overrides: list[str], row: dict[str, Any], *, epochs: int, transport: str,
            out: Path) -> tuple[list[dict[str, Any]], RunConfig]:
    sets = [*overrides, f"strategy={row['strategy']}", "params={}", f"train.epochs={epochs}",
            f"transport.kind={transport}", f"train.local_steps={row['local_steps']}"]
    if row["b"] is not None:
        sets += [f"params.b={row['b']}", f"params.beta={row['beta']}"]
    cfg = resolve_config(base, sets)
    tag = row["strategy"] + (f"-b{row['b']}-beta{row['beta']}" if row["b"] is not None else "") \
        + f"-q{row['local_steps']}"
    return execute(cfg, out_dir=out / "runs" / tag, progress=False).history, cfg


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--config", default="digits-5p", help="base config (default: offline digits, 5 parties)")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--metric", default="train_acc", help="metrics.jsonl key compared with --target")
    ap.add_argument("--target", type=float, default=0.8)
    ap.add_argument("--transport", default="inprocess", choices=("inprocess", "ray"),
                    help="bytes are identical; inprocess is faster on a small machine")
    ap.add_argument("--full", action="store_true", help="the paper's (b, beta) grid and 100 epochs")
    ap.add_argument("--ldp-b", type=int, default=16)
    ap.add_argument("--ldp-beta", type=float, default=0.25)
    ap.add_argument("--local-steps", default="1", help="comma list of train.local_steps Q (FedBCD), e.g. 1,3,5")
    ap.add_argument("--only", default="", help="comma list of strategies to run (npq,pbm,ldp; default all)")
    ap.add_argument("--b", default="", help="comma list replacing the grid's b values (e.g. 16)")
    ap.add_argument("--beta", default="", help="comma list replacing the grid's beta values (e.g. 0.25)")
    args = ap.parse_args(argv)
    qs = tuple(int(q) for q in args.local_steps.split(","))
    only = tuple(s for s in args.only.split(",") if s)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    grid = dict(FULL_GRID if args.full else DEFAULT_GRID)
    if args.b:
        grid["b"] = [int(b) for b in args.b.split(",")]
    if args.beta:
        grid["beta"] = [float(x) for x in args.beta.split(",")]
    epochs = 100 if args.full and args.epochs == 30 else args.epochs
    rows, curves = [], {}
    t0 = time.perf_counter()
    for row in settings(grid, args.ldp_b, args.ldp_beta, local_steps=qs, only=only):
        history, cfg = run_one(args.config, args.overrides, row, epochs=epochs, transport=args.transport, out=out)
        hit = next((r for r in history if (r.get(args.metric) or 0) >= args.target), None)
        steps = -(-len_train(cfg) // cfg.train.batch_size)
        to = hit["epoch"] + 1 if hit else None
        last = hit or history[-1]
        formula = paper_formula_bytes(iterations=steps * (to or len(history)), batch=cfg.train.batch_size,
                                      parties=cfg.num_parties, dim=cfg.model.embed_dim, b=row["b"]
                                      if row["strategy"] == "pbm" else None)
        label = row["strategy"] + (f" b={row['b']} β={row['beta']}" if row["strategy"] != "npq" else "") \
            + (f" Q={row['local_steps']}" if len(qs) > 1 else "")
        rows.append({**row, "label": label, "epochs_to_target": to,
                     "exchanges_to_target": steps * to if to else None,
                     "wall_s_to_target": hit["wall_s"] if hit else None,
                     "measured_mb": (last["cum_bytes_up"] + last["cum_bytes_down"]) / 1e6 if hit else None,
                     "measured_mb_all_epochs": (history[-1]["cum_bytes_up"] + history[-1]["cum_bytes_down"]) / 1e6,
                     "formula_mb": formula / 1e6 if hit else None,
                     "final_metric": history[-1].get(args.metric), "final_test_acc": history[-1].get("test_acc"),
                     "epsilon": history[-1].get("epsilon")})
        curves[label] = [(r["epoch"] + 1, r.get(args.metric)) for r in history]
        print(f"  {label:<22} done ({time.perf_counter() - t0:.0f}s)", flush=True)
    header = f"{'setting':<22} {'epochs→' + str(args.target):>12} {'measured MB':>12} {'formula MB':>11} " \
             f"{'final ' + args.metric:>16} {'test acc':>9} {'epsilon':>10}"
    print(f"\nconfig {args.config}, target {args.metric} >= {args.target}\n{header}")

    def fmt(v: Any, spec: str) -> str:
        return "never" if v is None else format(v, spec)

    for r in rows:
        print(f"{r['label']:<22} {fmt(r['epochs_to_target'], 'd'):>12} {fmt(r['measured_mb'], '.3f'):>12} "
              f"{fmt(r['formula_mb'], '.3f'):>11} {fmt(r['final_metric'], '.3f'):>16} "
              f"{fmt(r['final_test_acc'], '.3f'):>9} {('-' if r['epsilon'] is None else format(r['epsilon'], '.4g')):>10}")
    if len(qs) > 1:
        print_q_table(rows)
    meta = {"config": args.config, "overrides": args.overrides, "metric": args.metric, "target": args.target,
            "epochs": epochs, "local_steps": list(qs), "units": "MB = 1e6 bytes; measured = serialized flwr messages, up + down, training only",
            "wall_s": time.perf_counter() - t0}
    (out / "comm_cost.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    with open(out / "comm_cost.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, pts in curves.items():
        ax.plot([p[0] for p in pts], [float("nan") if p[1] is None else p[1] for p in pts], label=label,
                ls="--" if label.startswith(("npq", "ldp")) else "-")
    ax.axhline(args.target, color="gray", lw=0.8)
    ax.set(xlabel="epoch", ylabel=args.metric, title=f"{args.config}: NPQ vs PBM vs LDP")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    save_png_pdf(fig, out / "comm_cost_curves.png")
    print(f"wrote {out / 'comm_cost.json'}, comm_cost.csv, comm_cost_curves.png (+ .pdf)")
    return rows


def print_q_table(rows: list[dict[str, Any]]) -> None:
    """The FedBCD axis: exchanges, measured MB and wall seconds (training + evaluation) to the target per Q."""
    print(f"\n{'setting':<26} {'Q':>3} {'exchanges':>10} {'measured MB':>12} {'wall s':>8}")
    for r in rows:
        ex, mb, ws = r["exchanges_to_target"], r["measured_mb"], r["wall_s_to_target"]
        print(f"{r['label']:<26} {r['local_steps']:>3} {'never' if ex is None else ex:>10} "
              f"{'never' if mb is None else format(mb, '.3f'):>12} {'never' if ws is None else format(ws, '.1f'):>8}")


def len_train(cfg: Any) -> int:
    from simulations.data.source import ConfigDataSource

    return len(ConfigDataSource.from_config(cfg).partition()[1].y_train)


if __name__ == "__main__":
    main()
