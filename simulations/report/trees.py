"""The trees' attacks in ``vfl report``: a passive party's instance-space label inference and the label
holder's feature-order inference, on the views a run recorded (``privacy.record_views: true``).

Each reads only what its node kept (``parties/trees``: a party's instance spaces after every level it was
told of, ``pos``; the label holder's splits and instance spaces) plus its declared auxiliary knowledge (the
party: the labels of 1 % of the training rows, at least 10); the experimenter's ground truth scores it.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from parties.trees.attacks import (
    feature_order,
    feature_order_from_histograms,
    instance_space_labels,
)
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped
from vfl.runtime.views import NodeView

KNOWN_FRACTION, KNOWN_MIN = 0.01, 10


def _tree_views(run: RunArtifacts) -> tuple[dict[str, NodeView], NodeView]:
    if not run.has_views:
        raise Skipped("the run recorded no views (rerun with --set privacy.record_views=true)")
    views = run.views
    holder = next((v for v in views.values() if v.role == "server" and any(
        e["name"] == "split" for e in v.entries if e["kind"] == "derived")), None)
    if holder is None:
        raise Skipped("no tree splits in the views: not a trees run, or one without record_views")
    return {n: v for n, v in views.items() if v.role == "party"}, holder


def _labels(run: RunArtifacts) -> tuple[np.ndarray, int]:
    labels = run.parts[1]
    if labels.num_classes < 2:
        raise Skipped("a regression target: no label classes to infer")
    return np.asarray(labels.y_train, dtype=np.int64), int(labels.num_classes)


@RUN_ATTACKS.register("instance_space")
def instance_space(run: RunArtifacts) -> list[AttackResult]:
    """Each passive party clusters the rows by the instance spaces it was sent; the best party's accuracy."""
    parties, _ = _tree_views(run)
    y, k = _labels(run)
    rng = np.random.default_rng([run.cfg.seed, 2307])
    known = np.zeros(len(y), dtype=bool)
    known[rng.choice(len(y), size=min(len(y) - 1, max(KNOWN_MIN, int(KNOWN_FRACTION * len(y)))), replace=False)] = True
    per_party: dict[str, dict[str, float]] = {}
    for name, view in sorted(parties.items()):
        trees = [[a.astype(np.int64) for e, a in entries if e["name"] == "pos"]
                 for _, entries in sorted(_trees_of(view).items())]
        per_party[name] = instance_space_labels([t for t in trees if t], y, num_classes=k, known=known,
                                                seed=run.cfg.seed)
    if not per_party:
        raise Skipped("no passive party's view was recorded")
    best = max(per_party.values(), key=lambda r: r["value"])
    s = run.summary
    return [AttackResult(
        name="instance_space", metric="label accuracy", value=best["value"], baseline=best["majority"],
        threat="a passive party clustering the rows by the instance spaces it is sent (ID2Graph / ICA style; "
               "knows 1 % of the labels)",
        details={"per_party": per_party, "epsilon_label": s.get("epsilon_label"),
                 "hide_instance_space": bool(getattr(run.cfg.params, "hide_instance_space", False)),
                 "known_rows": int(known.sum())})]


@RUN_ATTACKS.register("feature_order")
def feature_order_attack(run: RunArtifacts) -> list[AttackResult]:
    """The label holder ranks each passive column's rows from the splits it chose and the partitions it got,
    and from the decrypted histograms alone; the better of the two per column, averaged over the columns."""
    parties, holder = _tree_views(run)
    shards = run.parts[0]
    block = {v.node_id: int(m.group(1)) for v in parties.values() if (m := re.fullmatch(r"party(\d+)", v.name))}
    n = len(shards[0].x_train)
    splits: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray, int, int]]] = {}
    hists: dict[tuple[int, int], list[tuple[np.ndarray, np.ndarray]]] = {}
    layouts: dict[int, Any] = {}
    for _, entries in sorted(_trees_of(holder).items()):
        pos = np.zeros(n, dtype=np.int64)
        level: list[np.ndarray] = []
        for e, a in entries:
            if e["name"].startswith("hist:"):
                _, owner, node = e["name"].split(":")
                owner_i, node_i = int(owner), int(node)
                if owner_i in block:
                    lay = layouts.setdefault(owner_i, _layout(shards[block[owner_i]], run))
                    rows = np.flatnonzero(pos == node_i)
                    for f in range(lay.num_features):
                        hists.setdefault((owner_i, f), []).append((rows, a[lay.ptrs[f]:lay.ptrs[f + 1]]))
            elif e["name"] == "split":
                level.append(a)
            elif e["name"] == "pos":
                new = a.astype(np.int64)
                for node, owner, feat, b, dl, left, _right in (x.tolist() for x in level):
                    if owner in block:
                        rows = np.flatnonzero(pos == node)
                        splits.setdefault((owner, feat), []).append((rows, new[rows] == left, b, dl))
                pos, level = new, []
    if not splits and not hists:
        raise Skipped("no split on, nor histogram of, a passive party's column was recorded")
    rhos: list[float] = []
    by: dict[str, list[float]] = {"splits": [], "histograms": []}
    for owner, feat in sorted(set(splits) | set(hists)):
        column = _column(shards[block[owner]], feat)
        bins = int(layouts.get(owner, _layout(shards[block[owner]], run)).bins[feat])
        rho_s = feature_order(splits[(owner, feat)], column, bins) if (owner, feat) in splits else None
        rho_h = (feature_order_from_histograms(hists[(owner, feat)], column, bins) if (owner, feat) in hists
                 else None)
        by["splits"] += [rho_s] if rho_s is not None else []
        by["histograms"] += [rho_h] if rho_h is not None else []
        best = max((v for v in (rho_s, rho_h) if v is not None), default=None)
        if best is not None:
            rhos.append(best)
    if not rhos:
        raise Skipped("the splits and histograms bound too few rows to rank a column")
    return [AttackResult(
        name="feature_order", metric="Spearman rho", value=float(np.mean(rhos)), baseline=0.0,
        threat="the label holder ranking a passive party's column from its splits and partitions, and from the "
               "decrypted histograms",
        details={"columns": len(rhos), "best_rho": float(max(rhos)),
                 "mean_rho_splits": float(np.mean(by["splits"])) if by["splits"] else None,
                 "mean_rho_histograms": float(np.mean(by["histograms"])) if by["histograms"] else None})]


def _trees_of(view: NodeView) -> dict[tuple[int, int], list[tuple[dict[str, Any], np.ndarray]]]:
    """Every derived entry of a view per tree (epoch, output), in order."""
    out: dict[tuple[int, int], list[tuple[dict[str, Any], np.ndarray]]] = {}
    for e, a in view.select(kind="derived", phase="train"):
        out.setdefault((int(e["epoch"]), int(e["step"])), []).append((e, a))
    return out


def _column(shard: Any, feat: int) -> np.ndarray:
    x = np.asarray(shard.x_train, dtype=np.float32)
    return x.reshape(len(x), -1)[:, feat]


def _layout(shard: Any, run: RunArtifacts) -> Any:
    """The party's layout as its node computes it (the experimenter rebuilds it from the party's columns)."""
    from parties.trees.columns import Columns

    x = np.asarray(shard.x_train, dtype=np.float32)
    x = x.reshape(len(x), int(np.prod(x.shape[1:])))
    return Columns(x, x[:0], max_bin=int(getattr(run.cfg.params, "max_bin", 256))).layout
