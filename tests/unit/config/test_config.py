"""Frozen validated configs: unknown keys, wrong types and ranges name the key; registries."""

from __future__ import annotations

import dataclasses

import pytest

import strategies  # noqa: F401
from vfl.config.fields import apply_overrides
from vfl.core.errors import ConfigError
from vfl.core.registry import Registry
from vfl.engine.schema import load_run_config


def test_defaults_are_valid_and_frozen():
    cfg = load_run_config({})
    assert cfg.strategy == "npq" and cfg.num_parties == 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 3  # type: ignore[misc]


@pytest.mark.parametrize("data,key,needle", [
    ({"num_parties": 0}, "num_parties", "[1,"),
    ({"bogus": 1}, "bogus", "unknown key"),
    ({"train": {"lr": "fast"}}, "train.lr", "expected a number"),
    ({"train": {"epochs": 1.5}}, "train.epochs", "expected an integer"),
    ({"train": {"optimizer": "lbfgs"}}, "train.optimizer", "'sgd'"),
    ({"model": {"fusion": "max"}}, "model.fusion", "'concat'"),
    ({"transport": {"kind": "grpc"}}, "transport.kind", "'ray'"),
    ({"strategy": "nope"}, "strategy", "allowed: "),
    ({"model": {"bottom_hidden": [8, "x"]}}, "model.bottom_hidden[1]", "integer"),
    ({"params": {"b": 3}}, "params.b", "unknown key"),
])
def test_errors_name_the_key(data, key, needle):
    with pytest.raises(ConfigError) as exc:
        load_run_config(data)
    assert exc.value.key == key
    assert needle in str(exc.value)


def test_overrides_parse_yaml_values_and_nest():
    data = apply_overrides({"train": {"epochs": 2}}, ["train.epochs=5", "model.bottom_hidden=[8, 4]", "name=x"])
    cfg = load_run_config(data)
    assert cfg.train.epochs == 5 and cfg.model.bottom_hidden == (8, 4) and cfg.name == "x"
    with pytest.raises(ConfigError):
        apply_overrides({}, ["novalue"])


def test_registry_refuses_duplicates():
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1)
    with pytest.raises(ValueError, match="already registered"):
        reg.add("a", 2)
    with pytest.raises(ConfigError, match="allowed: a"):
        reg.get("b")


def test_a_declared_name_is_listed_at_once_and_imported_when_first_asked_for(tmp_path, monkeypatch):
    """``Registry.declare``: the built-in strategies are listed without importing their modules
    (strategies/__init__.py); ``get`` imports the module, which registers the object; a plugin may not
    take a declared name."""
    import sys

    (tmp_path / "lazy_thing.py").write_text("import tests_lazy_registry as r\n@r.REG.register('late')\nclass Late:\n"
                                            "    '''A late thing.'''\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg: Registry[type] = Registry("thing")
    holder = type(sys)("tests_lazy_registry")
    holder.REG = reg  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tests_lazy_registry", holder)
    reg.declare("late", "lazy_thing")
    assert "late" in reg and reg.names() == ["late"] and "lazy_thing" not in sys.modules
    assert reg.loaded() == []
    assert reg.help("late") == "A late thing." and "lazy_thing" in sys.modules
    assert reg.get("late").__name__ == "Late" and reg.loaded() == ["late"]
    with pytest.raises(ValueError, match="already registered"):
        reg.declare("late", "elsewhere")
    reg.declare("other", "lazy_other")
    with pytest.raises(ValueError, match="already declared by lazy_other"):
        reg.add("other", int)
    monkeypatch.delitem(sys.modules, "lazy_thing")


def test_the_built_in_strategies_are_declared_and_each_module_registers_its_names():
    import strategies as builtin
    from vfl.engine.strategy import STRATEGIES

    assert set(builtin.BUILTIN) <= set(STRATEGIES.names())
    for name, module in builtin.BUILTIN.items():
        assert STRATEGIES.get(name).__module__ == module, name
    assert len(builtin.BUILTIN) >= 12
