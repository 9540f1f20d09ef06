"""The transport factory by name (``transport.kind``); the interface is ``vfl.runtime.transport.base``."""

from __future__ import annotations

from vfl.core.errors import ConfigError
from vfl.runtime.transport.base import Transport
from vfl.runtime.transport.inprocess import InProcessTransport
from vfl.runtime.transport.ray_transport import (
    RayTransport,  # imports Ray only when a RayTransport starts
)


def make_transport(kind: str, *, address: str | None = None, temp_dir: str | None = None,
                   connect_timeout_s: float = 30.0, schedule_timeout_s: float = 60.0,
                   timeout_s: float = 1800.0) -> Transport:
    """Factory by name: ``inprocess`` or ``ray``."""
    if kind == "inprocess":
        return InProcessTransport()
    if kind == "ray":
        return RayTransport(address=address, temp_dir=temp_dir, connect_timeout_s=connect_timeout_s,
                            schedule_timeout_s=schedule_timeout_s, timeout_s=timeout_s)
    raise ConfigError("transport.kind", f"got {kind!r}; allowed: 'inprocess', 'ray'")
