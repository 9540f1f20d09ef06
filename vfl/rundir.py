"""A run's directory: resolved config, metrics.jsonl, summary.json, checkpoints (resumable).

Checkpoints are written to a temporary folder and renamed into place, so a run killed while
checkpointing still has its previous checkpoint intact.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from vfl.errors import ConfigError

CONFIG = "config.resolved.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CKPT = "checkpoints"


def _clean(obj: Any) -> Any:
    """JSON-safe values (NaN/inf become null so every line parses with strict JSON readers)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


class RunDir:
    def __init__(self, path: str | Path, *, keep_checkpoints: int = 2) -> None:
        self.path = Path(path)
        self.keep = keep_checkpoints

    # ---- config ----------------------------------------------------------------------------
    def write_config(self, cfg: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "plots").mkdir(exist_ok=True)
        with open(self.path / CONFIG, "w") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)

    def read_config(self) -> dict[str, Any]:
        p = self.path / CONFIG
        if not p.exists():
            raise ConfigError("--resume", f"{self.path} has no {CONFIG}; is it a run directory?")
        with open(p) as f:
            return yaml.safe_load(f)  # type: ignore[no-any-return]

    # ---- metrics ---------------------------------------------------------------------------
    def append_metrics(self, record: dict[str, Any]) -> None:
        with open(self.path / METRICS, "a") as f:
            f.write(json.dumps(_clean(record)) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        p = self.path / METRICS
        if not p.exists():
            return []
        with open(p) as f:
            return [json.loads(line) for line in f if line.strip()]

    def truncate_metrics(self, last_epoch: int) -> list[dict[str, Any]]:
        """Keep the lines of epochs <= ``last_epoch`` (those a resumed run will not redo)."""
        kept = [r for r in self.read_metrics() if r["epoch"] <= last_epoch]
        with open(self.path / METRICS, "w") as f:
            for r in kept:
                f.write(json.dumps(r) + "\n")
        return kept

    def write_summary(self, summary: dict[str, Any]) -> None:
        with open(self.path / SUMMARY, "w") as f:
            json.dump(_clean(summary), f, indent=2)

    # ---- checkpoints -----------------------------------------------------------------------
    def save_checkpoint(self, epoch: int, nodes: dict[int, bytes], engine: dict[str, Any]) -> Path:
        root = self.path / CKPT
        root.mkdir(parents=True, exist_ok=True)
        final = root / f"epoch_{epoch:05d}"
        tmp = root / f".tmp_epoch_{epoch:05d}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        for nid, data in nodes.items():
            (tmp / f"node_{nid}.pt").write_bytes(data)
        with open(tmp / "engine.json", "w") as f:
            json.dump(_clean(engine), f)
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        (root / "latest").write_text(final.name + "\n")
        for old in sorted(root.glob("epoch_*"))[: -self.keep]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def latest_checkpoint(self) -> tuple[dict[int, bytes], dict[str, Any]] | None:
        root = self.path / CKPT
        marker = root / "latest"
        if not marker.exists():
            return None
        folder = root / marker.read_text().strip()
        with open(folder / "engine.json") as f:
            engine = json.load(f)
        nodes = {int(p.stem.split("_")[1]): p.read_bytes() for p in folder.glob("node_*.pt")}
        return nodes, engine
