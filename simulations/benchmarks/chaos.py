"""Chaos: kill a random Ray actor every N training steps of a 30-epoch demo; the run heals itself.

Runs the demo (PBM + secure aggregation over Ray on digits, one actor per party, seeded privacy
noise) twice: uninterrupted, then with a killer that every ``--kill-every`` steps picks a host
actor at random (server or a party) and kills it a moment after the driver chained the next
steps, so it dies with a step in flight. The engine restarts it from the last checkpoint
(``train.on_failure: restart``). Prints a table; writes DIR/chaos.json with ``epochs_completed``,
``kills``, ``restarts`` and ``max_metric_diff`` (largest difference of any metric of any epoch
against the uninterrupted run: 0 with seeded noise), and the kill/restart logs.

    python -m simulations.benchmarks.chaos --out bench-out/chaos
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from pathlib import Path
from typing import Any

from simulations.cli.runner import execute, resolve_config
from vfl.engine.engine import Engine


class Killer:
    """An ``on_step`` callback that kills a random host actor every ``every`` training steps."""

    def __init__(self, *, every: int, seed: int, epochs: int) -> None:
        self.every = every
        self.rng = random.Random(seed)
        self.epochs = epochs
        self.steps = 0
        self.next_kill = every
        self._last = (-1, 0)
        self.kills: list[dict[str, Any]] = []
        self.timers: list[threading.Timer] = []

    def __call__(self, epoch: int, done: int, engine: Engine) -> None:
        prev_epoch, prev_done = self._last
        self.steps += done - prev_done if (epoch == prev_epoch and done > prev_done) else done
        self._last = (epoch, done)
        final = epoch == self.epochs - 1 and done >= engine.strategy.steps_per_epoch()
        if self.steps < self.next_kill or final:  # a kill after the last step could outlive the run
            return
        self.next_kill = self.steps + self.every
        transport: Any = engine.transport
        actor = self.rng.choice(sorted(transport.actors))
        self.kills.append({"step": self.steps, "epoch": epoch, "actor": actor})
        timer = threading.Timer(self.rng.uniform(0.005, 0.05), self._kill, args=(transport, actor))
        timer.start()
        self.timers.append(timer)

    @staticmethod
    def _kill(transport: Any, actor: str) -> None:
        try:
            transport.kill(actor)
        except Exception:  # the actor was already being replaced
            pass

    def join(self) -> None:
        for t in self.timers:
            t.join()


def max_metric_diff(ref: list[dict[str, Any]], got: list[dict[str, Any]]) -> float:
    """Largest |difference| of any numeric metric of any epoch (timings excluded); inf when the
    epochs themselves differ."""
    if [r["epoch"] for r in ref] != [r["epoch"] for r in got]:
        return float("inf")
    worst = 0.0
    for a, b in zip(ref, got, strict=True):
        for k, v in a.items():
            if k.endswith("_s") or isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            w = b.get(k)
            if not isinstance(w, (int, float)):
                return float("inf")
            worst = max(worst, abs(float(v) - float(w)))
    return worst


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out/chaos")
    ap.add_argument("--config", default="demo")
    ap.add_argument("--set", dest="overrides", action="append", default=[])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--kill-every", type=int, default=100, help="training steps between kills")
    ap.add_argument("--seed", type=int, default=0, help="seed of the killer's choices")
    args = ap.parse_args(argv)
    out = Path(args.out)
    sets = [*args.overrides, f"train.epochs={args.epochs}", "privacy.noise_rng=seeded", "transport.kind=ray",
            "transport.parties_per_actor=1", "train.on_failure=restart", "train.max_restarts=1000"]
    cfg = resolve_config(args.config, sets)

    t0 = time.perf_counter()
    ref = execute(cfg, out_dir=out / "runs" / "reference", progress=False)
    ref_s = time.perf_counter() - t0
    killer = Killer(every=args.kill_every, seed=args.seed, epochs=args.epochs)
    t0 = time.perf_counter()
    try:
        got = execute(cfg, out_dir=out / "runs" / "chaos", progress=False, on_step=killer)
    finally:
        killer.join()
    chaos_s = time.perf_counter() - t0

    epochs = [r["epoch"] for r in got.history]
    report = {
        "config": args.config, "epochs": args.epochs, "kill_every": args.kill_every,
        "epochs_completed": len(epochs) if epochs == list(range(len(epochs))) else 0,
        "kills": len(killer.kills), "restarts": len(got.summary["restarts"]),
        "max_metric_diff": max_metric_diff(ref.history, got.history),
        "final_test_acc": got.summary["final_test_acc"], "reference_final_test_acc": ref.summary["final_test_acc"],
        "replay_bytes": got.summary["replay_bytes"], "total_bytes": got.summary["total_bytes_up"]
        + got.summary["total_bytes_down"],
        "wall_s": {"reference": round(ref_s, 1), "chaos": round(chaos_s, 1)},
        "kill_log": killer.kills, "restart_log": got.summary["restarts"],
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "chaos.json").write_text(json.dumps(report, indent=2))
    print(f"{'epochs':>7} {'kills':>6} {'restarts':>9} {'max_metric_diff':>16} {'final_acc':>10} "
          f"{'replay_MB':>10} {'wall_s ref/chaos':>17}")
    print(f"{report['epochs_completed']:>7} {report['kills']:>6} {report['restarts']:>9} "
          f"{report['max_metric_diff']:>16.3g} {report['final_test_acc']:>10.4f} "
          f"{report['replay_bytes'] / 1e6:>10.3f} {ref_s:>8.1f}/{chaos_s:<8.1f}")
    for r in got.summary["restarts"]:
        print(f"  restart {r['attempt']}: {r['party']} in round {r['round']} (epoch {r['epoch']}): {r['cause']}")
    return report


if __name__ == "__main__":
    main()
