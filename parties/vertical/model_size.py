"""Refuse a model that cannot fit in memory before any weight is allocated.

A ``model.head_hidden: [200000]`` used to end in a 14 GB allocation traceback inside a host. The
models are built once on torch's ``meta`` device (shapes only, no storage) to count their
parameters exactly, registered or user factories alike; weights, gradients and the optimizer's
state (float32) are compared with the memory this machine has available.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vfl.core.errors import ConfigError

FLOAT_BYTES = 4
OPTIMIZER_SLOTS = {"sgd": 0, "adam": 2, "adamw": 2}  # extra float32 tensors per parameter (+1 for sgd momentum)


def count_params(build: Callable[[], nn.Module]) -> int | None:
    """Parameters of the module ``build`` makes, built on the meta device (None: it cannot be)."""
    try:
        with torch.device("meta"):
            module = build()
        return sum(p.numel() for p in module.parameters())
    except Exception:  # noqa: BLE001 (a factory that needs real storage: not countable, not refused)
        return None


def available_bytes() -> int | None:
    """Memory this process may still use: MemAvailable, or less under a cgroup (v2 or v1) limit."""
    out: list[int] = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    out.append(int(line.split()[1]) * 1024)
    except OSError:
        pass
    for limit, used in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                        ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            lim = Path(limit).read_text().strip()  # read_text closes the file: no ResourceWarning at exit
            if lim.isdigit() and int(lim) < 1 << 60:
                out.append(int(lim) - int(Path(used).read_text().strip()))
        except (OSError, ValueError):
            continue
    return min(out) if out else None


def training_bytes(params: int, *, optimizer: str, momentum: float) -> int:
    """Weights + gradients + optimizer state of ``params`` float32 parameters."""
    slots = OPTIMIZER_SLOTS.get(optimizer, 2) + (1 if optimizer == "sgd" and momentum > 0 else 0)
    return params * FLOAT_BYTES * (2 + slots)


def _gb(n: float) -> str:
    return f"{n / 1e9:.1f} GB"


def check_model_memory(models: Sequence[tuple[str, str, Callable[[], nn.Module]]], *, train: Any,
                       available: int | None = None) -> dict[str, int]:
    """``models``: (config keys, what, build) of every model this machine will hold. Raises a
    one-line ``ConfigError`` naming the keys and the sizes when training them cannot fit; returns
    the parameter count of each ``what`` (uncountable ones left out)."""
    counts = {what: n for keys, what, build in models if (n := count_params(build)) is not None}
    if not counts:
        return counts
    free = available if available is not None else available_bytes()
    if free is None or os.environ.get("VFL_SKIP_MEMORY_CHECK"):
        return counts
    need = sum(training_bytes(n, optimizer=train.optimizer, momentum=train.momentum) for n in counts.values())
    if need <= free:
        return counts
    keys, what, _ = max(models, key=lambda m: counts.get(m[1], 0))
    total = sum(counts.values())
    raise ConfigError(keys, f"the models need {total:,} parameters ({_gb(total * FLOAT_BYTES)} of float32 "
                      f"weights; the largest, {what}, {counts[what]:,}), {_gb(need)} to train with "
                      f"train.optimizer={train.optimizer!r}, but this machine has {_gb(free)} available; "
                      "allowed: a smaller model (set VFL_SKIP_MEMORY_CHECK=1 to try anyway)")


def vertical_models(cfg: Any, *, input_shapes: Sequence[tuple[int, ...]], num_classes: int
                    ) -> list[tuple[str, str, Callable[[], nn.Module]]]:
    """(keys, what, build) of a vertical run's models: each party's bottom (those whose input shape
    is known) and the server's head, built exactly as the strategy builds them."""
    from parties.vertical.models import BOTTOMS, HEADS

    m = cfg.model
    in_dim = m.embed_dim if m.fusion == "sum" else m.embed_dim * cfg.num_parties
    out: list[tuple[str, str, Callable[[], nn.Module]]] = []

    def _bottom(m: Any, shape: tuple[int, ...]) -> Callable[[], nn.Module]:
        return lambda: BOTTOMS.get(m.bottom, "model.bottom")(
            input_shape=shape, embed_dim=m.embed_dim, tanh_c=m.tanh_c, hidden=m.bottom_hidden)

    for i, shape in enumerate(input_shapes):
        out.append(("model.bottom_hidden/model.embed_dim", f"party{i}'s bottom ({m.bottom}, input {tuple(shape)})",
                    _bottom(m, shape)))
    out.append(("model.head_hidden/model.embed_dim", f"the head ({m.head}, input {in_dim})",
                lambda: HEADS.get(m.head, "model.head")(in_dim=in_dim, num_classes=num_classes, hidden=m.head_hidden)))
    return out
