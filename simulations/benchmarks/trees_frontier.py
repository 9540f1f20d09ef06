"""The privacy frontier of secureboost: test AUC and the instance-space attack against the label ε.

    python -m simulations.benchmarks.trees_frontier --out DIR                   # credit-shaped 30k and breast cancer
    python -m simulations.benchmarks.trees_frontier --out DIR --data-dir D      # the real default-credit file if D has it

Per set, 30 trees (``--trees``) at ε_label ∈ {1, 2, 4, 8} (``privacy.target_epsilon`` calibrates
``params.label_dp.noise_multiplier``), without label DP (ε = ∞), with gradients that carry no label at all
(``label_free``: noise multiplier 1000, ε ≈ 0: what the attack gets from the columns' structure alone, the
floor no label ε can go under), and with ``params.hide_instance_space`` (Paillier, ``--hide-trees`` trees: the
same trees as without it, so its AUC is that run's at that many trees; the attack has no instance space).
The DP runs share one set of hyper-parameters (``DP_PARAMS``: shallower trees, shrinkage, a larger λ and
child weight tame the noisy leaves); the non-private reference uses both those and the defaults.

Each row of ``DIR/trees_frontier.json``: ``set``, ``setting`` (``eps=…``, ``no_dp``, ``no_dp_default``,
``label_free``, ``hide``), ``epsilon_label``, ``test_auc``, ``attack`` (the instance-space label accuracy of the
best passive party, 1 % of the labels known), ``chance`` (majority class), ``advantage`` (attack − chance),
``trees``, ``he``; a noised point is the mean of ``--repeats`` runs (``*_std`` their spread). ``DIR/trees_frontier.png``/``.pdf``: AUC and attack accuracy against ε per set.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import tempfile
from pathlib import Path
from typing import Any

SETS: dict[str, dict[str, Any]] = {"credit": {"dataset": "simulations.benchmarks.trees_data:credit_like", "real": "default-credit",
                   "num_parties": 2},
        "breast-cancer": {"dataset": "breast-cancer", "real": None, "num_parties": 3}}
EPSILONS = (1.0, 2.0, 4.0, 8.0)
DP_PARAMS = ["params.max_depth=3", "params.learning_rate=0.1", "params.reg_lambda=100", "params.min_child_weight=20",
             "params.max_bin=16"]
CLIP = 0.25  # logistic gradients clipped to ±0.25: sensitivity 0.5, half the noise of an unclipped gradient


def run_point(name: str, setting: str, extra: list[str], *, trees: int, data_dir: str | None) -> dict[str, Any]:
    from simulations.cli.runner import execute, resolve_config
    from simulations.report.render import run_attacks
    from simulations.report.run import load_run

    spec = SETS[name]
    real = bool(data_dir and spec["real"])
    over = [f"dataset={spec['real'] if real else spec['dataset']}", f"num_parties={spec['num_parties']}",
            f"params.n_estimators={trees}", "transport.kind=inprocess", "privacy.record_views=true",
            "privacy.record_max_mb=1024", "params.allow_insecure=true", "name=frontier", *extra]
    if real:
        over.append(f"data.data_dir={data_dir}")
    with tempfile.TemporaryDirectory(prefix="vfl-frontier-") as tmp:
        res = execute(resolve_config("secureboost-bc", over), out_dir=Path(tmp) / "run", progress=False)
        results, skipped = run_attacks(load_run(Path(tmp) / "run"), ("instance_space",))
    s = res.summary
    attack = results[0] if results else None
    return {"set": name, "setting": setting, "epsilon_label": s.get("epsilon_label"), "test_auc": s.get("final_test_auc"),
            "attack": attack.value if attack else None, "chance": attack.baseline if attack else None,
            "advantage": (attack.value - attack.baseline) if attack else None, "trees": s.get("n_trees"),
            "he": s.get("he"), "s_per_tree": s.get("s_per_tree"), "real_data": real,
            **({"skipped": skipped} if attack is None else {})}


def repeated(name: str, setting: str, extra: list[str], *, repeats: int, trees: int, data_dir: str | None
             ) -> dict[str, Any]:
    """A noised point run ``repeats`` times (fresh noise each): the mean, and the std as ``*_std``."""
    runs = [run_point(name, setting, extra, trees=trees, data_dir=data_dir) for _ in range(repeats)]
    out = dict(runs[0])
    for key in ("test_auc", "attack", "advantage"):
        vals = [r[key] for r in runs if r[key] is not None]
        if vals:
            out[key], out[f"{key}_std"] = float(statistics.mean(vals)), float(statistics.pstdev(vals))
    out["repeats"] = repeats
    return out


def points(name: str, *, trees: int, hide_trees: int, repeats: int, data_dir: str | None) -> list[dict[str, Any]]:
    clear = ["params.he=none"]
    label_dp = f"params.label_dp={{noise_multiplier: 1.0, clip: {CLIP}}}"
    rows = [run_point(name, "no_dp_default", clear, trees=trees, data_dir=data_dir),
            run_point(name, "no_dp", [*clear, *DP_PARAMS], trees=trees, data_dir=data_dir)]
    for eps in EPSILONS:
        rows.append(repeated(name, f"eps={eps:g}", [*clear, *DP_PARAMS, label_dp, f"privacy.target_epsilon={eps}"],
                             repeats=repeats, trees=trees, data_dir=data_dir))
    rows.append(repeated(name, "label_free", [*clear, *DP_PARAMS, f"params.label_dp={{noise_multiplier: 1000.0, "
                                                                   f"clip: {CLIP}}}"],
                         repeats=repeats, trees=trees, data_dir=data_dir))
    rows.append(run_point(name, "hide", ["params.he=paillier", "params.hide_instance_space=true", *DP_PARAMS],
                          trees=hide_trees, data_dir=data_dir))
    return rows


def figure(rows: list[dict[str, Any]], out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from simulations.report.style import save

    sets = sorted({r["set"] for r in rows})
    fig, axes = plt.subplots(2, len(sets), figsize=(5.2 * len(sets), 6.4), squeeze=False)
    for j, name in enumerate(sets):
        mine = [r for r in rows if r["set"] == name]
        dp = sorted((r for r in mine if r["setting"].startswith("eps=")), key=lambda r: r["epsilon_label"])
        ref = {r["setting"]: r for r in mine}
        xs = [r["epsilon_label"] for r in dp]
        for i, (key, label) in enumerate((("test_auc", "test AUC"), ("attack", "instance-space attack: label accuracy"))):
            ax = axes[i][j]
            ax.errorbar(xs, [r[key] for r in dp], yerr=[r.get(f"{key}_std") or 0.0 for r in dp], fmt="o-", capsize=3,
                        label="label DP (ε_label), mean ± std over runs")
            if "no_dp" in ref and ref["no_dp"][key] is not None:
                ax.axhline(ref["no_dp"][key], color="C1", ls="--", label="no label DP (same hyper-parameters)")
            if key == "attack":
                ch = next((r["chance"] for r in mine if r["chance"] is not None), None)
                if ch is not None:
                    ax.axhline(ch, color="grey", ls=":", label="chance (majority class)")
                if "hide" in ref and ref["hide"]["attack"] is not None:
                    ax.axhline(ref["hide"]["attack"], color="C3", ls=(0, (1, 3)), label="hidden instance spaces (no label DP)")
                if "label_free" in ref and ref["label_free"]["attack"] is not None:
                    ax.axhline(ref["label_free"]["attack"], color="C2", ls="-.",
                               label="gradients without labels (the columns' structure alone)")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("ε_label (δ = 1e-5)")
            ax.set_ylabel(label)
            ax.set_title(f"secureboost on {name}: {label.split(':')[0]}")
            ax.ticklabel_format(axis="y", useOffset=False)
            ax.legend(fontsize=7)
    return save(fig, out / "trees_frontier.png")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulations.benchmarks.trees_frontier",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--sets", default=",".join(SETS))
    p.add_argument("--trees", type=int, default=30)
    p.add_argument("--hide-trees", type=int, default=3, help="trees of the hidden-instance-space run (Paillier)")
    p.add_argument("--repeats", type=int, default=3, help="runs of each noised point (fresh noise each): mean ± std")
    p.add_argument("--data-dir", default=None)
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for name in args.sets.split(","):
        for row in points(name, trees=args.trees, hide_trees=args.hide_trees, repeats=args.repeats,
                          data_dir=args.data_dir):
            rows.append(row)
            eps = row["epsilon_label"]
            print(f"{name:14} {row['setting']:14} eps {'inf' if eps is None else format(eps, '.3g'):>6} "
                  f"auc {row['test_auc'] or math.nan:.4f} attack {row['attack'] or math.nan:.4f} "
                  f"chance {row['chance'] or math.nan:.4f}", flush=True)
            (out / "trees_frontier.json").write_text(json.dumps({"rows": rows, "dp_params": DP_PARAMS, "clip": CLIP},
                                                                indent=2) + "\n")
    print(f"figure: {figure(rows, out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
