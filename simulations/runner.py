"""Run an experiment from a config: resolve it, prepare the run directory, drive the engine.

Used by the ``vfl run`` CLI, the benchmarks and the tests, so all of them exercise one path.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

import strategies  # noqa: F401  (registers the built-in strategies)
from simulations.datasource import ConfigDataSource, make_data_source  # noqa: F401  (tests patch runner.ConfigDataSource)
from simulations.plots import plot_run
from vfl.config import apply_overrides
from vfl.engine import Engine, EngineResult, EpochCallback
from vfl.errors import ConfigError
from vfl.rundir import RunDir
from vfl.schema import RunConfig, load_run_config
from vfl.transport import Transport, make_transport

CONFIG_DIR = Path(__file__).parent / "configs"


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config; a bare name like ``demo`` resolves to ``simulations/configs/demo.yaml``."""
    p = Path(path)
    if not p.exists() and (CONFIG_DIR / f"{path}.yaml").exists():
        p = CONFIG_DIR / f"{path}.yaml"
    if not p.exists():
        raise ConfigError("CONFIG", f"config file {path} not found (bundled configs: "
                          f"{', '.join(sorted(q.stem for q in CONFIG_DIR.glob('*.yaml')))})")
    with open(p) as f:
        try:
            data = yaml.safe_load(f) or {}
        except yaml.YAMLError as exc:
            raise ConfigError("CONFIG", f"{p} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError("CONFIG", f"{p} must hold a mapping of config keys")
    return data


def resolve_config(source: str | Path | Mapping[str, Any] | None, overrides: Sequence[str] = (), *,
                   transport: str | None = None, address: str | None = None) -> RunConfig:
    """Config file (or mapping) + ``key=value`` overrides + CLI transport flags -> validated config."""
    data = dict(source) if isinstance(source, Mapping) else (read_config_file(source) if source else {})
    extra = list(overrides)
    if transport:
        extra.append(f"transport.kind={transport}")
    if address:
        extra.append(f"transport.address={address}")
        if not transport:
            extra.append("transport.kind=ray")
    return load_run_config(apply_overrides(data, extra))


def default_out_dir(cfg: RunConfig, root: str | Path = "runs") -> Path:
    return Path(root) / f"{cfg.name}-{time.strftime('%Y%m%d-%H%M%S')}"


def execute(cfg: RunConfig, *, out_dir: str | Path | None, resume: bool = False, progress: bool | None = None,
            on_epoch_end: EpochCallback | None = None, transport: Transport | None = None) -> EngineResult:
    """Run ``cfg``; writes config, metrics, checkpoints, summary and plots when ``out_dir`` is set."""
    data = make_data_source(cfg)  # the engine validates it (strategy.prepare) before actors start
    run_dir = RunDir(out_dir) if out_dir is not None else None
    if run_dir is not None and not resume:
        if (run_dir.path / "metrics.jsonl").exists():
            raise ConfigError("--out", f"{run_dir.path} already holds a run; continue it with "
                              f"`vfl run --resume {run_dir.path}` or choose another --out")
        run_dir.write_config(cfg.to_dict())
    own = transport is None
    if transport is None:
        temp = str(Path(out_dir) / "ray-tmp") if out_dir is not None else None
        transport = make_transport(cfg.transport.kind, address=cfg.transport.address, temp_dir=temp)
    engine = Engine(cfg, transport, data, run_dir=run_dir, progress=progress, on_epoch_end=on_epoch_end)
    try:
        result = engine.run(resume=resume)
    finally:
        if own:
            transport.shutdown()
    if run_dir is not None:
        run_dir.write_summary(result.summary)
        plot_run(run_dir.read_metrics(), run_dir.path / "plots", title=f"{cfg.name} ({cfg.strategy})")
    return result


def resume_run(out_dir: str | Path, *, progress: bool | None = None, overrides: Sequence[str] = ()) -> EngineResult:
    """Continue a killed run from its last checkpoint (its resolved config is reused)."""
    run_dir = RunDir(out_dir)
    cfg = resolve_config(run_dir.read_config(), overrides)
    if overrides:  # e.g. more epochs: the directory's config must describe what was run
        run_dir.write_config(cfg.to_dict())
    return execute(cfg, out_dir=out_dir, resume=True, progress=progress)
