"""Per-party files of a partitioned dataset with a partial, shuffled ID overlap (the library half of
``python -m simulations.data.split_parties`` and of ``data.split_parties``).

Writes ``party0.csv`` .. ``party{M-1}.csv`` (``customer_id`` + that party's feature columns of the
configured vertical partition), ``labels.csv`` (``customer_id``, ``label``, ``split`` = the
dataset's own train/test split; a regression target is written as a number and the config says
``task: regression``), ``manifest.json`` and a ready ``config.yaml``. A missing feature value (NaN)
is written as an empty cell. Every sample gets
a random customer number; a share ``overlap`` of the samples is held by every file, each other
sample by a random subset of the files (never all), and every file's rows are shuffled — so the
parties' rows only line up after private set intersection.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from vfl.config.party_files import LabelFile, PartyFile, Task
from vfl.core.errors import ConfigError
from vfl.core.rng import seeded_numpy
from vfl.engine.schema import RunConfig

ID, LABEL, SPLIT = "customer_id", "label", "split"
FORMAT_VERSION = 1
ENV_CACHE = "VFL_CACHE_DIR"


def _memberships(n: int, holders: int, overlap: float, rng: np.random.Generator) -> np.ndarray:
    """(n, holders) bool: ``round(overlap n)`` samples held by all, the rest by a random proper subset."""
    hold = rng.random((n, holders)) < 0.5
    core = rng.permutation(n)[: int(round(overlap * n))]
    hold[core] = True
    rest = np.setdiff1d(np.arange(n), core)
    full = rest[hold[rest].all(axis=1)]  # outside the core nobody-but-all: drop one holder at random
    hold[full, rng.integers(0, holders, size=len(full))] = False
    return hold


def export(shards: list[Any], labels: Any, out_dir: Path, *, overlap: float, seed: int,
           name: str = "dataset") -> dict[str, Any]:
    """Write the per-party files of one partitioned dataset into ``out_dir``; return the manifest."""
    import pandas as pd

    if not 0 < overlap <= 1:
        raise ConfigError("--overlap", f"got {overlap}; allowed: a value in (0, 1]")
    y = np.concatenate([labels.y_train, labels.y_test])
    n, n_train, m = len(y), len(labels.y_train), len(shards)
    rng = seeded_numpy("split_parties", name, seed)
    digits = max(6, len(str(10 * n)))
    ids = np.asarray([f"cust-{v:0{digits}d}" for v in rng.choice(10**digits, size=n, replace=False)], dtype=object)
    hold = _memberships(n, m + 1, overlap, rng)
    out_dir.mkdir(parents=True, exist_ok=True)
    lab_rows = rng.permutation(np.flatnonzero(hold[:, 0]))
    pd.DataFrame({ID: ids[lab_rows], LABEL: y[lab_rows],
                  SPLIT: np.where(lab_rows < n_train, "train", "test")}).to_csv(out_dir / "labels.csv", index=False)
    parties, offset = [], 0
    for i, s in enumerate(shards):
        x = np.concatenate([s.x_train.reshape(len(s.x_train), -1), s.x_test.reshape(len(s.x_test), -1)])
        cols = [f"f{offset + k}" for k in range(x.shape[1])]
        offset += x.shape[1]
        rows = rng.permutation(np.flatnonzero(hold[:, i + 1]))
        frame = pd.DataFrame(x[rows], columns=cols)
        frame.insert(0, ID, ids[rows])
        frame.to_csv(out_dir / f"party{i}.csv", index=False, float_format="%.9g")  # float32 round-trips
        parties.append({"file": f"party{i}.csv", "rows": len(rows), "columns": cols[0] + ".." + cols[-1],
                        "num_columns": len(cols)})
    task = "regression" if labels.is_regression else "classification"
    manifest = {
        "format_version": FORMAT_VERSION, "dataset": name, "num_parties": m, "overlap": overlap, "seed": seed,
        "num_samples": n, "intersection_size": int(hold.all(axis=1).sum()), "id_column": ID,
        "label_holder": {"file": "labels.csv", "rows": len(lab_rows), "label": LABEL, "split": SPLIT, "task": task},
        "parties": parties,
        "note": "customer_id is a random customer number; rows are shuffled per file; only the IDs in every "
                "file are trained on (they are found by private set intersection, not by this manifest)",
    }
    (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def data_section(out_dir: Path, num_parties: int, task: str = "classification") -> dict[str, Any]:
    """The ``data`` config section that reads the files ``export`` wrote."""
    labels = {"path": "labels.csv", "id": ID, "label": LABEL, "split": SPLIT}
    return {"data_dir": str(out_dir.absolute()),
            "parties": [{"path": f"party{i}.csv", "id": ID} for i in range(num_parties)],
            "labels": labels if task == "classification" else {**labels, "task": task}}


def _task(manifest: dict[str, Any]) -> Task:
    return "regression" if manifest["label_holder"].get("task") == "regression" else "classification"


Partition = Callable[[], tuple[list[Any], Any]]  # () -> (party shards, labels): the run's ConfigDataSource.partition


def write(cfg: RunConfig, out_dir: Path, *, overlap: float, partition: Partition,
          final_dir: Path | None = None) -> dict[str, Any]:
    """Export ``cfg.dataset`` as ``partition`` splits it (partition, seed, subsample) and a ready config
    next to the files (pointing at ``final_dir`` when the files are moved there afterwards)."""
    shards, labels = partition()
    manifest = export(shards, labels, out_dir, overlap=overlap, seed=cfg.seed, name=cfg.dataset)
    ready = {k: v for k, v in cfg.to_dict().items() if k not in ("data",)}
    ready.update(name=f"{cfg.name}-parties", data=data_section(final_dir or out_dir, cfg.num_parties, _task(manifest)))
    (out_dir / "config.yaml").write_text(yaml.safe_dump(ready, sort_keys=False))
    return manifest


def cached(cfg: RunConfig, *, partition: Partition) -> tuple[tuple[PartyFile, ...], LabelFile, str]:
    """``data.split_parties``: the files for ``cfg`` in the cache (written once, atomically)."""
    sp = cfg.data.split_parties
    if sp is None:
        raise ConfigError("data.split_parties", "not set")
    d = cfg.data
    key = json.dumps([FORMAT_VERSION, cfg.dataset, cfg.num_parties, cfg.seed, sp.overlap, d.partition,
                      d.partition_opts, d.load_opts, d.train_subsample, d.test_subsample, d.data_dir], sort_keys=True,
                     default=str)
    root = Path(sp.dir or os.environ.get(ENV_CACHE) or Path.home() / ".cache" / "vfl").expanduser() / "split_parties"
    target = root / f"{cfg.dataset}-m{cfg.num_parties}-o{sp.overlap:g}-s{cfg.seed}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    if not (target / "manifest.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=root))
        try:
            write(cfg, tmp, overlap=sp.overlap, partition=partition, final_dir=target)
            try:
                os.rename(tmp, target)  # atomic: a concurrent run either wins or reuses ours
            except OSError:
                if not (target / "manifest.json").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    sec = data_section(target, cfg.num_parties)
    parties = tuple(PartyFile(path=str(target / p["path"]), id=p["id"]) for p in sec["parties"])
    task = _task(json.loads((target / "manifest.json").read_text()))
    labels = LabelFile(path=str(target / "labels.csv"), id=ID, label=LABEL, split=SPLIT, task=task)
    return parties, labels, str(target)
