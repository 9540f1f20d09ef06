"""Switching strategy with an override keeps only the strategy options the new strategy accepts.

``vfl run demo --set strategy=npq`` (or a sweep over ``strategy=npq,pbm,ldp``) used to fail on the
file's ``params.b``; now the file's options that the new strategy has no field for are dropped
(logged at info), the ones it accepts are kept, and options given as overrides are never dropped
(a typo there still fails naming the key).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from vfl.core.errors import ConfigError
from vfl.core.logs import get_logger
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import STRATEGIES

log = get_logger(__name__)
_DEFAULT_STRATEGY = next(f.default for f in dataclasses.fields(RunConfig) if f.name == "strategy")


def _explicit(overrides: Sequence[str]) -> set[str] | None:
    """Option names set by ``params.<name>=`` overrides; None when ``params=`` replaces them all."""
    names: set[str] = set()
    for item in overrides:
        parts = [p for p in item.split("=", 1)[0].strip().split(".") if p]
        if parts == ["params"]:
            return None
        if len(parts) >= 2 and parts[0] == "params":
            names.add(parts[1])
    return names


def carry_params(source: Mapping[str, Any], merged: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """``merged`` (the config after overrides) with the options of ``source`` (the config before)
    that the overridden strategy does not accept removed from ``params`` (in place; returned)."""
    old, new = source.get("strategy", _DEFAULT_STRATEGY), merged.get("strategy", _DEFAULT_STRATEGY)
    params = merged.get("params")
    if old == new or not isinstance(new, str) or not isinstance(params, Mapping) or not params:
        return merged
    explicit = _explicit(overrides)
    if explicit is None:
        return merged
    try:
        cls = STRATEGIES.get(new, "strategy")
    except ConfigError:
        return merged  # the config check names the unknown strategy
    accepted = {f.name for f in dataclasses.fields(cls.Params)}
    kept = {k: v for k, v in params.items() if k in accepted or k in explicit}
    dropped = sorted(set(params) - set(kept))
    if dropped:
        log.info("strategy %s -> %s: dropped params %s (not options of %s)", old, new, ", ".join(dropped), new)
    merged["params"] = kept
    return merged
