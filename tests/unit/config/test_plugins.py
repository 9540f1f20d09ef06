"""Plugins found through the ``vfl.plugins`` entry-point group: loaded once, called, errors named."""

from __future__ import annotations

import sys

import pytest

from vfl.core import plugins
from vfl.core.errors import ConfigError


def _dist(tmp_path, name, target, module_src):
    """A minimal installed distribution on sys.path: a module and a dist-info with entry_points.txt."""
    (tmp_path / f"{name}.py").write_text(module_src)
    info = tmp_path / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[vfl.plugins]\n{name} = {target}\n")


def test_an_entry_point_plugin_is_loaded_once_and_registers(tmp_path, monkeypatch):
    _dist(tmp_path, "vfl_demo_plugin", "vfl_demo_plugin:register",
          "CALLS = []\ndef register():\n    CALLS.append(1)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    loaded = plugins.load_plugins()
    plugins.load_plugins()
    import vfl_demo_plugin

    assert loaded["vfl_demo_plugin"] == "vfl_demo_plugin:register" and vfl_demo_plugin.CALLS == [1]
    assert loaded["builtin"] == plugins.BUILTIN_TARGET and "default" in plugins.BACKENDS
    plugins._loaded.pop("vfl_demo_plugin")
    sys.modules.pop("vfl_demo_plugin")


def test_a_broken_plugin_is_named(tmp_path, monkeypatch):
    _dist(tmp_path, "vfl_broken_plugin", "vfl_broken_plugin:register", "raise ImportError('no torch here')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match="plugin vfl_broken_plugin.*no torch here"):
        plugins.load_plugins()
