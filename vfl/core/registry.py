"""Name -> object registries that refuse duplicates (strategies, datasets, models, mods)."""

from __future__ import annotations

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

    def add(self, name: str, item: T, help: str = "") -> T:
        if not name or not isinstance(name, str):
            raise ValueError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._items[name] = item
        self._help[name] = help
        return item

    def register(self, name: str, help: str = "") -> Callable[[T], T]:
        def deco(item: T) -> T:
            doc = help or (getattr(item, "__doc__", None) or "").strip().split("\n")[0]
            return self.add(name, item, doc)

        return deco

    def get(self, name: str, key: str | None = None) -> T:
        try:
            return self._items[name]
        except KeyError:
            allowed = ", ".join(sorted(self._items)) or "(none registered)"
            raise ConfigError(key or self.kind, f"unknown {self.kind} {name!r}; allowed: {allowed}") from None

    def help(self, name: str) -> str:
        return self._help[name]

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)
