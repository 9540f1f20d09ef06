"""Run an experiment from a config: resolve it, prepare the run directory, drive the engine.

Used by the ``vfl run`` CLI, the benchmarks and the tests, so all of them exercise one path.
Everything that can be checked is checked before the run directory is created: the config, the
data (the strategy's driver-side look at it), the device, the cluster address. The directory is
then created (or an empty one taken) and locked for the life of the run; a run that fails before
its first epoch is committed removes what it created (``RunDir.discard``).
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

import strategies  # noqa: F401  (registers the built-in strategies)
from parties.vertical.models import check_models
from simulations.cli import signals
from simulations.cli.params_carry import carry_params
from simulations.cli.run_facts import finish_summary
from simulations.cli.tracked import track_epochs
from simulations.data.source import ConfigDataSource, make_data_source  # noqa: F401  (tests patch runner.ConfigDataSource)
from simulations.report.plots import plot_run
from simulations.report.style import run_identity
from vfl.config.conflicts import check_machine
from vfl.config.fields import apply_overrides, load_yaml
from vfl.core.errors import ConfigError
from vfl.core.logs import get_logger
from vfl.data.dataset import DataSource
from vfl.engine.data_support import check_data_support
from vfl.engine.engine import Engine, EngineResult, EpochCallback, StartCallback, StepCallback
from vfl.engine.resume import check_resume_changes, pin_calibration
from vfl.engine.rundir import CONFIG, RunDir, safe_name
from vfl.engine.schema import RunConfig, load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.engine.tracking import check_tracking
from vfl.engine.trust import check_code
from vfl.engine.versions import versions
from vfl.runtime.preflight import check_device
from vfl.runtime.transport.base import Transport
from vfl.runtime.transport.factory import make_transport

CONFIG_DIR = Path(__file__).parent.parent / "configs"
MAX_CONFIG_BYTES = 16 << 20  # a config is kilobytes; anything this large is not one
log = get_logger(__name__)


def _find_config(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists() and p.name == str(path):  # a bundled name, with or without .yaml
        for cand in (CONFIG_DIR / f"{path}.yaml", CONFIG_DIR / str(path)):
            if cand.suffix == ".yaml" and cand.is_file():
                return cand
    if not p.exists():
        raise ConfigError("CONFIG", f"config file {path} not found (bundled configs: "
                          f"{', '.join(sorted(q.stem for q in CONFIG_DIR.glob('*.yaml')))})")
    if p.is_dir():
        raise ConfigError("CONFIG", f"{p} is a directory; expected a YAML config file")
    st = p.stat()  # never opened before it is known to be a file: a FIFO would block, /dev/zero never end
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError("CONFIG", f"{p} is not a regular file (a device, a pipe or a socket); expected a YAML "
                          "config file")
    if st.st_size > MAX_CONFIG_BYTES:
        raise ConfigError("CONFIG", f"{p} is {st.st_size} bytes; a config is at most {MAX_CONFIG_BYTES >> 20} MiB")
    return p


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Read a YAML config; a bare name like ``demo`` (or ``demo.yaml``) is a bundled config."""
    p = _find_config(path)
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("CONFIG", f"cannot read {p}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError("CONFIG", f"{p} is not valid YAML: {' '.join(str(exc).split())}") from None
    if data is None:
        raise ConfigError("CONFIG", f"{p} is empty; it must hold a mapping of config keys (see `vfl config-help`)")
    if not isinstance(data, dict):
        raise ConfigError("CONFIG", f"{p} must hold a mapping of config keys")
    if p.name == CONFIG:  # a run directory's own config (e.g. --dry-run on it): someone else's is untrusted
        check_code(p.parent, data, key="CONFIG")
    return data


def resolve_config(source: str | Path | Mapping[str, Any] | None, overrides: Sequence[str] = (), *,
                   transport: str | None = None, address: str | None = None) -> RunConfig:
    """Config file (or mapping) + ``key=value`` overrides + CLI transport flags -> validated config.
    A relative ``data.data_dir`` is made absolute (a resume may start from another directory)."""
    data = dict(source) if isinstance(source, Mapping) else (read_config_file(source) if source else {})
    extra = list(overrides)
    if transport:
        extra.append(f"transport.kind={transport}")
    if address:
        extra.append(f"transport.address={address}")
        if not transport:
            extra.append("transport.kind=ray")
    merged = carry_params(data, apply_overrides(data, extra), extra)  # a new strategy keeps only its options
    d = merged.get("data")
    if isinstance(d, dict) and isinstance(d.get("data_dir"), str) and d["data_dir"]:
        d["data_dir"] = os.path.abspath(os.path.expanduser(d["data_dir"]))
    return load_run_config(merged)


def default_out_dir(cfg: RunConfig, root: str | Path = "runs") -> Path:
    """``runs/<name>-<date>-<time>-<ms>-<random>``: unique even for runs started in the same second."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now)) + f"-{int(now * 1000) % 1000:03d}"
    # 32 random bits: 50 names within one millisecond collide with p ~ 3e-7 (16 bits gave ~2 %)
    return Path(root) / f"{safe_name(cfg.name)}-{stamp}-{secrets.token_hex(4)}"


def validate(cfg: RunConfig) -> None:
    """Every check ``execute`` makes before it writes anything (``vfl run --dry-run``)."""
    data = make_data_source(cfg)
    _preflight(cfg, data, None)
    _check_local_resources(cfg, data)


def _check_local_resources(cfg: RunConfig, data: DataSource) -> None:
    """A local Ray run's actors (num_cpus/num_gpus per actor, as placed) must fit this machine: the
    check Ray's admission makes at start-up, made by ``--dry-run`` without starting Ray."""
    if cfg.transport.kind != "ray" or cfg.transport.address:
        return  # a cluster's resources are checked when the run joins it (vfl/runtime/transport/ray_placement.py)
    import torch

    from vfl.core.errors import TransportError
    from vfl.runtime.transport.placement import place
    from vfl.runtime.transport.ray_placement import check_local_fit

    strategy = STRATEGIES.get(cfg.strategy, "strategy")(cfg)
    strategy.prepare(data)
    groups = place(strategy.layout(), cfg.transport, server_profile=strategy.server_profile)
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    try:
        check_local_fit(groups, cpus=os.cpu_count() or 1, gpus=gpus)
    except TransportError as exc:  # a config this machine cannot run: bad input (exit 2), like the other checks
        raise ConfigError("", f"{exc} (a local run's cluster is this machine)") from None


def _check_memory(cfg: RunConfig, data: DataSource) -> None:
    """A vertical run's models, counted on the meta device, must fit this machine's memory (local runs:
    every actor is here); ``parties/vertical/model_size.py``."""
    from parties.vertical.model_size import check_model_memory, vertical_models
    from strategies.base.vertical import VerticalStrategy
    from vfl.data.dataset import KeyedDataSource

    if cfg.transport.address or not issubclass(STRATEGIES.get(cfg.strategy, "strategy"), VerticalStrategy):
        return
    if isinstance(data, KeyedDataSource):  # the parties' column counts stay with them: the head only
        shapes: list[tuple[int, ...]] = []
        classes = 2
    else:
        shards, labels = data.partition()
        shapes, classes = [tuple(s.input_shape) for s in shards], labels.num_classes
    check_model_memory(vertical_models(cfg, input_shapes=shapes, num_classes=classes), train=cfg.train)


def _preflight(cfg: RunConfig, data: DataSource, transport: Transport | None) -> None:
    """Fail before anything is written: device, data (the strategy's own check), tracker, cluster address."""
    check_tracking(cfg.tracking)
    check_models(cfg.model, local=not cfg.transport.address)
    check_machine(cfg)  # threads and GPUs this machine cannot give a local run (vfl/config/conflicts.py)
    if not cfg.transport.address:
        check_device(cfg.train.device)
    strategy = STRATEGIES.get(cfg.strategy, "strategy")
    check_data_support(strategy, data, dataset=cfg.dataset)  # a regression task or NaN features it cannot train on
    strategy(cfg).prepare(data)
    _check_memory(cfg, data)
    if transport is None and cfg.transport.kind == "ray" and cfg.transport.address:
        from vfl.runtime.transport.ray_connect import probe

        probe(cfg.transport.address, timeout_s=cfg.transport.connect_timeout_s)


def epoch_log() -> EpochCallback:
    """One printed line per epoch: ``vfl.run``'s display in a notebook that cannot draw a bar."""
    from simulations.cli.epoch_log import EpochLog

    return EpochLog()


def execute(cfg: RunConfig, *, out_dir: str | Path | None, resume: bool = False, progress: bool | None = None,
            on_epoch_end: EpochCallback | None = None, on_step: StepCallback | None = None,
            transport: Transport | None = None, note: str = "created") -> EngineResult:
    """Run ``cfg``; writes config, metrics, checkpoints, summary and plots when ``out_dir`` is set
    (a new or empty directory; ``resume=True`` continues the run there, see ``resume_run``)."""
    started = time.perf_counter()
    if resume:
        if out_dir is None:
            raise ConfigError("--resume", "needs a run directory")
        return resume_run(out_dir, progress=progress, on_epoch_end=on_epoch_end, on_step=on_step)
    data = make_data_source(cfg)
    _preflight(cfg, data, transport)
    if out_dir is None:
        return _drive(cfg, data, None, resume=False, progress=progress, on_epoch_end=on_epoch_end,
                      on_step=on_step, transport=transport, started=started)
    run_dir = RunDir.create(out_dir)
    try:
        run_dir.write_config(cfg.to_dict(), note=note)
        return _drive(cfg, data, run_dir, resume=False, progress=progress, on_epoch_end=on_epoch_end,
                      on_step=on_step, transport=transport, started=started)
    except BaseException:
        run_dir.discard()  # failed before its first epoch was committed: leave no half-made run behind
        raise
    finally:
        run_dir.close()


def resume_run(out_dir: str | Path, *, progress: bool | None = None, overrides: Sequence[str] = (),
               transport: str | None = None, address: str | None = None,
               on_epoch_end: EpochCallback | None = None, on_step: StepCallback | None = None) -> EngineResult:
    """Continue a stopped run from its newest intact checkpoint. Only keys that do not change what
    was computed may be overridden (``vfl.engine.resume``); the resolved config is rewritten, with the
    overrides added to its history, once the resumed run has started."""
    started = time.perf_counter()
    run_dir = RunDir.open(out_dir)
    try:
        stored = run_dir.read_config()
        old = resolve_config(stored)
        rounds = getattr(STRATEGIES.get(old.strategy), "rounds_param", None)
        if rounds:  # train.epochs follows the strategy's own round count: an override of either extends the run
            stored = {**stored, "train": {k: v for k, v in stored.get("train", {}).items() if k != "epochs"}}
        pinned = pin_calibration(stored)  # a calibrated run: extend it with its β/σ, never recalibrate
        ref = old if pinned is None else resolve_config(pinned)
        cfg = resolve_config(pinned or stored, overrides, transport=transport, address=address)
        changed = check_resume_changes(ref.to_dict(), cfg.to_dict(), rounds_key=f"params.{rounds}" if rounds else None)
        if pinned is not None and "train.epochs" in changed:
            log.warning("extending a run calibrated to privacy.target_epsilon=%g over %d epochs: it keeps its "
                        "mechanism (params as calibrated), so epsilon will pass the target; the resolved config "
                        "drops the target and privacy.epsilon_budget still applies",
                        old.privacy.target_epsilon, old.train.epochs)
        elif pinned is not None:
            cfg = dataclasses.replace(cfg, privacy=old.privacy)  # nothing extended: the record keeps its target
        flat = cfg.to_dict()
        note = "resumed" + (" with " + ", ".join(f"{k}={_get(flat, k)!r}" for k in changed) if changed else "")

        def started_engine(engine: Engine) -> None:
            run_dir.write_config(cfg.to_dict(), note=note)

        data = make_data_source(cfg)
        _preflight(cfg, data, None)
        return _drive(cfg, data, run_dir, resume=True, progress=progress, on_epoch_end=on_epoch_end,
                      on_step=on_step, on_started=started_engine, started=started)
    finally:
        run_dir.close()


def _get(data: Mapping[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, Mapping) else None  # type: ignore[assignment]
    return data


def _drive(cfg: RunConfig, data: DataSource, run_dir: RunDir | None, *, resume: bool,
           progress: bool | None, on_epoch_end: EpochCallback | None, on_step: StepCallback | None,
           on_started: StartCallback | None = None, transport: Transport | None = None,
           started: float | None = None) -> EngineResult:
    started = time.perf_counter() if started is None else started
    tracker = track_epochs(cfg, run_dir, on_epoch_end)  # first: a tracker that cannot start fails before Ray does
    try:
        own = transport is None
        if transport is None:
            # Ray's session files (logs, sockets) stay out of the run directory: a vflray-* folder under the
            # system temp dir, removed at shutdown; VFL_RAY_TEMP_DIR=DIR keeps them in DIR instead
            temp = os.environ.get("VFL_RAY_TEMP_DIR") or None
            transport = make_transport(cfg.transport.kind, address=cfg.transport.address, temp_dir=temp,
                                       connect_timeout_s=cfg.transport.connect_timeout_s,
                                       schedule_timeout_s=cfg.transport.schedule_timeout_s,
                                       timeout_s=cfg.transport.timeout_s)
            signals.after_ray_init()
        log.info("%s %s: strategy %s, %d parties, %s transport, run directory %s", "resuming" if resume else "starting",
                 cfg.name, cfg.strategy, cfg.num_parties, transport.kind, run_dir.path if run_dir else "none")
        engine = Engine(cfg, transport, data, run_dir=run_dir, progress=progress, on_epoch_end=tracker.on_epoch_end,
                        on_step=on_step, on_started=on_started)
        try:
            result = engine.run(resume=resume)
        finally:
            if own:
                transport.shutdown()
        result.summary["versions"] = versions()
        finish_summary(result.summary, cfg=cfg, started=started)  # wall_s of the whole run, seed, calibration
        if "defenses" in result.summary:  # feature and label privacy side by side (vfl/privacy/defenses.py)
            result.summary["epsilon_by_scope"] = {"feature": result.summary.get("epsilon"),
                                                  "label": result.summary.get("epsilon_label")}
        log.info("finished %s after %s epochs%s", cfg.name, result.summary.get("epochs"),
                 f" (stopped: {result.summary['stopped']['message']})" if result.summary.get("stopped") else "")
        if run_dir is not None:
            result.summary["config_sha256"] = run_dir.config_digest()  # the settings it ran (`vfl verify`)
            run_dir.write_summary(result.summary)
            plot_run(run_dir.read_metrics(), run_dir.path / "plots", identity=run_identity(cfg, result.summary))
        tracker.finish(run_dir)  # summary.json, config.resolved.yaml, metrics.jsonl, plots as artifacts
    except BaseException:
        tracker.close(ok=False)
        raise
    tracker.close(ok=True)
    return result
