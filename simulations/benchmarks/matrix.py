"""Attack × defense matrix: every registered defense at ≥ 2 strengths plus "none", every attack on each run.

Each point trains the same config (in-process, views recorded) with one ``defenses:`` entry, then
runs the attacks on what the nodes recorded. Writes DIR/matrix.json: ``rows`` (one per run ×
attack: ``defense``, ``strength``, ``attack``, ``value``, ``baseline``, ``test_acc``, ``epsilon``
by scope), ``dcs`` (VFLAIR's Defense Capability Score per defense, docs/attacks.md §7) and
``skipped``; DIR/matrix.png (attack success relative to no defense, defenses × attacks) and
DIR/frontier.png (test accuracy vs label leak and vs feature MSE, one curve per defense).

``--family sap``: the same matrix for the split-LLM token defenses of SAP's customer (dχ noise at η,
SanText at ε, on sap-rt at split 0), attacked by the vendor (nearest-neighbour EIA, learned inverter,
attribute inference: ``llm_leak`` of ``vfl report``); "none" is the control.

    python -m simulations.benchmarks.matrix --out bench-out/matrix          # quick grid, digits-5p
    python -m simulations.benchmarks.matrix --out DIR --full                # 3 strengths, 20 epochs, all attacks
    python -m simulations.benchmarks.matrix --out DIR --family sap          # token defenses, 200 texts, 1 epoch
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
import numpy as np  # noqa: E402
import torch  # noqa: E402

import strategies  # noqa: E402, F401  (registers the strategies and the built-in defenses)
from simulations.cli.runner import execute, resolve_config  # noqa: E402
from simulations.report.plots import save_png_pdf  # noqa: E402
from simulations.report.render import RUN_ATTACKS, load_run, run_attacks  # noqa: E402
from vfl.privacy.defenses import DEFENSES  # noqa: E402

# (option, quick strengths, full strengths): the strength is the option's value
STRENGTHS: dict[str, tuple[str, list[float], list[float]]] = {
    "label_rr": ("epsilon", [4.0, 1.0], [8.0, 2.0, 0.5]),
    "label_rr_prior": ("epsilon", [4.0, 1.0], [8.0, 2.0, 0.5]),
    "label_gp": ("noise_multiplier", [0.5, 1.0], [0.3, 1.0, 3.0]),
    "mid": ("lam", [0.01, 0.1], [0.001, 0.01, 0.1]),
    "cae": ("lam", [0.01, 0.1], [0.0, 0.01, 0.1]),
    "dcae": ("lam", [0.01, 0.1], [0.0, 0.01, 0.1]),
    "grad_noise": ("scale", [0.01, 0.05], [0.003, 0.01, 0.05]),
    "grad_topk": ("keep", [0.5, 0.1], [0.5, 0.25, 0.05]),
    "marvell": ("strength", [1.0, 4.0], [0.5, 2.0, 8.0]),
    "dcor": ("alpha", [0.1, 0.5], [0.05, 0.2, 1.0]),
}
# --family sap: (config key, quick strengths, full strengths) of the customer's token defenses on sap-rt
SAP_STRENGTHS: dict[str, tuple[str, list[float], list[float]]] = {
    "dchi": ("params.eta", [75.0, 20.0], [100.0, 50.0, 20.0]),
    "santext": ("params.santext_epsilon", [20.0, 14.0], [40.0, 20.0, 14.0]),
}
SAP_QUICK = ("data.train_subsample=200", "data.test_subsample=100", "params.eia_samples=8")
BINARY_ONLY = {"marvell"}  # run on the binary config only (they refuse multi-class labels)
QUICK_ATTACKS = ("label_inference", "feature_reconstruction", "gradient_inversion", "passive_model_completion",
                 "grn_feature_inference", "noisy_samples", "missing_features")  # active_model_completion needs --set attack.amc_party=I
# MSEs: the attack succeeds when they are low (dlg_input: gradient_inversion's recovered head input)
LOWER_IS_STRONGER = {"feature_reconstruction", "grn_feature_inference", "dlg_input"}
BETA = 0.5  # DCS weight of the main task (VFLAIR's default)


def points(*, full: bool, binary: bool | None = None,
           only: tuple[str, ...] | None = None) -> list[tuple[str, float | None, dict[str, Any] | None]]:
    """(defense, strength, defenses entry) for "none" and every registered defense with known strengths;
    ``binary``: only the binary-only defenses (True), only the others (False), all (None); ``only``: these."""
    out: list[tuple[str, float | None, dict[str, Any] | None]] = [("none", None, None)]
    for name in DEFENSES.names():
        if name not in STRENGTHS or (binary is not None and (name in BINARY_ONLY) != binary):
            continue  # a third-party defense: no default strengths to sweep
        if only is not None and name not in only:
            continue
        key, quick, many = STRENGTHS[name]
        out += [(name, s, {"kind": name, key: s}) for s in (many if full else quick)]
    return out


def sap_points(*, full: bool) -> list[tuple[str, float | None, list[str]]]:
    """(defense, strength, config overrides) of the split-LLM family: none, dχ at η, SanText at ε (no dχ);
    CTI off everywhere (it releases some tokens with less noise: another defense)."""
    out: list[tuple[str, float | None, list[str]]] = [("none", None, ["params.eta=null"])]
    for name, (key, quick, many) in SAP_STRENGTHS.items():
        plain = [] if name == "dchi" else ["params.eta=null"]
        out += [(name, s, [*plain, f"{key}={s:g}"]) for s in (many if full else quick)]
    return [(d, st, ["params.cti=false", *sets]) for d, st, sets in out]


def attack_success(attack: str, value: float, baseline: float) -> float:
    """VFLAIR's attack performance AP in [0, 1]: a rate as it is; an MSE as 1 − value/baseline."""
    if attack in LOWER_IS_STRONGER:
        return float(min(1.0, max(0.0, 1.0 - value / baseline))) if baseline > 0 else 0.0
    return float(value)


