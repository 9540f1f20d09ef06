"""Frozen, validated configs built from plain mappings (YAML files + ``--set key=value``).

A config class is a frozen dataclass whose fields carry their allowed range in metadata
(``param(default, ge=..., choices=...)``). ``build(cls, mapping)`` refuses unknown keys, wrong
types and out-of-range values with a ``ConfigError`` naming the dotted key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar, Union

import yaml

from vfl.core.errors import ConfigError

C = TypeVar("C")
_MISSING = dataclasses.MISSING


def param(
    default: Any = _MISSING,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    choices: Sequence[Any] | None = None,
    help: str = "",
) -> Any:
    """A dataclass field with its allowed range; mutable defaults (tuples are fine) stay immutable."""
    meta = {"ge": ge, "gt": gt, "le": le, "lt": lt, "choices": tuple(choices) if choices else None, "help": help}
    if default is _MISSING:
        return dataclasses.field(metadata=meta)
    if isinstance(default, dict):
        return dataclasses.field(default_factory=lambda: dict(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def _range_text(meta: Mapping[str, Any]) -> str:
    if meta.get("choices"):
        return "one of " + ", ".join(repr(c) for c in meta["choices"])
    lo = "(-inf"
    if meta.get("gt") is not None:
        lo = f"({meta['gt']}"
    elif meta.get("ge") is not None:
        lo = f"[{meta['ge']}"
    if meta.get("lt") is not None:
        hi = f"{meta['lt']})"
    elif meta.get("le") is not None:
        hi = f"{meta['le']}]"
    else:
        hi = "inf)"
    return f"a value in {lo}, {hi}"


def _check_range(key: str, value: Any, meta: Mapping[str, Any]) -> None:
    if value is None:
        return
    if isinstance(value, tuple):  # ranges of a list field apply to each item (e.g. layer widths >= 1)
        for i, item in enumerate(value):
            _check_range(f"{key}[{i}]", item, meta)
        return
    choices = meta.get("choices")
    if choices and value not in choices:
        raise ConfigError(key, f"got {value!r}; allowed: {_range_text(meta)}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        ranged = any(meta.get(k) is not None for k in ("ge", "gt", "le", "lt"))
        bad = (
            (ranged and value != value)  # NaN lies in no range
            or (meta.get("ge") is not None and value < meta["ge"])
            or (meta.get("gt") is not None and value <= meta["gt"])
            or (meta.get("le") is not None and value > meta["le"])
            or (meta.get("lt") is not None and value >= meta["lt"])
        )
        if bad:
            raise ConfigError(key, f"got {value!r}; allowed: {_range_text(meta)}")


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(key: str, value: Any, tp: Any) -> Any:
    """Check ``value`` against the annotation ``tp``; converts lists to tuples and ints to floats."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if origin in (Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise ConfigError(key, f"must not be null; expected {_type_name(tp)}")
        non_null = [arg for arg in args if arg is not type(None)]
        if len(non_null) == 1:  # X | None: X's own error names the sub-key (e.g. privacy.bottom_dp.max_grad_norm)
            return _coerce(key, value, non_null[0])
        errors = []
        options = [a for a in args if a is not type(None)]
        for arg in options:
            try:
                return _coerce(key, value, arg)
            except ConfigError as exc:
                if len(options) == 1:  # an optional section: its own error names the sub-key
                    raise
                errors.append(str(exc))
        raise ConfigError(key, f"got {value!r}; expected {_type_name(tp)}")
    if origin is typing.Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(key, f"got {value!r}; allowed: one of " + ", ".join(repr(a) for a in allowed))
        return value
    if origin is tuple:
        args = typing.get_args(tp)
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"got {value!r}; expected a list")
        item_tp = args[0] if args else Any
        return tuple(_coerce(f"{key}[{i}]", v, item_tp) for i, v in enumerate(value))
    if origin is dict or tp is dict:
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"got {value!r}; expected a mapping")
        return dict(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(key, f"got {value!r}; expected a mapping of {_type_name(tp)} fields")
        return build(tp, value, prefix=key)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(key, f"got {value!r}; expected true or false")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(key, f"got {value!r}; expected an integer")
        return value
    if tp is float:
        return _finite_float(key, value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(key, f"got {value!r}; expected a string")
        return value
    raise TypeError(f"unsupported config annotation {tp!r} for {key}")


def _finite_float(key: str, value: Any) -> float:
    """A finite float; strings in YAML/Python float syntax (``1e-3``, which YAML 1.1 reads as a
    string) are accepted, NaN and infinities are not (they would silently train at chance)."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(key, f"got {value!r}; expected a number") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(key, f"got {value!r}; expected a number")
    if not math.isfinite(value):
        raise ConfigError(key, f"got {value!r}; expected a finite number")
    return float(value)


def _yaml_switch(value: Any, choices: Sequence[Any] | None) -> Any:
    """YAML 1.1 reads ``on``/``off`` as booleans: for a field whose choices are the strings "on"
    and "off", a boolean means that string (``--set transport.compiled_graph=on``)."""
    if isinstance(value, bool) and choices and {"on", "off"} <= set(choices):
        return "on" if value else "off"
    return value


def build(cls: type[C], data: Mapping[str, Any] | None, *, prefix: str = "") -> C:
    """Build the frozen config ``cls`` from ``data``, validating every key (dotted names in errors)."""
    data = dict(data or {})
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    for key in data:
        if key not in fields:
            allowed = ", ".join(sorted(fields))
            raise ConfigError(f"{prefix}.{key}" if prefix else key, f"unknown key; allowed keys: {allowed}")
    kwargs = {}
    for name, f in fields.items():
        key = f"{prefix}.{name}" if prefix else name
        if name not in data:
            if f.default is _MISSING and f.default_factory is _MISSING:
                raise ConfigError(key, "is required")
            continue
        value = _yaml_switch(data[name], f.metadata.get("choices"))
        value = _coerce(key, value, hints[name])
        _check_range(key, value, f.metadata)
        kwargs[name] = value
    try:
        return cls(**kwargs)
    except ConfigError:
        raise
    except (TypeError, ValueError) as exc:
        raise ConfigError(prefix or cls.__name__, str(exc)) from None


def to_dict(obj: Any) -> Any:
    """Plain (YAML/JSON-able) form of a config: dataclasses -> dicts, tuples -> lists."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [to_dict(v) for v in obj]
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v) for k, v in obj.items()}
    return obj


