"""Bring-your-own models by import string: ``model.bottom: "my_pkg.models:MyBottom"``.

A bottom factory is called as ``factory(input_shape=..., embed_dim=...)`` and returns an
``nn.Module`` whose output is ``(batch, embed_dim)``; the framework appends ``C * tanh`` (PBM needs
embeddings in ``[-C, C]``). A head factory is called as ``factory(in_dim=..., num_classes=...)`` and
returns logits. The string is resolved where the model is built (inside the party's or the
server's actor), so the package must be importable there; the runner also checks it in the driver
before a local run starts. Registered names (``mlp``, ``cnn``...) work as before.
"""

from __future__ import annotations

import importlib
import inspect
import socket
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from vfl.core.errors import ConfigError
from vfl.core.registry import Registry

Builder = Callable[..., nn.Module]


def is_import_string(name: str) -> bool:
    """``pkg.module:Attr`` (a registered model name never holds a colon)."""
    return ":" in name


def load_factory(target: str, *, key: str) -> Callable[..., Any]:
    """The callable named by ``module:attr`` (``attr`` may be dotted); ConfigError naming ``key``."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ConfigError(key, f"got {target!r}; expected 'package.module:Factory'")
    where = f"on host {socket.gethostname()}"
    try:
        obj: Any = importlib.import_module(module)
    except Exception as exc:
        raise ConfigError(key, f"cannot import {target!r} {where}: {type(exc).__name__}: {exc} (the module must be "
                          "importable where the node runs: install it there or add it to PYTHONPATH)") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(key, f"cannot import {target!r} {where}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ConfigError(key, f"{target!r} is a {type(obj).__name__}, not a callable model factory")
    return obj  # type: ignore[no-any-return]


_CALLS = {"model.bottom": ("input_shape", "embed_dim"), "model.head": ("in_dim", "num_classes")}


def check_signature(factory: Callable[..., Any], target: str, *, key: str) -> None:
    """ConfigError naming ``key`` when ``factory`` cannot be called with the keywords the framework
    passes (``factory(input_shape=..., embed_dim=...)`` for a bottom, ``(in_dim=..., num_classes=...)``
    for a head): found before the run, not as a traceback from inside an actor."""
    names = _CALLS[key]
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # no introspectable signature (a C callable): found when called
        return
    try:
        sig.bind(**dict.fromkeys(names))
    except TypeError as exc:
        raise ConfigError(key, f"{target!r} cannot be called as factory({', '.join(f'{n}=...' for n in names)}): "
                          f"{exc}; its signature is {target.split(':')[-1]}{sig}") from None


class UserBottom(nn.Module):
    """A user's network followed by ``C * tanh``; a wrong output shape is an error naming the key."""

    def __init__(self, net: nn.Module, *, embed_dim: int, tanh_c: float, target: str) -> None:
        super().__init__()
        self.net, self.embed_dim, self.c, self.target = net, int(embed_dim), float(tanh_c), target

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.net(x)
        if not isinstance(z, torch.Tensor) or z.ndim != 2 or z.shape[1] != self.embed_dim:
            shape = tuple(z.shape) if isinstance(z, torch.Tensor) else type(z).__name__
            raise ConfigError("model.bottom", f"{self.target!r} returned {shape} for a batch of {len(x)}; "
                              f"expected (batch, model.embed_dim={self.embed_dim})")
        return self.c * torch.tanh(z)


def _module(obj: Any, target: str, key: str) -> nn.Module:
    if not isinstance(obj, nn.Module):
        raise ConfigError(key, f"{target!r} returned a {type(obj).__name__}; expected a torch.nn.Module")
    return obj


def bottom_from(target: str) -> Builder:
    factory = load_factory(target, key="model.bottom")
    check_signature(factory, target, key="model.bottom")

    def build(*, input_shape: Sequence[int], embed_dim: int, tanh_c: float, **_: object) -> nn.Module:
        net = _module(factory(input_shape=tuple(input_shape), embed_dim=embed_dim), target, "model.bottom")
        return UserBottom(net, embed_dim=embed_dim, tanh_c=tanh_c, target=target)

    return build


def head_from(target: str) -> Builder:
    factory = load_factory(target, key="model.head")
    check_signature(factory, target, key="model.head")

    def build(*, in_dim: int, num_classes: int, **_: object) -> nn.Module:
        return _module(factory(in_dim=in_dim, num_classes=num_classes), target, "model.head")

    return build


class ModelRegistry(Registry[Builder]):
    """Registered model names plus ``module:Factory`` strings resolved on ``get``."""

    def __init__(self, kind: str, adapt: Callable[[str], Builder]) -> None:
        super().__init__(kind)
        self._adapt = adapt

    def get(self, name: str, key: str | None = None) -> Builder:
        if isinstance(name, str) and is_import_string(name):
            return self._adapt(name)
        return super().get(name, key)