def dcs(*, ap: float, mp: float, ap_ideal: float, mp_ideal: float, beta: float = BETA) -> float:
    """Defense Capability Score (VFLAIR, Zou et al. ICLR 2024): 1 / (1 + distance to the ideal defense)."""
    return 1.0 / (1.0 + math.sqrt((1 - beta) * (ap - ap_ideal) ** 2 + beta * (mp - mp_ideal) ** 2))


def vertical_sets(overrides: list[str], entry: dict[str, Any] | None, *, epochs: int) -> list[str]:
    """A vertical point: npq with one ``defenses:`` entry (or none), views recorded for the attacks."""
    return [*overrides, "strategy=npq", "params={}", f"train.epochs={epochs}", "transport.kind=inprocess",
            "privacy.record_views=true", "attack.canaries=0", f"defenses=[{json.dumps(entry)}]" if entry else "defenses=[]"]


def run_point(base: str, sets: list[str], tag: str, *, out: Path,
              attacks: tuple[str, ...] | None) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, str]]:
    cfg = resolve_config(base, sets)
    path = out / "runs" / tag
    shutil.rmtree(path, ignore_errors=True)
    t0, c0 = time.perf_counter(), time.process_time()  # cpu_s: this process's CPU, the quiet-machine cost
    summary = execute(cfg, out_dir=path, progress=False).summary
    results, skipped = run_attacks(load_run(path), attacks)
    run = {"test_acc": summary.get("final_test_acc"), "wall_s": time.perf_counter() - t0,
           "cpu_s": time.process_time() - c0,
           "epsilon": {"feature": summary.get("epsilon"), "label": summary.get("epsilon_label")}}
    shutil.rmtree(path / "views", ignore_errors=True)  # large; the numbers are kept
    return run, [{"attack": r.name, "value": r.value, "baseline": r.baseline} for r in results], skipped


