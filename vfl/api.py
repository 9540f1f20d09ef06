"""The Python API: ``vfl.run``, ``vfl.resume_run``, ``vfl.resolve``, ``vfl.account``.

The ``vfl`` command calls these same functions. ``vfl`` does not import the runner, strategies
or datasets: they register through the ``vfl.plugins`` entry points (``vfl/plugins.py``).

    import vfl
    result = vfl.run("demo", overrides=["train.epochs=2"])   # in-process, nothing written
    result.summary["final_test_acc"], result.history[-1]["train_loss"]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.accounting import account
from vfl.plugins import backend
from vfl.schema import RunConfig

__all__ = ["RunResult", "account", "resolve", "resume_run", "run", "validate"]

ConfigSource = str | Path | Mapping[str, Any] | RunConfig


@dataclass(frozen=True)
class RunResult:
    """What a run produced: ``summary`` (the summary.json dict), ``history`` (the metrics rows, one
    per epoch, as in metrics.jsonl), ``config`` and ``run_dir`` (None when nothing was written)."""

    summary: dict[str, Any]
    history: list[dict[str, Any]]
    config: RunConfig
    run_dir: Path | None

    @property
    def stopped(self) -> dict[str, Any] | None:
        """Why the run ended before ``train.epochs`` (e.g. the privacy budget), else None."""
        return self.summary.get("stopped")


def resolve(config: ConfigSource, *, overrides: Sequence[str] = (), transport: str | None = None,
            address: str | None = None) -> RunConfig:
    """A validated ``RunConfig`` from a YAML path, a bundled config name (``"demo"``), a mapping or
    a config, plus ``key=value`` overrides; raises ``ConfigError`` naming the key."""
    source = config.to_dict() if isinstance(config, RunConfig) else config
    return backend().resolve_config(source, overrides, transport=transport, address=address)  # type: ignore[no-any-return]


def validate(config: ConfigSource, **kwargs: Any) -> RunConfig:
    """``resolve`` plus the checks a run makes before writing anything (data, device, tracker)."""
    cfg = resolve(config, **kwargs)
    backend().validate(cfg)
    return cfg


def run(config: ConfigSource, *, out_dir: str | Path | None = None, transport: str | None = "inprocess",
        overrides: Sequence[str] = (), address: str | None = None, progress: bool | None = False,
        note: str = "created by: vfl.run") -> RunResult:
    """Run an experiment. ``out_dir=None`` writes nothing (the result is only returned); a directory
    gets config, metrics.jsonl, checkpoints, summary.json and plots, as with ``vfl run --out``.
    ``transport`` overrides ``transport.kind`` (``None``: as the config says)."""
    if isinstance(config, RunConfig) and not overrides and transport is None and address is None:
        cfg = config
    else:
        cfg = resolve(config, overrides=overrides, transport=transport, address=address)
    result = backend().execute(cfg, out_dir=out_dir, progress=progress, note=note)
    return RunResult(result.summary, result.history, cfg, Path(out_dir) if out_dir is not None else None)


def resume_run(run_dir: str | Path, *, overrides: Sequence[str] = (), transport: str | None = None,
           address: str | None = None, progress: bool | None = False) -> RunResult:
    """Continue the run in ``run_dir`` from its newest intact checkpoint (``vfl run --resume``)."""
    b = backend()
    result = b.resume_run(run_dir, progress=progress, overrides=overrides, transport=transport, address=address)
    cfg = b.resolve_config(_stored_config(run_dir))
    return RunResult(result.summary, result.history, cfg, Path(run_dir))


def _stored_config(run_dir: str | Path) -> dict[str, Any]:
    from vfl.rundir import RunDir

    return RunDir(run_dir).read_config()
