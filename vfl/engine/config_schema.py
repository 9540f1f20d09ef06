"""The run config as a JSON Schema (``vfl config-help --json``), for editor completion and checks.

Built from the same ``param`` metadata the loader validates with (type hints, ``ge``/``gt``/``le``/
``lt``, ``choices``, ``help``, defaults), so it cannot drift from ``vfl config-help``. Strategy
``params`` and ``defenses[]`` items depend on the chosen strategy / kind: they are ``if``/``then``
branches (YAML editors such as VS Code's complete them once ``strategy:`` or ``kind:`` is set).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

from vfl.config.fields import _MISSING
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.defenses import DEFENSES, KEY

DIALECT = "https://json-schema.org/draft/2020-12/schema"
_SCALARS = {bool: "boolean", int: "integer", float: "number", str: "string"}
_BOUNDS = (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"), ("lt", "exclusiveMaximum"))


def _jsonable(value: Any) -> Any:
    """A default as JSON (tuples as lists; anything else as its repr)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    return repr(value)


def _type_schema(tp: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    """The schema of one type hint; ranges and choices apply to its numbers / strings / items."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        members = [_type_schema(a, meta) for a in args]
        return members[0] if len(members) == 1 else {"anyOf": members}
    if tp is type(None):
        return {"type": "null"}
    if tp is Any:
        return {}
    if dataclasses.is_dataclass(tp):
        return object_schema(tp)  # type: ignore[arg-type]
    if origin in (tuple, list):
        items = args[0] if args else Any
        return {"type": "array", "items": _type_schema(items, meta)}
    if origin is dict or tp is dict:
        return {"type": "object"}
    if tp in _SCALARS:
        out: dict[str, Any] = {"type": _SCALARS[tp]}  # "number" admits integers (YAML's 1 for a float)
        if meta.get("choices"):
            out["enum"] = [_jsonable(c) for c in meta["choices"]]
        if tp in (int, float):
            out.update({key: meta[name] for name, key in _BOUNDS if meta.get(name) is not None})
        return out
    return {}


def _field_schema(f: dataclasses.Field[Any], tp: Any) -> dict[str, Any]:
    out = _type_schema(tp, f.metadata)
    if f.metadata.get("help"):
        out = {**out, "description": f.metadata["help"]}
    if f.default is not _MISSING:
        out["default"] = _jsonable(f.default)
    elif f.default_factory is not _MISSING:
        out["default"] = _jsonable(f.default_factory())
    return out


def object_schema(cls: type) -> dict[str, Any]:
    """A config dataclass as a closed JSON object (the loader refuses unknown keys too)."""
    hints = typing.get_type_hints(cls)
    fields = dataclasses.fields(cls)
    props = {f.name: _field_schema(f, hints[f.name]) for f in fields}
    required = [f.name for f in fields if f.default is _MISSING and f.default_factory is _MISSING]
    doc = (cls.__doc__ or "").strip().splitlines()
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if doc and not doc[0].startswith(cls.__name__ + "("):  # dataclasses' generated signature is no help
        out["description"] = doc[0]
    if required:
        out["required"] = required
    return out


def run_config_schema(*, run_config: type, strategies: Mapping[str, type], defenses: Mapping[str, type],
                      defense_key: str = "defenses") -> dict[str, Any]:
    """The whole run config: ``run_config``'s fields, ``params`` per strategy, ``defenses[]`` per kind.

    ``strategies`` and ``defenses`` map registered names to their ``Params`` dataclasses.
    """
    schema = object_schema(run_config)
    props = schema["properties"]
    props["strategy"] = {**props["strategy"], "enum": sorted(strategies)}
    schema["allOf"] = [{"if": {"properties": {"strategy": {"const": name}}},
                        "then": {"properties": {"params": object_schema(params)}}}
                       for name, params in sorted(strategies.items())]
    kinds = {"type": "string", "enum": sorted(defenses), "description": "a defense (see `vfl defenses`)"}
    branches = []
    for name, params in sorted(defenses.items()):
        opts = object_schema(params)
        opts["properties"] = {"kind": {"const": name}, **opts["properties"]}
        branches.append({"if": {"properties": {"kind": {"const": name}}}, "then": opts})
    props[defense_key] = {**props[defense_key], "items": {"type": "object", "required": ["kind"],
                                                         "properties": {"kind": kinds}, "allOf": branches}}
    return {"$schema": DIALECT, "title": "vfl run config", **schema}


def registered_schema() -> dict[str, Any]:
    """``run_config_schema`` over what is registered now (import strategies and plugins first)."""
    return run_config_schema(run_config=RunConfig,
                             strategies={n: STRATEGIES.get(n, "strategy").Params for n in STRATEGIES.names()},
                             defenses={n: DEFENSES.get(n).Params for n in DEFENSES.names()}, defense_key=KEY)