def score(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per defense: mean DCS over its strengths and attacks (ideal: the attack at chance, no-defense accuracy)."""
    none_acc = {r["dataset"]: r["test_acc"] for r in rows if r["defense"] == "none"}
    per: dict[str, list[float]] = {}
    for r in rows:
        if r["test_acc"] is None or r["value"] is None or r["baseline"] is None:
            continue
        ap = attack_success(r["attack"], r["value"], r["baseline"])
        ideal = 0.0 if r["attack"] in LOWER_IS_STRONGER else float(r["baseline"])
        per.setdefault(r["defense"], []).append(dcs(ap=ap, mp=r["test_acc"], ap_ideal=ideal,
                                                    mp_ideal=none_acc[r["dataset"]]))
    table = {d: {"dcs": float(np.mean(v)), "points": len(v)} for d, v in per.items()}
    return dict(sorted(table.items(), key=lambda kv: -kv[1]["dcs"]))


def plot_matrix(rows: list[dict[str, Any]], path: Path) -> None:
    """Heatmap: (value − baseline) / (no-defense value − baseline) per (defense@strength, attack)."""
    ref = {(r["dataset"], r["attack"]): r for r in rows if r["defense"] == "none"}
    labels = sorted({(r["dataset"], r["defense"], r["strength"]) for r in rows if r["defense"] != "none"},
                    key=lambda t: (t[0], t[1], -1 if t[2] is None else t[2]))
    attacks = sorted({r["attack"] for r in rows})
    grid = np.full((len(labels), len(attacks)), np.nan)
    for r in rows:
        key = (r["dataset"], r["defense"], r["strength"])
        base = ref.get((r["dataset"], r["attack"]))
        if key in labels and base is not None and r["value"] is not None:
            span = base["value"] - base["baseline"]
            if span:
                grid[labels.index(key), attacks.index(r["attack"])] = (r["value"] - r["baseline"]) / span
    fig, ax = plt.subplots(figsize=(max(6.0, 2 + 1.6 * len(attacks)), max(3.0, 1 + 0.4 * len(labels))))
    im = ax.imshow(grid, cmap="RdYlGn_r", vmin=0, vmax=1.2, aspect="auto")
    ax.set_xticks(range(len(attacks)), attacks, rotation=20, fontsize=8)
    ax.set_yticks(range(len(labels)), [f"{d}: {n} {s}" for d, n, s in labels], fontsize=8)
    for i in range(len(labels)):
        for j in range(len(attacks)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.2f}", ha="center", va="center", fontsize=7)
    fig.colorbar(im).set_label("gain over chance / undefended gain", fontsize=8)  # 0: the attack at chance, 1: as undefended
    fig.tight_layout()
    save_png_pdf(fig, path)


FRONTIERS = {"vertical": (("label_inference", "label leak (passive party)"),
                          ("feature_reconstruction", "feature MSE / chance MSE (server)")),
             "sap": (("embedding_inversion", "token recovery, nearest neighbour (vendor)"),
                     ("learned_inversion", "token recovery, learned inverter (vendor)"))}


def plot_frontier(rows: list[dict[str, Any]], path: Path, family: str = "vertical") -> None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for ax, (attack, label) in zip(axes, FRONTIERS[family], strict=True):
        first = rows[0]["dataset"] if rows else None  # one curve per (config, defense): configs never joined
        for dataset, defense in sorted({(r["dataset"], r["defense"]) for r in rows}):
            pts = sorted((r["value"] / r["baseline"] if attack in LOWER_IS_STRONGER else r["value"], r["test_acc"])
                         for r in rows if r["defense"] == defense and r["attack"] == attack
                         and r["dataset"] == dataset
                         and r["value"] is not None and r["test_acc"] is not None
                         and (r["baseline"] or attack not in LOWER_IS_STRONGER))
            if pts:
                ax.plot(*zip(*pts, strict=True), marker="o",
                        label=defense if dataset == first else f"{defense} ({dataset})")
        ax.set(xlabel=label, ylabel="test accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    save_png_pdf(fig, path)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/matrix")
    ap.add_argument("--full", action="store_true", help="3 strengths per defense, 20 epochs, every defense on both configs")
    ap.add_argument("--epochs", type=int, help="training epochs per point (default 5; --full 20)")
    ap.add_argument("--attacks", help="comma-separated attacks, or 'all' (default: " + ",".join(QUICK_ATTACKS)
                    + "; --full: all)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="extra config overrides")
    ap.add_argument("--defenses", help="comma-separated defenses to run beside none (default: every one with strengths)")
    ap.add_argument("--family", choices=tuple(FRONTIERS), default="vertical",
                    help="vertical: label/feature defenses on npq (default); sap: token defenses of SAP's customer")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    sap = args.family == "sap"
    # digits (10 classes) for every defense; breast-cancer (binary) for the binary-only ones (+ all with --full)
    bases = {"sap-rt": None} if sap else {"digits-5p": False, "breast-cancer-10p": None if args.full else True}
    epochs = args.epochs or ((3 if args.full else 1) if sap else (20 if args.full else 5))
    chosen = args.attacks or ("llm_leak" if sap else "all" if args.full else ",".join(QUICK_ATTACKS))
    attacks = None if chosen == "all" else tuple(a.strip() for a in chosen.split(",") if a.strip())
    for a in attacks or ():
        RUN_ATTACKS.get(a, "--attacks")
    only = None if not args.defenses else tuple(d.strip() for d in args.defenses.split(",") if d.strip())
    known = SAP_STRENGTHS if sap else STRENGTHS
    for d in only or ():
        if d not in known:
            raise SystemExit(f"--defenses: unknown defense {d!r}; allowed: {', '.join(known)}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, str] = {}
    t_grid, c_grid = time.perf_counter(), time.process_time()
    print(f"{'dataset':>18} {'defense':>11} {'strength':>8} {'test_acc':>8}  attacks (value / baseline)")
    for base, binary in bases.items():
        if sap:
            grid = [(d, st, [*(() if args.full else SAP_QUICK), *args.overrides, *sets, f"train.epochs={epochs}", "transport.kind=inprocess"])
                    for d, st, sets in sap_points(full=args.full) if only is None or d in ("none", *only)]
        else:
            grid = [(d, st, vertical_sets(args.overrides, entry, epochs=epochs))
                    for d, st, entry in points(full=args.full, binary=binary, only=only)]
        for defense, strength, sets in grid:
            tag = f"{base}-{defense}" + ("" if strength is None else f"-{strength:g}")
            try:
                run, results, why = run_point(base, sets, tag, out=out, attacks=attacks)
            except Exception as exc:  # e.g. marvell on a multi-class dataset: refused, recorded, the grid goes on
                skipped[tag] = f"{type(exc).__name__}: {exc}"
                print(f"{base:>18} {defense:>11} {'' if strength is None else strength:>8}  skipped: {exc}", flush=True)
                continue
            skipped.update({f"{tag}/{k}": v for k, v in why.items()})
            for res in results:
                rows.append({"dataset": base, "defense": defense, "strength": strength, **res,
                             "test_acc": run["test_acc"], "epsilon": run["epsilon"], "wall_s": run["wall_s"],
                             "cpu_s": run["cpu_s"]})
            cells = "  ".join(f"{r['attack']} {r['value']:.3f}/{r['baseline']:.3f}" for r in results)
            print(f"{base:>18} {defense:>11} {'' if strength is None else strength:>8} {run['test_acc']:>8.3f}  {cells}",
                  flush=True)
    table = score(rows)
    command = "python -m simulations.benchmarks.matrix " + " ".join(argv if argv is not None else sys.argv[1:])
    doc = {"configs": list(bases), "epochs": epochs, "strategy": "sap" if sap else "npq", "family": args.family,
           "command": command, "beta": BETA,
           "rows": rows, "dcs": table, "skipped": skipped,
           "dcs_by_config": {b: score([r for r in rows if r["dataset"] == b]) for b in bases},
           "wall_s": time.perf_counter() - t_grid, "cpu_s": time.process_time() - c_grid}
    with open(out / "matrix.json", "w") as f:
        json.dump(doc, f, indent=2)
    plot_matrix(rows, out / "matrix.png")
    plot_frontier(rows, out / "frontier.png", args.family)
    print("DCS (mean over strengths and attacks; higher is better):")
    for d, v in table.items():
        print(f"  {d:>11}  {v['dcs']:.3f}  ({v['points']} points)")
    print(f"grid: {doc['wall_s']:.0f} s wall, {doc['cpu_s']:.0f} s CPU (one process, one thread)")
    print(f"wrote {out / 'matrix.json'}, {out / 'matrix.png'}, {out / 'frontier.png'}")
    return doc


if __name__ == "__main__":
    main()
