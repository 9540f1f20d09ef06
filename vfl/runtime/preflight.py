"""Checks of what a run needs from the machine, made before anything starts (and again inside
each host, which may be another machine of a Ray cluster)."""

from __future__ import annotations

import socket

from vfl.core.errors import ConfigError


def check_device(device: str, *, where: str | None = None) -> None:
    """``train.device=cuda`` needs a CUDA device here (a one-line error instead of torch's trace)."""
    if not device.startswith("cuda"):
        return
    import torch

    host = where or f"this machine ({socket.gethostname()})"
    if not torch.cuda.is_available():
        raise ConfigError("train.device", f"got {device!r} but {host} has no CUDA device "
                          "(torch.cuda.is_available() is False); allowed here: 'cpu' or 'auto'")
    index = int(device.partition(":")[2] or 0)
    if index >= torch.cuda.device_count():
        raise ConfigError("train.device", f"got {device!r} but {host} sees {torch.cuda.device_count()} CUDA "
                          f"device(s) (indices 0..{torch.cuda.device_count() - 1}, as CUDA_VISIBLE_DEVICES allows)")
