"""Secure aggregation against an actively lying server, per ``params.secagg_mode``: what each attack
opens, whether an honest party detects it, and what the malicious mode costs per step.

    python -m simulations.benchmarks.secagg_attacks --out bench-out [--epochs 6 --repeats 3]

Attacks (``vfl.attacks.secagg.lying``, real clients with real X25519/AES-GCM/Ed25519 keys, M and t of the
demo): ``key_swap`` (the roster carries the server's own keys), ``single_survivor`` (each party told
it alone survived), ``redeclared_dropout`` (a survivor that revealed its self key is then declared
dropped to the others), ``late_survivor`` (v told all survived, the others told v dropped),
``split_rebuild`` (t holders told v survived and then vanished: seed shares; the rest told v dropped).
``inputs_opened`` counts the parties whose exact input any of the server's candidates recovers;
semi-honest is also played with ``auth: false`` (no identity keys: nothing binds a SecAgg key), and
as the control ``release: key``: the protocol before view-bound self-mask releases, whose
survivors revealed raw round self keys. Mode ``announced`` (the server names each round's set before
masking; no unmask exchange) runs every attack too (its parties reveal nothing after masking), and its own
(``vfl.attacks.secagg.announced.ATTACKS``): ``small_set`` (v told the set {v}) and ``two_sets`` (one round asked
with {v, a}, {v, b} and {a, b}), each also against the control (``release: control``: a client without the
size rule / the once-per-round rule). ``colluder_split`` (every mode): v and ``colluders`` parties (1 and t - 1)
that hand the server every key they hold are told they alone survived (or, in a second play, t - |C| honest
holders rebuild v's seed while the rest reveal their pair keys with v); ``declared`` is the clients'
``privacy.colluders`` (null: undeclared, t - 1; the other attacks run undeclared, those of mode announced with
0), ``within_tolerance`` whether the colluders are at most the declared c and fewer than t: every such row opens
nothing but the controls (``release: control``: clients whose quorum ignores the colluders, max(t, 2)).
``default: true`` marks the rows of the config's mode.

Cost: the demo config (``vfl run demo``: PBM, M=4, Ray) trained ``--epochs`` epochs per mode,
modes alternated ``--repeats`` times; ``step_ms`` = median (``step_ms_min``: minimum) over every
epoch after each run's first (warm-up) of its training seconds / its steps; ``bytes_per_round`` =
training bytes (up + down, signatures included) per step. Writes ``DIR/secagg_attacks.json``:
``results`` [{attack, mode, auth, release, default, colluders, declared, within_tolerance, inputs_opened,
detected}], ``cost`` {mode: {step_ms,
step_ms_min, bytes_per_round, epochs_ms}}, ``malicious_overhead`` (step_ms ratio - 1; ``_min``:
of the minima) and the config, and prints a table.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import strategies  # noqa: F401  (registers the strategies)
from simulations.cli.runner import resolve_config
from simulations.data.source import ConfigDataSource
from strategies.base.secure import shamir_threshold
from vfl.attacks.secagg import announced, colluders, lying
from vfl.engine.engine import Engine
from vfl.runtime.transport.factory import make_transport
from vfl.secagg import MODES
from vfl.secagg.consistency import tolerated

# (mode, auth, release): release "key" is the control (raw self keys, before view-bound releases)
SETTINGS = (("semi-honest", False, "view"), ("semi-honest", True, "view"), ("malicious", True, "view"),
            ("semi-honest", True, "key"), ("announced", False, "view"), ("announced", True, "view"))


def attack_rows(*, parties: int, threshold: int, default_mode: str = "semi-honest") -> list[dict[str, Any]]:
    """Every attack in every setting (semi-honest also with auth off, and the old raw-key release as the
    control), inputs opened and whether a party raised a typed refusal."""
    rows = []
    for attack in lying.ATTACKS:
        for mode, auth, release in SETTINGS:
            opened, detected = lying.RUN[attack](num=parties, threshold=threshold, mode=mode, signed=auth,
                                                 release=release)
            rows.append({"attack": attack, "mode": mode, "auth": auth, "release": release,
                         "default": (mode, auth, release) == (default_mode, True, "view"), **_NO_COLLUDERS,
                         "inputs_opened": int(opened), "detected": bool(detected)})
    for attack in announced.ATTACKS:  # lies in the announced set; control: the client without the rule
        for weak in (False, True):
            opened, detected = announced.RUN[attack](num=parties, threshold=threshold, weak=weak)
            rows.append({"attack": attack, "mode": "announced", "auth": True, "release": "control" if weak else "view",
                         "default": not weak and default_mode == "announced", **_NO_COLLUDERS, "declared": 0,
                         "inputs_opened": int(opened), "detected": bool(detected)})
    return rows + colluder_rows(parties=parties, threshold=threshold, default_mode=default_mode)


_NO_COLLUDERS = {"colluders": 0, "declared": None, "within_tolerance": True}


def colluder_rows(*, parties: int, threshold: int, default_mode: str = "semi-honest") -> list[dict[str, Any]]:
    """``colluder_split`` in every mode with 1 and t - 1 colluders, declared (privacy.colluders = their number) and
    undeclared (t - 1); beyond the tolerance, the same colluders with privacy.colluders: 0 (declared fewer); and
    the control (release ``control``: the quorum ignores the colluders)."""
    rows = []
    for mode in MODES:
        for count in sorted({1, threshold - 1} - {0}):
            for declared, weak in ((count, False), (None, False), (0, False), (None, True)):
                opened, detected = colluders.colluder_split(num=parties, threshold=threshold, mode=mode, colluders=count,
                                                            declared=declared, weak=weak)
                within = count <= min(tolerated(threshold, declared), threshold - 1)
                rows.append({"attack": "colluder_split", "mode": mode, "auth": True,
                             "release": "control" if weak else "view",
                             "default": mode == default_mode and declared is None and not weak,
                             "colluders": count, "declared": declared, "within_tolerance": within,
                             "inputs_opened": int(opened), "detected": bool(detected)})
    return rows


def run_cost(config: str, mode: str, *, epochs: int, overrides: list[str]) -> tuple[list[float], float]:
    """(ms per training step of each epoch after the warm-up one, training bytes per step) of one run."""
    cfg = resolve_config(config, [f"train.epochs={epochs}", f"params.secagg_mode={mode}", "name=secagg-attacks",
                                  *overrides])
    transport = make_transport(cfg.transport.kind)
    try:
        engine = Engine(cfg, transport, ConfigDataSource.from_config(cfg), progress=False)
        result = engine.run()
    finally:
        transport.shutdown()
    rows = result.history[1:] or result.history
    steps = int(engine.strategy.steps_per_epoch())  # type: ignore[attr-defined]
    train_bytes = sum(r["bytes_up"] + r["bytes_down"] for r in rows)
    return [1e3 * r["train_s"] / steps for r in rows], train_bytes / (steps * len(rows))


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="bench-out")
    ap.add_argument("--config", default="demo", help="config whose step time is measured (default: demo)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], help="config override (repeatable)")
    ap.add_argument("--epochs", type=int, default=6, help="epochs per cost run (the first is a warm-up)")
    ap.add_argument("--repeats", type=int, default=3, help="cost runs per mode, modes alternated")
    ap.add_argument("--no-cost", action="store_true", help="attacks only")
    args = ap.parse_args(argv)
    cfg = resolve_config(args.config, list(args.overrides))
    threshold = shamir_threshold(cfg.num_parties, int(getattr(cfg.params, "threshold", 0)))
    mode = str(getattr(cfg.params, "secagg_mode", "semi-honest"))
    out: dict[str, Any] = {"config": args.config, "parties": cfg.num_parties, "threshold": threshold,
                           "default_mode": mode,
                           "results": attack_rows(parties=cfg.num_parties, threshold=threshold, default_mode=mode)}
    if not args.no_cost:
        runs: dict[str, list[tuple[list[float], float]]] = {m: [] for m in MODES}
        for i in range(args.repeats):
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):  # alternate which mode runs first
                runs[mode].append(run_cost(args.config, mode, epochs=args.epochs, overrides=args.overrides))
        out["cost"] = {m: {"step_ms": statistics.median(ms for e, _ in r for ms in e),
                           "step_ms_min": min(ms for e, _ in r for ms in e), "bytes_per_round": r[0][1],
                           "epochs_ms": [[round(ms, 3) for ms in e] for e, _ in r]} for m, r in runs.items()}
        sh, ml = out["cost"]["semi-honest"], out["cost"]["malicious"]
        out["malicious_overhead"] = ml["step_ms"] / sh["step_ms"] - 1
        out["malicious_overhead_min"] = ml["step_ms_min"] / sh["step_ms_min"] - 1
        an = out["cost"]["announced"]
        out["announced_overhead"] = an["step_ms"] / sh["step_ms"] - 1
        out["announced_overhead_min"] = an["step_ms_min"] / sh["step_ms_min"] - 1
        out["epochs"], out["repeats"], out["transport"] = args.epochs, args.repeats, cfg.transport.kind
    path = Path(args.out)
    path.mkdir(parents=True, exist_ok=True)
    (path / "secagg_attacks.json").write_text(json.dumps(out, indent=2))
    print(table(out))
    return out


def table(out: dict[str, Any]) -> str:
    """The attack x mode table, then the cost per mode."""
    lines = [f"M={out['parties']} t={out['threshold']} (default: {out['default_mode']}, auth on)",
             f"{'attack':<20}{'mode':<13}{'auth':<6}{'release':<9}{'coll.':>6}{'decl.':>6}{'opened':>7}  detected"]
    lines += [f"{r['attack']:<20}{r['mode']:<13}{r['auth']!s:<6}{r['release']:<9}{r['colluders']:>6}"
              f"{'t-1' if r['declared'] is None else r['declared']!s:>6}{r['inputs_opened']:>7}  "
              f"{r['detected']}{'  (default)' if r['default'] else ''}"
              f"{'' if r['within_tolerance'] else '  (beyond tolerance)'}" for r in out["results"]]
    for mode, c in out.get("cost", {}).items():
        lines.append(f"{mode:<13} step {c['step_ms']:.2f} ms (median; min {c['step_ms_min']:.2f})  "
                     f"{c['bytes_per_round']:.0f} B/round")
    if "malicious_overhead" in out:
        lines.append(f"malicious step-time overhead: {100 * out['malicious_overhead']:+.1f} % (median), "
                     f"{100 * out['malicious_overhead_min']:+.1f} % (min)")
    if "announced_overhead" in out:
        lines.append(f"announced step-time overhead: {100 * out['announced_overhead']:+.1f} % (median), "
                     f"{100 * out['announced_overhead_min']:+.1f} % (min)")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
