"""Name -> object registries that refuse duplicates (strategies, datasets, models, mods).

A name may also be declared lazily (``declare(name, module)``): it is listed at once and its module,
which registers the object when imported, is imported the first time the object is asked for
(``get``, ``help``). So a program imports only what it uses (``strategies/__init__.py``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Generic, TypeVar

from vfl.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A small registry: ``register(name)`` decorator, ``get(name)`` with a helpful error."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}
        self._help: dict[str, str] = {}
        self._lazy: dict[str, str] = {}  # name -> the module that registers it when imported

    def add(self, name: str, item: T, help: str = "") -> T:
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        module = self._lazy.get(name)
        if module is not None and getattr(item, "__module__", module) != module:
            raise ValueError(f"{self.kind} {name!r} is already declared by {module}")
        self._items[name] = item
        self._help[name] = help
        self._lazy.pop(name, None)
        return item

    def declare(self, name: str, module: str) -> None:
        """List ``name`` now; import ``module`` (which registers it) when it is first asked for."""
        if name in self._items or name in self._lazy:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._lazy[name] = module

    def _load(self, name: str) -> None:
        """Import the module that registers a declared ``name`` (it must register it)."""
        module = self._lazy.get(name)
        if module is None:
            return
        importlib.import_module(module)
        if name not in self._items:
            raise ValueError(f"{self.kind} {name!r}: importing {module} did not register it")

    def register(self, name: str, help: str = "") -> Callable[[T], T]:
        def deco(item: T) -> T:
            doc = help or (getattr(item, "__doc__", None) or "").strip().split("\n")[0]
            return self.add(name, item, doc)

        return deco

    def get(self, name: str, key: str | None = None) -> T:
        self._load(name)
        try:
            return self._items[name]
        except KeyError:
            allowed = ", ".join(self.names()) or "(none registered)"
            raise ConfigError(key or self.kind, f"unknown {self.kind} {name!r}; allowed: {allowed}") from None

    def help(self, name: str) -> str:
        self._load(name)
        return self._help[name]

    def names(self) -> list[str]:
        return sorted({*self._items, *self._lazy})

    def loaded(self) -> list[str]:
        """The names whose object is imported (the declared ones not asked for yet are not)."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items or name in self._lazy

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())
