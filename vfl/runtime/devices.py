"""``train.device: auto | cpu | cuda | cuda:N``, ``transport.gpus_per_actor`` and ``transport.resources.<profile>.gpus``.

Devices are resolved inside each host (actor), where Ray has set ``CUDA_VISIBLE_DEVICES`` to the
GPUs it assigned: there ``cuda`` is the first GPU *of this actor*, never another actor's by
accident, and ``cuda:N`` counts within the actor's own GPUs. ``auto`` is ``cuda`` when the host
sees a GPU, else ``cpu``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from vfl.config.resources import profile_resources
from vfl.core.errors import ConfigError

DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")


def check_placement(cfg: Any, *, server_profile: str = "server") -> None:
    """Config-time checks of ``train.device`` and the actors' GPUs (ConfigError naming the key): over
    Ray, ``cuda`` needs every actor of the run (the parties and the strategy's ``server_profile``) to reserve a GPU."""
    device, t = cfg.train.device, cfg.transport
    if not isinstance(device, str) or not DEVICE.match(device):
        raise ConfigError("train.device", f"got {device!r}; allowed: auto, cpu, cuda, cuda:N (N = GPU index)")
    if t.kind != "ray" or not device.startswith("cuda"):
        return
    for profile in ("party", server_profile):
        res = profile_resources(t, profile)
        if res.gpus == 0:
            raise ConfigError(res.gpu_key, f"got 0 for the {profile} actors with train.device={device!r} over Ray: an "
                              "actor sees only the GPUs Ray reserved for it; set e.g. transport.gpus_per_actor=1 "
                              f"(or 0.5 to share one GPU between two actors, or transport.resources.{profile}.gpus), "
                              "or use train.device=auto")


def resolve_device(device: str) -> str:
    """The torch device string for this process: ``auto`` is ``cuda`` if this process may use a GPU
    (inside a Ray actor: Ray assigned it one, ``ray.get_gpu_ids()``; elsewhere: torch sees one), else ``cpu``."""
    if device != "auto":
        return device
    import torch

    assigned = ray_gpu_ids()
    if assigned is not None:
        return "cuda" if assigned and torch.cuda.is_available() else "cpu"
    return "cuda" if torch.cuda.is_available() else "cpu"


def ray_gpu_ids() -> list[Any] | None:
    """The GPUs Ray assigned this worker (Ray sets CUDA_VISIBLE_DEVICES to them), or None outside a
    Ray worker (the driver, an in-process run)."""
    import sys

    ray = sys.modules.get("ray")  # never import Ray just to ask
    if ray is None or not ray.is_initialized():
        return None
    try:
        from ray._private.worker import WORKER_MODE, global_worker

        if global_worker.mode != WORKER_MODE:
            return None
        return list(ray.get_gpu_ids())
    except Exception:  # an older/newer Ray without these internals: trust torch
        return None


def with_resolved_device(cfg: Any) -> Any:
    """``cfg`` with ``train.device`` resolved in this process (unchanged when it is not ``auto``)."""
    train = getattr(cfg, "train", None)
    if train is None or getattr(train, "device", "cpu") != "auto":
        return cfg
    return dataclasses.replace(cfg, train=dataclasses.replace(train, device=resolve_device("auto")))
