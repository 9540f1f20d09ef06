"""``train.device: auto | cpu | cuda | cuda:N`` and ``transport.gpus_per_actor``.

Devices are resolved inside each host (actor), where Ray has set ``CUDA_VISIBLE_DEVICES`` to the
GPUs it assigned: there ``cuda`` is the first GPU *of this actor*, never another actor's by
accident, and ``cuda:N`` counts within the actor's own GPUs. ``auto`` is ``cuda`` when the host
sees a GPU, else ``cpu``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from vfl.errors import ConfigError

DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def check_placement(cfg: Any) -> None:
    """Config-time checks of ``train.device`` and ``transport.gpus_per_actor`` (ConfigError naming the key)."""
    device, t = cfg.train.device, cfg.transport
    if not isinstance(device, str) or not DEVICE.match(device):
        raise ConfigError("train.device", f"got {device!r}; allowed: auto, cpu, cuda, cuda:N (N = GPU index)")
    if t.kind == "ray" and device.startswith("cuda") and t.gpus_per_actor == 0:
        raise ConfigError("transport.gpus_per_actor", f"got 0 with train.device={device!r} over Ray: an actor "
                          "sees only the GPUs Ray reserved for it; set e.g. transport.gpus_per_actor=1 (or 0.5 to "
                          "share one GPU between two actors)")


def resolve_device(device: str) -> str:
    """The torch device string for this process (``auto`` -> ``cuda`` if a GPU is visible, else ``cpu``)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def with_resolved_device(cfg: Any) -> Any:
    """``cfg`` with ``train.device`` resolved in this process (unchanged when it is not ``auto``)."""
    train = getattr(cfg, "train", None)
    if train is None or getattr(train, "device", "cpu") != "auto":
        return cfg
    return dataclasses.replace(cfg, train=dataclasses.replace(train, device=resolve_device("auto")))