class _StrictLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys (the plain loader keeps the last silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: merged by SafeLoader, may be overridden
                continue
            key = self.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_document(self, node: yaml.Node) -> Any:
        check_aliases(node)  # before anything is built: a recursive or exploding alias never expands
        return super().construct_document(node)  # type: ignore[no-untyped-call]


MAX_YAML_VALUES = 100_000  # values of a document with every alias expanded (a config has a few hundred)
MAX_YAML_DEPTH = 200  # nesting of a document (a config has 4)


class YAMLBoundError(yaml.YAMLError):
    """A YAML document refused before it is built: a recursive alias, an alias expansion past
    ``MAX_YAML_VALUES`` values ("billion laughs"), or nesting past ``MAX_YAML_DEPTH``."""


def check_aliases(root: yaml.Node) -> None:
    """Count the values of ``root`` with every alias expanded (memoised per shared node, so a bomb
    costs its node count, not its expansion) and refuse a node that contains itself."""
    size: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
    while stack:
        node, depth, done = stack.pop()
        key = id(node)
        kids = _children(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            if size[key] > MAX_YAML_VALUES:
                raise YAMLBoundError(f"line {node.start_mark.line + 1}: aliases expand this node to more than "
                                     f"{MAX_YAML_VALUES} values; allowed: at most {MAX_YAML_VALUES} (a config "
                                     "needs a few hundred)")
            continue
        if key in size:
            continue
        if depth > MAX_YAML_DEPTH:
            raise YAMLBoundError(f"line {node.start_mark.line + 1}: nested deeper than {MAX_YAML_DEPTH} levels; "
                                 f"allowed: at most {MAX_YAML_DEPTH}")
        on_path.add(key)
        stack.append((node, depth, True))
        for k in kids:
            if id(k) in on_path:
                raise YAMLBoundError(f"line {k.start_mark.line + 1}: a recursive alias (the anchored node "
                                     "contains an alias to itself); allowed: aliases of complete nodes")
            if id(k) not in size:
                stack.append((k, depth + 1, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def load_yaml(text: str) -> Any:
    """Parse YAML safely, refusing duplicate keys, recursive or exploding aliases and absurd
    nesting (raises ``yaml.YAMLError``; ``YAMLBoundError`` for the bounds)."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    except RecursionError:  # the composer recurses per nesting level, before check_aliases sees the tree
        raise YAMLBoundError(f"nested too deep to parse; allowed: at most {MAX_YAML_DEPTH} levels") from None


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """Apply ``key.sub=value`` overrides (values parsed as YAML) to a nested mapping copy."""
    out: dict[str, Any] = _deep_copy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(item, "override must look like key=value (e.g. train.epochs=3)")
        dotted, raw = item.split("=", 1)
        parts = [p for p in dotted.strip().split(".") if p]
        if not parts:
            raise ConfigError(item, "override has an empty key")
        try:
            value = load_yaml(raw)
        except yaml.YAMLError as exc:
            if "duplicate key" in str(exc):
                raise ConfigError(dotted.strip(), f"{raw!r} repeats a key") from None
            if isinstance(exc, YAMLBoundError):
                raise ConfigError(dotted.strip(), str(exc)) from None
            value = raw
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(".".join(parts[: i + 1]), "is not a section; cannot set a sub-key")
            node = nxt
        node[parts[-1]] = value
    return out


def _deep_copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deep_copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


def help_table(cls: type, prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(key, default, allowed, help) rows for every field, recursing into sections (for docs)."""
    rows: list[tuple[str, str, str, str]] = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{f.name}" if prefix else f.name
        tp = hints[f.name]
        if dataclasses.is_dataclass(tp):
            rows.extend(help_table(tp, key))  # type: ignore[arg-type]
            continue
        default = f.default if f.default is not _MISSING else (
            f.default_factory() if f.default_factory is not _MISSING else "(required)")
        ranged = any(f.metadata.get(k) is not None for k in ("ge", "gt", "le", "lt", "choices"))
        allowed = _range_text(f.metadata) if ranged else _type_name(tp)
        rows.append((key, repr(default), allowed, f.metadata.get("help", "")))
    return rows
