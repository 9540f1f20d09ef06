"""Plugins: how the layers above ``vfl`` (strategies, parties, the runner) reach it without ``vfl``
importing them.

A package announces itself in the ``vfl.plugins`` entry-point group of its ``pyproject.toml``::

    [project.entry-points."vfl.plugins"]
    my_strategies = "my_pkg.vfl_plugin:register"

``load_plugins()`` imports every entry point once per process and calls it when it is callable;
importing is what registers strategies (``vfl.engine.strategy.register``), datasets and the run backend
(``BACKENDS``). This project's own plugin is ``simulations.plugin:register``; when the installed
metadata predates that entry point (an editable install made before it was added), the same
target is loaded by name, so ``vfl.run`` keeps working until the next ``pip install -e .``.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any, Protocol

from vfl.core.errors import ConfigError
from vfl.core.registry import Registry

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "vfl.plugins"
BUILTIN_NAME = "builtin"
BUILTIN_TARGET = "simulations.plugin:register"  # the value pyproject.toml declares for BUILTIN_NAME


class Backend(Protocol):
    """What ``vfl.run`` needs from the runner layer (``simulations.cli.runner`` implements it)."""

    def resolve_config(self, source: Any, overrides: Sequence[str] = (), *, transport: str | None = None,
                       address: str | None = None) -> Any: ...

    def validate(self, cfg: Any) -> None: ...

    def execute(self, cfg: Any, *, out_dir: str | Path | None, progress: bool | None = None,
                note: str = "created", on_epoch_end: Any = None, on_step: Any = None) -> Any: ...

    def resume_run(self, out_dir: str | Path, *, progress: bool | None = None, overrides: Sequence[str] = (),
                   transport: str | None = None, address: str | None = None, on_epoch_end: Any = None,
                   on_step: Any = None) -> Any: ...


BACKENDS: Registry[Backend] = Registry("run backend")
EXPORTS: Registry[Any] = Registry("vfl name")  # names a plugin hands to ``vfl``'s face (``vfl.VerticalStrategy``)
_loaded: dict[str, str] = {}  # entry-point name -> target, for `loaded_plugins()`


def _call(name: str, target: str, obj: Any) -> None:
    if callable(obj):
        obj()
    _loaded[name] = target
    log.debug("loaded vfl plugin %s = %s", name, target)


def _load_target(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def load_plugins(*, group: str = ENTRY_POINT_GROUP) -> Mapping[str, str]:
    """Import every plugin of ``group`` not loaded yet (idempotent); returns name -> target."""
    for ep in entry_points(group=group):
        if ep.name in _loaded:
            continue
        try:
            obj = ep.load()
        except Exception as exc:  # a broken third-party plugin: name it, do not hide it
            raise ConfigError(f"plugin {ep.name}", f"entry point {ep.value!r} of group {group!r} failed to "
                              f"load: {type(exc).__name__}: {exc}") from None
        _call(ep.name, ep.value, obj)
    if group == ENTRY_POINT_GROUP and BUILTIN_NAME not in _loaded:
        try:
            obj = _load_target(BUILTIN_TARGET)
        except ImportError:
            log.debug("built-in plugin %s not importable", BUILTIN_TARGET)
        else:
            log.debug("entry point %s not in the installed metadata; loaded %s by name", BUILTIN_NAME, BUILTIN_TARGET)
            _call(BUILTIN_NAME, BUILTIN_TARGET, obj)
    return dict(_loaded)


def backend() -> Backend:
    """The registered run backend (loads the plugins first)."""
    load_plugins()
    if "default" not in BACKENDS:
        raise ConfigError("vfl.run", "no run backend is registered; install the project "
                          "(`pip install -e .`) so its `vfl.plugins` entry points are visible")
    return BACKENDS.get("default")


def exported(name: str) -> Any:
    """A name the layers above hand to ``vfl`` (``EXPORTS``, filled by the plugins: the built-in one gives
    ``VerticalStrategy`` and ``vertical_wire``), so ``from vfl import VerticalStrategy`` works without
    ``vfl`` importing upward."""
    load_plugins()
    return EXPORTS.get(name, f"vfl.{name}")

