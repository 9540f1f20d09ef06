"""``vfl sweep CONFIG --set a=1,2,3 --seeds 0,1,2``: a grid of runs, one table of mean ± std.

Runs go one after another, or with ``--parallel N`` as up to N Ray tasks at once
(``simulations.cli.sweep_ray``), each a normal run directory under ``--out``; the table has one row per
setting (a point of the grid) with the mean and sample standard deviation over the seeds of each
metric, written to ``sweep.csv`` and printed, and drawn with error bars in ``sweep.png`` (+ PDF). Every run in the grid is validated before the first
one starts, so a typo in the last value fails at once.

What the ± is over (``variance_note``, printed above the table, in ``sweep.json`` and the figure's title):
a seed sets the train/test split, the initialization and the batch order; the privacy noise is drawn
fresh in every run (``privacy.noise_rng: crypto``), so no seed repeats a run and the spread includes the
noise. ``--set privacy.noise_rng=seeded`` draws the noise from the seed too (a debugging sweep: a seed then
repeats its run), and the note says that such runs are not private.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulations.cli.epoch_log import EpochLog, quiet_library_bars, wants_epoch_lines
from simulations.cli.sweep_ray import check_parallel, run_grid_on_ray
from vfl.core.errors import ConfigError
from vfl.engine.lock import LOCK_FILE, RunLock
from vfl.engine.rundir import read_summary, safe_name

PLAN = "sweep.plan.json"  # the grid's digest, written when the sweep starts: a resume runs only that experiment
METRICS = ("final_test_acc", "final_train_loss", "epsilon", "total_bytes_up", "total_bytes_down", "wall_s")


def add_sweep_parser(sub: Any) -> None:
    s = sub.add_parser("sweep", help="run a grid of settings x seeds; one table of mean ± std per setting",
                       description="Run CONFIG for every combination of the --set values and every seed.")
    s.add_argument("config", help="YAML config file or bundled config name")
    s.add_argument("--set", dest="grid", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="values of a config key to sweep (repeatable: the grid is their product)")
    s.add_argument("--seeds", default="0", help="comma-separated seeds (default 0)")
    s.add_argument("--metrics", default=None, help="summary keys to tabulate (default: "
                   f"{','.join(METRICS)}, then the strategy's own results where the runs have them, e.g. a tree "
                   "ensemble's final_test_auc)")
    s.add_argument("--out", help="sweep directory (default runs/sweep-<name>-<time>/)")
    s.add_argument("--transport", choices=("ray", "inprocess"), help="override transport.kind")
    s.add_argument("--parallel", type=int, default=1, metavar="N",
                   help="run up to N grid points at once as Ray tasks, each in-process (default 1: one after another)")
    s.add_argument("--cpus-per-task", type=float, default=1.0, metavar="CPUS",
                   help="Ray num_cpus (and torch threads) of each parallel run (default 1)")
    s.add_argument("--gpus-per-task", type=float, default=0.0, metavar="GPUS",
                   help="Ray num_gpus of each parallel run (default 0; fractions share a GPU)")
    s.add_argument("--address", help="HOST:PORT of a Ray cluster for --parallel (default: a local Ray)")
    s.add_argument("--resume", action="store_true",
                   help="continue the sweep in --out: finished runs (summary.json) are kept, interrupted ones "
                        "resume from their last checkpoint, the others run")


def split_values(text: str) -> list[str]:
    """``1,2,[3,4]`` -> ``['1', '2', '[3,4]']`` (commas inside brackets/braces stay)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "[{" and 1 or (-1 if ch in "]}" else 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [v.strip() for v in out]


def parse_grid(items: Sequence[str]) -> list[tuple[str, list[str]]]:
    grid = []
    for item in items:
        key, sep, values = item.partition("=")
        if not sep or not key.strip() or not values.strip():
            raise ConfigError("--set", f"got {item!r}; expected KEY=V1,V2,... e.g. --set train.lr=0.01,0.1")
        grid.append((key.strip(), split_values(values)))
    return grid


def parse_seeds(text: str) -> list[int]:
    try:
        seeds = [int(s) for s in split_values(text)]
    except ValueError:
        raise ConfigError("--seeds", f"got {text!r}; expected comma-separated integers, e.g. 0,1,2") from None
    if not seeds or min(seeds) < 0:
        raise ConfigError("--seeds", f"got {text!r}; expected integers >= 0")
    return seeds


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation; the std is None for one value (undefined, not 0: one seed
    says nothing about the spread), both None for none."""
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def table_rows(results: list[dict[str, Any]], keys: Sequence[str], metrics: Sequence[str]) -> list[dict[str, Any]]:
    """One row per setting: the swept values, ``n`` and ``<metric>_mean`` / ``<metric>_std``."""
    rows: dict[tuple[str, ...], dict[str, Any]] = {}
    for r in results:
        point = tuple(r["setting"][k] for k in keys)
        rows.setdefault(point, {"setting": r["setting"], "summaries": []})["summaries"].append(r["summary"])
    out = []
    for entry in rows.values():
        row: dict[str, Any] = {**entry["setting"], "n": len(entry["summaries"])}
        for m in metrics:
            vals = [float(s[m]) for s in entry["summaries"] if isinstance(s.get(m), (int, float))]
            row[f"{m}_mean"], row[f"{m}_std"] = mean_std(vals)
        out.append(row)
    return out


def _fmt(row: dict[str, Any], keys: Sequence[str], metrics: Sequence[str]) -> list[str]:
    cells = [str(row[k]) for k in keys] + [str(row["n"])]
    for m in metrics:
        mean, std = row[f"{m}_mean"], row[f"{m}_std"]
        cells.append("-" if mean is None else f"{mean:.4g}" if std is None else f"{mean:.4g} ± {std:.2g}")
    return cells


def variance_note(seeds: Sequence[int], noise_rngs: set[str]) -> str:
    """What the table's ± is over, and whether a seed repeats its run (``privacy.noise_rng`` of the runs)."""
    if len(set(seeds)) < 2:
        head = f"one seed ({seeds[0]}) per setting: no spread (a std needs two)"
    else:
        head = (f"mean ± sample std over seeds {','.join(map(str, seeds))} per setting; a seed sets the train/test "
                "split, the initialization and the batch order")
    if noise_rngs == {"seeded"}:
        return (head + "; privacy.noise_rng: seeded: the privacy noise is drawn from the seed too, so a seed repeats "
                "its run (NOT private: the runs' epsilon is no guarantee)")
    if "seeded" in noise_rngs:
        return head + "; privacy.noise_rng differs between settings: seeded ones (NOT private) repeat their noise"
    return (head + "; the privacy noise (where the strategy adds any) is fresh in every run (privacy.noise_rng: "
            "crypto), so the spread includes it and no seed repeats a run (--set privacy.noise_rng=seeded repeats "
            "it, not private)")


def print_table(rows: list[dict[str, Any]], keys: Sequence[str], metrics: Sequence[str]) -> None:
    header = [*keys, "n", *metrics]
    body = [_fmt(r, keys, metrics) for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    for line in (header, *body):
        print("  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip())


def _setting(run: tuple[dict[str, str], int, list[str]]) -> str:
    point, seed, _ = run
    return " ".join([*(f"{key}={v}" for key, v in point.items()), f"seed={seed}"])


def _shown(summary: dict[str, Any], metrics: Sequence[str]) -> str:
    return " ".join(f"{m} {summary[m]:.4g}" for m in metrics if isinstance(summary.get(m), (int, float)))


def _started(run_dir: Path) -> bool:
    """A run directory a previous sweep began (its config is written first, summary.json last)."""
    return (run_dir / "config.resolved.yaml").is_file()


def _finished(runs: Sequence[tuple[dict[str, str], int, list[str]]], dirs: Sequence[Path],
              metrics: Sequence[str]) -> dict[int, dict[str, Any]]:
    """--resume: the summaries of the runs that finished before (kept, not run again)."""
    kept = {}
    for i, d in enumerate(dirs):
        if (d / "summary.json").is_file():
            kept[i] = read_summary(d / "summary.json")  # a damaged one is one line naming it
            print(f"run {i + 1}/{len(runs)}: {_setting(runs[i])} -> {d}: finished before, kept "
                  f"({_shown(kept[i], metrics)})", flush=True)
    return kept


def _resume_started(runs: Sequence[tuple[dict[str, str], int, list[str]]], which: Sequence[int],
                    dirs: Sequence[Path], metrics: Sequence[str]) -> dict[int, dict[str, Any]]:
    """--resume: continue the interrupted runs from their last checkpoint, one after another."""
    import vfl.engine.api

    lines = wants_epoch_lines(no_progress=False)
    if lines:
        quiet_library_bars()  # no weight-loading bar between the epoch lines
    out = {}
    for i in which:
        print(f"run {i + 1}/{len(runs)}: {_setting(runs[i])} -> {dirs[i]} (resumed)", flush=True)
        out[i] = vfl.engine.api.resume_run(dirs[i], progress=False,
                                    on_epoch_end=EpochLog(prefix="  ") if lines else None).summary
        print(f"run {i + 1}/{len(runs)} done: {_shown(out[i], metrics)}", flush=True)
    return out


def _run_one_by_one(args: argparse.Namespace, runs: Sequence[tuple[dict[str, str], int, list[str]]],
                    dirs: Sequence[Path], notes: Sequence[str], metrics: Sequence[str], *,
                    kept: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """The grid's runs in order, each announced as ``run k/N`` (and, off a terminal, its epochs);
    ``kept`` (--resume) are not run again, an interrupted one is resumed."""
    import vfl.engine.api

    lines = wants_epoch_lines(no_progress=False)
    if lines:
        quiet_library_bars()  # no weight-loading bar between the epoch lines
    summaries = []
    for k, ((point, seed, overrides), d, note) in enumerate(zip(runs, dirs, notes, strict=True), start=1):
        if k - 1 in kept:
            summaries.append(kept[k - 1])
            continue
        if _started(d):
            summaries.append(_resume_started(runs, [k - 1], dirs, metrics)[k - 1])
            continue
        print(f"run {k}/{len(runs)}: {_setting((point, seed, overrides))} -> {d}", flush=True)
        summary = vfl.engine.api.run(args.config, out_dir=d, overrides=overrides, transport=args.transport,
                              progress=False, note=note, on_epoch_end=EpochLog(prefix="  ") if lines else None).summary
        print(f"run {k}/{len(runs)} done: {_shown(summary, metrics)}", flush=True)
        summaries.append(summary)
    return summaries


def grid_digest(resolved: Sequence[Any]) -> str:
    """SHA-256 of every run's resolved settings, in grid order (where the runs execute left out: a resume may
    move them to another transport; what they compute may not change)."""
    import hashlib

    runs = [{k: v for k, v in r.to_dict().items() if k not in ("transport", "tracking")} for r in resolved]
    return hashlib.sha256(json.dumps(runs, sort_keys=True, default=str).encode()).hexdigest()


def check_plan(out: Path, digest: str, *, resume: bool) -> None:
    """A new sweep writes its digest; a resume refuses a sweep started with another config or grid (its finished
    runs would be tabled beside runs of a different experiment) in one line."""
    from vfl.core.private_fs import write_atomic

    plan = out / PLAN
    if resume and plan.is_file():
        try:
            stored = json.loads(plan.read_text()).get("digest")
        except (OSError, ValueError, AttributeError):
            stored = None
        if stored != digest:
            raise ConfigError("--resume", f"{out} was started with another config or grid (sweep digest "
                              f"{str(stored)[:12]}..., now {digest[:12]}...): resuming would table runs of two "
                              "experiments together; resume with the config, --set and --seeds it started with, "
                              "or start a new sweep with another --out")
        return
    if resume and any(p.is_dir() for p in out.iterdir()):
        raise ConfigError("--resume", f"{out} has runs but no {PLAN} (a sweep of an older vfl): it cannot be told "
                          "to be this config's grid; start a new sweep with another --out")
    write_atomic(plan, json.dumps({"digest": digest}).encode())


def cmd_sweep(args: argparse.Namespace) -> int:
    import vfl.engine.api

    grid, seeds = parse_grid(args.grid), parse_seeds(args.seeds)
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    keys = [k for k, _ in grid]
    points = [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in grid))]
    runs = [(p, s, [f"{k}={v}" for k, v in p.items()] + [f"seed={s}"]) for p in points for s in seeds]
    check_parallel(parallel=args.parallel, cpus_per_task=args.cpus_per_task, transport=args.transport,
                   gpus_per_task=args.gpus_per_task)
    transport = "inprocess" if args.parallel > 1 else args.transport  # a parallel run is in-process in its task
    base = vfl.engine.api.resolve(args.config, transport=transport)
    # every run of the grid is valid before the first starts
    resolved = [vfl.engine.api.resolve(args.config, overrides=overrides, transport=transport) for _, _, overrides in runs]
    if args.resume and not args.out:
        raise ConfigError("--resume", "needs --out DIR: the sweep directory to continue")
    out = Path(args.out) if args.out else Path("runs") / f"sweep-{safe_name(base.name)}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    with RunLock(out, key="--out"):  # one sweep per directory: a second one is refused naming the first's PID
        if not args.resume and any(p.name != LOCK_FILE for p in out.iterdir()):
            raise ConfigError("--out", f"{out} is not empty; a sweep goes into a new or empty directory "
                              "(continue an interrupted sweep there with --resume)")
        check_plan(out, grid_digest(resolved), resume=args.resume)
        args.run_dir = str(out)
        return _sweep_into(args, out, grid, seeds, metrics, keys, runs, resolved)


def strategy_metrics(cfg: Any) -> list[str]:
    """The strategy's own results beyond ``METRICS``: its headline and final-line summary keys."""
    from simulations.cli.epoch_log import final_keys, headline_keys

    return [k for k in dict.fromkeys((*final_keys(cfg), *headline_keys(cfg))) if k not in METRICS]


def _sweep_into(args: argparse.Namespace, out: Path, grid: Any, seeds: list[int], asked: list[str] | None,
                keys: list[str], runs: list[Any], resolved: list[Any]) -> int:
    """The sweep itself, in ``out`` (locked by the caller)."""
    metrics = asked or [*METRICS, *dict.fromkeys(k for c in resolved for k in strategy_metrics(c))]
    names = [safe_name("-".join(f"{k}={v}" for k, v in p.items()) or "base") + f"-seed{s}" for p, s, _ in runs]
    dirs = [out / f"{i:03d}-{name}" for i, name in enumerate(names)]
    notes = [f"created by: vfl sweep ({name})" for name in names]
    kept = _finished(runs, dirs, metrics) if args.resume else {}
    if args.parallel > 1:
        todo = [i for i in range(len(runs)) if i not in kept]
        kept.update(_resume_started(runs, [i for i in todo if _started(dirs[i])], dirs, metrics))
        todo = [i for i in todo if i not in kept]
        print(f"sweep: {len(todo)} runs as Ray tasks, up to {args.parallel} at once, into {out}", flush=True)
        finished = iter(range(len(runs) - len(todo) + 1, len(runs) + 1))

        def done(j: int, summary: dict[str, Any]) -> None:
            i = todo[j]
            print(f"run {next(finished)}/{len(runs)} done: {_setting(runs[i])} -> {dirs[i]}: "
                  f"{_shown(summary, metrics)}", flush=True)

        fresh = run_grid_on_ray([(resolved[i].to_dict(), dirs[i], notes[i]) for i in todo],
                                parallel=args.parallel, cpus_per_task=args.cpus_per_task,
                                gpus_per_task=args.gpus_per_task, address=args.address, on_done=done)
        kept.update(zip(todo, fresh, strict=True))
        summaries = [kept[i] for i in range(len(runs))]
    else:
        summaries = _run_one_by_one(args, runs, dirs, notes, metrics, kept=kept)
    # run_dir relative to the sweep directory (sweep.json sits in it): the directory can be moved whole
    results = [{"setting": point, "seed": seed, "run_dir": d.relative_to(out).as_posix(), "summary": summary}
               for (point, seed, _), d, summary in zip(runs, dirs, summaries, strict=True)]
    if asked is None:  # the strategy's keys the runs have (a classifier has no final_test_rmse)
        metrics = [m for m in metrics if m in METRICS or any(isinstance(r.get(m), (int, float)) for r in summaries)]
    rows = table_rows(results, keys, metrics)
    with open(out / "sweep.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    note = variance_note(seeds, {c.privacy.noise_rng for c in resolved})
    (out / "sweep.json").write_text(json.dumps({"grid": dict(grid), "seeds": seeds, "variance": note, "table": rows,
                                                "runs": [{k: r[k] for k in ("setting", "seed", "run_dir")}
                                                         for r in results]}, indent=2, default=str))
    print(f"±: {note}")
    print_table(rows, keys, metrics)
    print(f"sweep table: {out / 'sweep.csv'}")
    from simulations.report.plots import sweep_figure  # matplotlib: only once the table is there
    from simulations.report.style import run_identity

    varied = [*keys, "seed", *(["train.epochs"] if len({c.train.epochs for c in resolved}) > 1 else [])]
    title = run_identity(resolved[0], omit=varied).title  # the config; the swept keys are the figure's axis
    figure = sweep_figure(rows, keys, metrics, out / "sweep.png", identity=title, variance=note)  # PNG + PDF
    if figure is not None:
        print(f"sweep figure: {figure}")
    return 0
