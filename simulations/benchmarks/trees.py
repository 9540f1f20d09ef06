"""Cost of secureboost per tree against the anchors' published numbers and against ``xgboost`` itself.

    python -m simulations.benchmarks.trees --out DIR                 # bank and a9a shapes, both he modes, in-process and Ray
    python -m simulations.benchmarks.trees --out DIR --shapes bank --he paillier --transports inprocess --trees 2
    python -m simulations.benchmarks.trees --out DIR --shapes bc,bank --he paillier,hidden --transports inprocess

``--he hidden`` is Paillier with ``params.hide_instance_space: true`` (rows say ``he: paillier`` and
``hide_instance_space: true``; the formula column covers the plain exchange only).

Shapes (``simulations/benchmarks/trees_data.py``; the real files when ``--data-dir`` holds them):
``bank`` (45,211 × 16: the label holder 8 columns + one passive party 8, depth 5, 10 bins; SecretFlow SGB
publishes ≈ 3 s a tree on 8 cores), ``a9a`` (32,561 × 123 sparse binary: 61 + 62, depth 6, 255 bins; FATE
publishes 34 s a tree on 16 threads), ``bc`` (the bundled breast cancer, 30 columns: 10 + 10 + 10, depth 4).
Each row of ``DIR/trees.json``: ``shape``, ``he``, ``transport``, ``s_per_tree`` (median over the trees after
the first), ``test_auc``, ``xgboost_test_auc`` and ``xgboost_s_per_tree`` (``xgboost.train``, hist, same
hyper-parameters, one thread), the phases of a tree summed over every process (``vfl.runtime.profile``:
gradients, encrypt, party histograms (grouped sums + packing), decrypt, own histograms, split finding;
``messaging_s`` = wall − the phases, in-process only), ``bytes_per_tree`` and ``payload_bytes_per_tree``
measured (the ledger's bytes, and their array data alone) beside ``formula_bytes_per_tree``, the payload's
leading terms (gradients N·C + each party's histograms of a full tree, ⌈builds·slots/k⌉·C per level, + one
instance-space mask per split level; C = ciphertext bytes, k = slot sums per ciphertext; empty slots, which
are not sent, counted; a broadcast counted once, as the ledger counts it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

SHAPES: dict[str, dict[str, Any]] = {
    "bank": {"dataset": "simulations.benchmarks.trees_data:bank_like", "real": "bank-marketing", "num_parties": 2,
             "max_depth": 5, "max_bin": 10, "published": "SecretFlow SGB: ~3 s/tree on 8 cores (~24 core-s)"},
    "a9a": {"dataset": "simulations.benchmarks.trees_data:a9a_like", "real": "a9a", "num_parties": 2,
            "max_depth": 6, "max_bin": 255, "published": "FATE SecureBoost: 34 s/tree on 16 threads"},
    "bc": {"dataset": "breast-cancer", "real": None, "num_parties": 3, "max_depth": 4, "max_bin": 32,
           "published": ""},
}
PHASES = ("trees_gradients", "trees_encrypt", "trees_party_histograms", "trees_decrypt", "trees_own_histograms",
          "trees_splits")


def _config(shape: str, *, he: str, transport: str, trees: int, key_bits: int, data_dir: str | None) -> Any:
    from simulations.cli.runner import resolve_config

    s = SHAPES[shape]
    hide = he == "hidden"
    he = "paillier" if hide else he
    real = bool(data_dir and s["real"])
    over = [f"dataset={s['real'] if real else s['dataset']}", f"num_parties={s['num_parties']}",
            f"params.n_estimators={trees}", f"params.max_depth={s['max_depth']}", f"params.max_bin={s['max_bin']}",
            "params.label_holder_features=true", f"params.he={he}", f"params.key_bits={key_bits}",
            "params.allow_insecure=true", f"transport.kind={transport}", "name=bench-trees",
            f"params.hide_instance_space={str(hide).lower()}"]
    if real:
        over.append(f"data.data_dir={data_dir}")
    return resolve_config("secureboost-bc", over)


def _xgboost(cfg: Any, data: Any) -> dict[str, Any]:
    try:
        import xgboost as xgb
    except ImportError:
        return {"xgboost_s_per_tree": None, "xgboost_test_auc": None, "xgboost": "not installed"}
    from parties.trees.objectives import roc_auc

    ds = data.dataset()
    p = cfg.params
    params = {"objective": p.objective, "tree_method": "hist", "max_depth": p.max_depth, "eta": p.learning_rate,
              "max_bin": p.max_bin, "reg_lambda": p.reg_lambda, "min_child_weight": p.min_child_weight,
              "nthread": 1}  # one thread, as the plaintext path computes (OpenMP beside other processes spins)
    dtrain = xgb.QuantileDMatrix(ds.x_train, label=ds.y_train, missing=np.nan, max_bin=p.max_bin)  # cuts: not timed
    xgb.train(params, dtrain, 2)  # warm-up (thread pool, caches)
    rounds = max(p.n_estimators, 20)  # enough trees for a stable time per tree
    t0 = time.perf_counter()
    xgb.train(params, dtrain, rounds)
    per_tree = (time.perf_counter() - t0) / rounds
    booster = xgb.train(params, dtrain, p.n_estimators)
    auc = roc_auc(booster.predict(xgb.DMatrix(ds.x_test, missing=np.nan)), ds.y_test)
    return {"xgboost_s_per_tree": per_tree, "xgboost_test_auc": auc, "xgboost": xgb.__version__}


def _formula(cfg: Any, n_train: int, slots: list[int]) -> int:
    """Bytes of one full tree's exchange, an upper bound (empty slots are not sent): the gradients N·C, each
    party's histograms of a full tree (⌈builds·slots/k⌉·C per level), one instance-space mask per level."""
    from parties.trees.codec import make_codec
    from vfl.he import slots_per_plaintext

    p = cfg.params
    if p.he == "paillier":
        c = 2 * ((p.key_bits + 7) // 8)
        codec, _, _ = make_codec(np.ones(n_train, np.float32), np.full(n_train, 0.25, np.float32))  # logistic's ranges
        k = slots_per_plaintext(codec.slot_bits, p.key_bits - 2)
    else:
        c, k = 16, 1  # two int64 per row and per slot
    per_level = [1] + [2 ** (d - 1) for d in range(1, p.max_depth)]  # histograms built per level (smaller children)
    hist = sum(math.ceil(b * s / k) * c for s in slots for b in per_level)
    masks = (p.max_depth - 1) * math.ceil(n_train / 8)
    return n_train * c + hist + masks


def party_slots(shards: Any, max_bin: int) -> list[int]:
    """Histogram slots each passive party sends per node (its layout: bins but the implicit one, missing)."""
    from parties.trees.columns import Columns

    out = []
    for shard in shards:
        x = np.asarray(shard.x_train, dtype=np.float32).reshape(len(shard.x_train), -1)
        out.append(Columns(x, x[:0], max_bin=max_bin).layout.num_slots())
    return out


def run_one(shape: str, *, he: str, transport: str, trees: int, key_bits: int, data_dir: str | None) -> dict[str, Any]:
    from simulations.cli.runner import execute
    from simulations.data.source import make_data_source
    from vfl.runtime import profile

    cfg = _config(shape, he=he, transport=transport, trees=trees, key_bits=key_bits, data_dir=data_dir)
    data = make_data_source(cfg)
    counters: dict[str, float] = {}

    def on_epoch(epoch: int, record: dict[str, Any], engine: Any) -> None:
        parts = [engine.transport.host_call(g.name, "profile_counters", True) for g in engine.groups]
        if transport != "inprocess":
            parts.append(profile.counters())
        profile.reset()
        if epoch == 0:
            return  # the first tree pays the key set-up and the randomizers' start
        for part in parts:
            for k, v in part.items():
                counters[k] = counters.get(k, 0.0) + float(v["s"])

    os.environ["VFL_PROFILE"] = "1"
    profile.enable(True)
    profile.reset()
    try:
        result = execute(cfg, out_dir=None, progress=False, on_epoch_end=on_epoch)
    finally:
        profile.enable(False)
        os.environ.pop("VFL_PROFILE", None)
    s = result.summary
    hist = result.history
    per_tree = [float(r["s_per_tree"]) for r in hist[1:]] or [float(hist[0]["s_per_tree"])]
    rounds = max(1, len(hist) - 1)
    phases = {k: counters.get(k, 0.0) / rounds for k in PHASES}
    later = hist[1:] or hist
    bytes_per_tree = statistics.median([r["bytes_up"] + r["bytes_down"] for r in later])
    payload_per_tree = statistics.median([r["payload_up"] + r["payload_down"] for r in later])
    ds = data.dataset()
    shards, _ = data.partition()
    slots = party_slots(shards[1:], cfg.params.max_bin)
    hide = bool(cfg.params.hide_instance_space)
    row: dict[str, Any] = {
        "shape": shape, "he": cfg.params.he, "hide_instance_space": hide, "transport": transport, "trees": trees, "n_train": ds.num_train,
        "features": int(ds.x_train.shape[1]), "depth": cfg.params.max_depth, "max_bin": cfg.params.max_bin,
        "key_bits": key_bits if cfg.params.he == "paillier" else None, "s_per_tree": statistics.median(per_tree),
        "test_auc": s.get("final_test_auc"), "phases_s_per_tree": phases,
        "messaging_s": (statistics.median(per_tree) - sum(phases.values())) if transport == "inprocess" else None,
        "bytes_per_tree": bytes_per_tree, "payload_bytes_per_tree": payload_per_tree,
        "formula_bytes_per_tree": None if hide else _formula(cfg, ds.num_train, slots),
        "published": SHAPES[shape]["published"], "real_data": bool(data_dir and SHAPES[shape]["real"]),
    }
    row.update(_xgboost(cfg, data))
    return row


def _cell(value: float | None, width: int, digits: int) -> str:
    """A table cell: the number, or a dash where the row has none (the hidden mode has no formula)."""
    return f"{'—':>{width}}" if value is None else f"{value:{width}.{digits}f}"


def _mb(n_bytes: int | None) -> float | None:
    return None if n_bytes is None else n_bytes / 1e6


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulations.benchmarks.trees", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, help="output directory (trees.json)")
    p.add_argument("--shapes", default="bank,a9a", help=f"comma list of {', '.join(SHAPES)}")
    p.add_argument("--he", default="none,paillier", help="comma list of none, paillier, hidden (paillier with "
                   "params.hide_instance_space)")
    p.add_argument("--transports", default="inprocess,ray", help="comma list of inprocess, ray")
    p.add_argument("--trees", type=int, default=3, help="trees per run (the first is not timed)")
    p.add_argument("--key-bits", type=int, default=2048)
    p.add_argument("--data-dir", default=None, help="read the real files (bank-full.csv, a9a/a9a.t) from here")
    args = p.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    print(f"{'shape':6} {'he':9} {'transport':10} {'s/tree':>8} {'xgb s/tree':>10} {'auc':>7} {'xgb auc':>7} "
          f"{'MB/tree':>8} {'formula':>8}")
    for shape in args.shapes.split(","):
        for he in args.he.split(","):
            for transport in args.transports.split(","):
                row = run_one(shape, he=he, transport=transport, trees=args.trees, key_bits=args.key_bits,
                              data_dir=args.data_dir)
                rows.append(row)
                print(f"{shape:6} {he:9} {transport:10} {row['s_per_tree']:8.3f} "
                      f"{_cell(row['xgboost_s_per_tree'], 10, 4)} {_cell(row['test_auc'], 7, 4)} "
                      f"{_cell(row['xgboost_test_auc'], 7, 4)} {row['bytes_per_tree'] / 1e6:8.3f} "
                      f"{_cell(_mb(row['formula_bytes_per_tree']), 8, 3)}", flush=True)
                (out / "trees.json").write_text(json.dumps({"rows": rows, "machine": {
                    "cpus": os.cpu_count(), "platform": platform.platform()}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
