"""The Python API: ``vfl.run``, ``vfl.resume_run``, ``vfl.resolve``, ``vfl.account``.

The ``vfl`` command calls these same functions. ``vfl`` does not import the runner, strategies
or datasets: they register through the ``vfl.plugins`` entry points (``vfl/core/plugins.py``).

    import vfl
    result = vfl.run("demo", transport="inprocess", overrides={"train.epochs": 2})   # nothing written
    result.summary["final_test_acc"], result.history[-1]["train_loss"]

Overrides are ``key=value`` strings (as ``--set``) or a mapping of dotted keys to values
(``{"train.lr": 0.1, "params": {}}``). ``on_epoch_end(epoch, row, engine)`` and
``on_step(epoch, steps_done, engine)`` are called in the driver after every committed epoch and
after training steps (the vertical strategies pipeline 16 steps between syncs, so ``steps_done``
may grow by several at once): the escape hatch for custom logging, early stopping (raise) or plots.

``progress=None`` (the default) picks the display (``vfl/engine/progress.py``): a notebook bar inside a
Jupyter kernel with ipywidgets, one line per epoch in a kernel without them, else the terminal bar.
``transport="inprocess"`` is the default here while ``vfl run`` keeps the config's
``transport.kind`` (the demo's is ray): no Ray start-up in a notebook; pass ``transport=None`` to
run as the CLI does.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError
from vfl.core.plugins import backend
from vfl.engine.progress import choose, detect, engine_progress
from vfl.engine.schema import RunConfig
from vfl.privacy.accounting.account import account

__all__ = ["RunResult", "account", "resolve", "resume_run", "run", "validate"]

ConfigSource = str | Path | Mapping[str, Any] | RunConfig
Overrides = Sequence[str] | Mapping[str, Any]
EpochHook = Callable[[int, dict[str, Any], Any], None]  # (epoch, metrics row, engine)
StepHook = Callable[[int, int, Any], None]  # (epoch, steps done in this epoch, engine)


def override_list(overrides: Overrides) -> list[str]:
    """``key=value`` strings from ``--set``-style strings or a mapping of dotted keys to values."""
    if isinstance(overrides, str):
        return [overrides]
    if isinstance(overrides, Mapping):
        return [f"{k}={json.dumps(v, default=str)}" for k, v in overrides.items()]
    return list(overrides)


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


class _DefaultTransport(str):
    """``vfl.run``'s default ``"inprocess"``, told apart (``is``) from one a caller passes: only the
    default warns or yields to a cluster address; an explicit ``"inprocess"`` is obeyed as given."""

    def __repr__(self) -> str:
        return repr(str(self))


INPROCESS_DEFAULT = _DefaultTransport("inprocess")
_noted_transport: list[str] = []  # the in-process default is announced once per process


def _api_transport(config: ConfigSource, overrides: Overrides, address: str | None) -> str | None:
    """``"inprocess"``, warning (once) where it replaces a config's Ray transport, as the CLI does not;
    None (the config's Ray, as ``vfl run``) where ``address`` or ``transport.address`` names a cluster."""
    if address is not None:
        return None  # `--address` implies ray
    try:
        asked = (config if isinstance(config, RunConfig) else resolve(config, overrides=overrides)).transport
    except ConfigError:
        return "inprocess"  # the run's own resolve names the error
    if asked.address:
        return None
    kind = asked.kind
    if kind != "inprocess" and not _noted_transport:
        _noted_transport.append(kind)
        warnings.warn(f"vfl.run runs in-process by default; this config's transport.kind is {kind!r}, which "
                      f"`vfl run` uses: pass transport=None (or transport={kind!r}) to run as the CLI does",
                      UserWarning, stacklevel=3)
    return "inprocess"


def _display(progress: bool | None, on_epoch_end: EpochHook | None) -> tuple[bool | None, EpochHook | None]:
    """The engine's ``progress`` and ``on_epoch_end`` for the display ``choose`` picks here."""
    mode = choose(progress=progress, env=detect())
    line_log = getattr(backend(), "epoch_log", None) if mode == "lines" else None
    if line_log is None:
        return engine_progress(mode, progress), on_epoch_end
    printer = line_log()
    if on_epoch_end is None:
        return False, printer
    user_hook = on_epoch_end

    def both(epoch: int, row: dict[str, Any], engine: Any) -> None:
        printer(epoch, row, engine)
        user_hook(epoch, row, engine)

    return False, both


def resolve(config: ConfigSource, *, overrides: Overrides = (), transport: str | None = None,
            address: str | None = None) -> RunConfig:
    """A validated ``RunConfig`` from a YAML path, a bundled config name (``"demo"``), a mapping or
    a config, plus overrides (``key=value`` strings or a dict); raises ``ConfigError`` naming the key."""
    source = config.to_dict() if isinstance(config, RunConfig) else config
    return backend().resolve_config(source, override_list(overrides), transport=transport,  # type: ignore[no-any-return]
                                    address=address)


def validate(config: ConfigSource, **kwargs: Any) -> RunConfig:
    """``resolve`` plus the checks a run makes before writing anything (data, device, tracker)."""
    cfg = resolve(config, **kwargs)
    backend().validate(cfg)
    return cfg


def run(config: ConfigSource, *, out_dir: str | Path | None = None, transport: str | None = INPROCESS_DEFAULT,
        overrides: Overrides = (), address: str | None = None, progress: bool | None = None,
        note: str = "created by: vfl.run", on_epoch_end: EpochHook | None = None,
        on_step: StepHook | None = None) -> RunResult:
    """Run an experiment. ``out_dir=None`` writes nothing (the result is only returned); a directory
    gets config, metrics.jsonl, checkpoints, summary.json and plots, as with ``vfl run --out``.
    ``transport`` overrides ``transport.kind``: in-process by default, unlike ``vfl run`` (no Ray
    start-up; warned once where the config says ray); ``transport=None``: the config's, as the
    CLI does, and so when ``address`` or ``transport.address`` names a Ray cluster. ``progress``:
    None picks a terminal bar, a notebook bar or epoch lines (module docstring), False nothing.
    ``on_epoch_end`` / ``on_step`` are called after every committed epoch / synced block of steps."""
    if isinstance(config, RunConfig) and not overrides and transport is None and address is None:
        cfg = config
    else:
        if transport is INPROCESS_DEFAULT:
            transport = _api_transport(config, overrides, address)
        cfg = resolve(config, overrides=overrides, transport=transport, address=address)
    progress, on_epoch_end = _display(progress, on_epoch_end)
    result = backend().execute(cfg, out_dir=out_dir, progress=progress, note=note, on_epoch_end=on_epoch_end,
                               on_step=on_step)
    return RunResult(result.summary, result.history, cfg, Path(out_dir) if out_dir is not None else None)


def resume_run(run_dir: str | Path, *, overrides: Overrides = (), transport: str | None = None,
               address: str | None = None, progress: bool | None = None, on_epoch_end: EpochHook | None = None,
               on_step: StepHook | None = None) -> RunResult:
    """Continue the run in ``run_dir`` from its newest intact checkpoint (``vfl run --resume``)."""
    b = backend()
    progress, on_epoch_end = _display(progress, on_epoch_end)
    result = b.resume_run(run_dir, progress=progress, overrides=override_list(overrides), transport=transport,
                          address=address, on_epoch_end=on_epoch_end, on_step=on_step)
    cfg = b.resolve_config(_stored_config(run_dir))
    return RunResult(result.summary, result.history, cfg, Path(run_dir))


def _stored_config(run_dir: str | Path) -> dict[str, Any]:
    from vfl.engine.rundir import RunDir

    return RunDir(run_dir).read_config()
