"""Export a packaged dataset as per-party files with a partial, shuffled ID overlap.

    python -m simulations.data.split_parties DATASET OUT_DIR --overlap 0.8 --parties M

Writes ``party0.csv`` .. ``party{M-1}.csv``, ``labels.csv``, ``manifest.json`` and a ready
``config.yaml`` (what they hold: ``simulations/data/party_export.py``, re-exported here).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import vfl
from simulations.data.party_export import (
    ENV_CACHE,
    FORMAT_VERSION,
    ID,
    LABEL,
    SPLIT,
    _memberships,
    cached,
    data_section,
    export,
    write,
)
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError, DataError

__all__ = ["ENV_CACHE", "FORMAT_VERSION", "ID", "LABEL", "SPLIT", "_memberships", "cached", "data_section",
           "export", "main", "write"]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m simulations.data.split_parties", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="registered dataset (see `vfl datasets`)")
    p.add_argument("out_dir", help="where to write the party files")
    p.add_argument("--overlap", type=float, default=0.8, help="share of samples every file holds (default 0.8)")
    p.add_argument("--parties", type=int, default=4, help="number of passive parties M (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partition", default="contiguous", help="vertical split of the features (default contiguous)")
    p.add_argument("--data-dir", help="data directory of datasets that are not packaged")
    args = p.parse_args(argv)
    try:
        cfg = vfl.resolve({"name": args.dataset, "dataset": args.dataset, "num_parties": args.parties,
                              "seed": args.seed, "data": {"partition": args.partition, "data_dir": args.data_dir}})
        out = Path(args.out_dir)
        if (out / "manifest.json").exists():
            raise ConfigError("OUT_DIR", f"{out} already holds party files; choose another directory")
        m = write(cfg, out, overlap=args.overlap, partition=ConfigDataSource.from_config(cfg).partition)
    except (ConfigError, DataError) as exc:
        print(f"split_parties: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({k: m[k] for k in ("dataset", "num_parties", "num_samples", "intersection_size")}))
    print(f"files, manifest.json and config.yaml in {out}; run it with: vfl run {out / 'config.yaml'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
