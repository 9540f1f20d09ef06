"""End-to-end ε and its cost: the same PBM run without and with ``privacy.bottom_dp`` (DP-SGD of every
party's bottom through Opacus) at one or more noise multipliers. Prints test accuracy, the
release-only ε (PBM events alone), the end-to-end ε (PBM + DP-SGD composed) and seconds per step.

    python -m simulations.benchmarks.bottom_dp --out bench-out [--config digits-5p] \
        [--noise 1.0 3.0] [--max-grad-norm 1.0] [--set k=v ...]

Writes ``DIR/bottom_dp.json`` with one row per setting: ``noise_multiplier``, ``max_grad_norm``,
``test_acc``, ``epsilon_release``, ``epsilon_dpsgd``, ``epsilon``, ``epsilon_scope``,
``s_per_step`` (median over epochs of train seconds / steps) and ``step_time_ratio`` (to the run
without bottom_dp). All runs are inprocess, one after another in this process.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from simulations.cli.runner import execute, resolve_config
from vfl.privacy import Accountant, DPSGDEvent, PBMEvent, PrivacyEvent

DEFAULTS = ["transport.kind=inprocess", "strategy=pbm", "params.b=16", "params.beta=0.25"]


def _part_epsilon(events: tuple[PrivacyEvent, ...], kind: type[PBMEvent] | type[DPSGDEvent], delta: float) -> float | None:
    acc = Accountant()
    for ev in events:
        if isinstance(ev, kind):
            acc.record(ev)
    return acc.epsilon(delta)[0] if acc.events else None


def run_one(config: str, overrides: list[str], noise: float | None, clip: float) -> dict[str, Any]:
    extra = [] if noise is None else [f"privacy.bottom_dp={{noise_multiplier: {noise}, max_grad_norm: {clip}}}"]
    cfg = resolve_config(config, [*DEFAULTS, *overrides, *extra])
    captured: dict[str, Any] = {}
    res = execute(cfg, out_dir=None, progress=False,
                  on_epoch_end=lambda e, r, engine: captured.update(events=engine.accountant.events,
                                                                    steps=engine.strategy.steps_per_epoch()))
    s, hist = res.summary, res.history
    delta = cfg.privacy.delta
    return {
        "noise_multiplier": noise, "max_grad_norm": clip if noise is not None else None,
        "epochs": s["epochs"], "test_acc": s["final_test_acc"],
        "epsilon_release": _part_epsilon(captured["events"], PBMEvent, delta),
        "epsilon_dpsgd": _part_epsilon(captured["events"], DPSGDEvent, delta),
        "epsilon": s["epsilon"], "epsilon_scope": s["epsilon_scope"], "delta": delta,
        "s_per_step": statistics.median(r["train_s"] for r in hist) / captured["steps"],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for bottom_dp.json")
    ap.add_argument("--config", default="digits-5p")
    ap.add_argument("--noise", type=float, nargs="+", default=[1.0, 3.0], help="noise multipliers to compare")
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="extra config override k=v")
    args = ap.parse_args(argv)
    rows = [run_one(args.config, args.overrides, None, args.max_grad_norm)]
    rows += [run_one(args.config, args.overrides, nm, args.max_grad_norm) for nm in args.noise]
    for r in rows:
        r["step_time_ratio"] = r["s_per_step"] / rows[0]["s_per_step"]
    out = {"config": args.config, "overrides": [*DEFAULTS, *args.overrides], "rows": rows}
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bottom_dp.json").write_text(json.dumps(out, indent=2))
    print(f"{'bottom_dp':>16} {'test_acc':>8} {'eps_release':>11} {'eps_dpsgd':>9} {'eps_e2e':>9} "
          f"{'s/step':>8} {'ratio':>6}  scope")
    for r in rows:
        name = "off" if r["noise_multiplier"] is None else f"nm={r['noise_multiplier']},C={r['max_grad_norm']}"
        dpsgd = "-" if r["epsilon_dpsgd"] is None else f"{r['epsilon_dpsgd']:.2f}"
        print(f"{name:>16} {r['test_acc']:8.4f} {r['epsilon_release']:11.2f} {dpsgd:>9} {r['epsilon']:9.2f} "
              f"{r['s_per_step']:8.5f} {r['step_time_ratio']:6.2f}  {r['epsilon_scope']}")
    return out


if __name__ == "__main__":
    main()
