"""One face for extension authors: what docs/writing-a-strategy.md imports comes from ``vfl``."""

from __future__ import annotations

import vfl
from vfl.config import fields as config
from vfl.core import errors
from vfl.engine import strategy
from vfl.runtime import message, mods, node

EXTENSION_API = {
    "Strategy": strategy.Strategy, "register": strategy.register, "STRATEGIES": strategy.STRATEGIES,
    "Node": node.Node, "NodeSpec": node.NodeSpec, "handles": node.handles,
    "Mod": mods.Mod, "ModContext": mods.ModContext, "param": config.param, "ConfigError": errors.ConfigError,
    "message": message,
}


def test_the_extension_api_is_exported_by_vfl_and_listed():
    assert len(EXTENSION_API) >= 10  # the loop below checks something
    for name, obj in EXTENSION_API.items():
        assert getattr(vfl, name) is obj, name
        assert name in vfl.__all__ and name in dir(vfl), name


def test_every_name_in_all_resolves():
    for mod in (vfl, message, mods, node, strategy):
        missing = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert not missing, f"{mod.__name__}.__all__ names what it lacks: {missing}"


