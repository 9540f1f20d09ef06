"""Joining an existing Ray cluster with a deadline.

``ray.init(address=...)`` retries for minutes (printing GCS warnings) when nothing, or something
that is not a Ray head, listens at the address. So the address is checked first, within
``transport.connect_timeout_s``: it must parse as HOST:PORT, resolve, accept a TCP connection and
answer the GCS's ``GetClusterId`` RPC. Failures name the address in one line.
"""

from __future__ import annotations

import socket
import time

from vfl.core.errors import ConfigError, TransportError

_RETRY_S = 0.5


def parse_address(address: str) -> tuple[str, int]:
    """``HOST:PORT`` (or ``ray://HOST:PORT``) -> (host, port); anything else is a ConfigError."""
    text = address.strip()
    if text.startswith("ray://"):
        text = text[len("ray://"):]
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError("transport.address", f"got {address!r}; expected HOST:PORT of a Ray head node "
                          "(e.g. 127.0.0.1:6379)")
    return host.strip("[]"), int(port)


def probe(address: str, *, timeout_s: float) -> None:
    """Raise ``TransportError`` naming ``address`` unless a Ray head answers there in time."""
    if address.strip() == "auto":  # ray.init finds the local cluster itself (and fails fast)
        return
    host, port = parse_address(address)
    deadline = time.monotonic() + timeout_s
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise TransportError(f"cannot join Ray at {address}: unknown host {host!r} ({exc.strerror})") from None
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.05, min(left, 5.0))):
                break
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
        if time.monotonic() + _RETRY_S >= deadline:
            raise TransportError(f"cannot join Ray at {address}: {reason} (gave up after {timeout_s:g} s; "
                                 "transport.connect_timeout_s)")
        time.sleep(_RETRY_S)
    if not address.strip().startswith("ray://"):
        _check_gcs(address, host, port, max(1.0, deadline - time.monotonic()))


def _check_gcs(address: str, host: str, port: int, timeout_s: float) -> None:
    """The port answers; is it a Ray GCS? (one gRPC call with a deadline)."""
    try:
        import grpc
        from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc
    except ImportError:  # pragma: no cover - ray[default] ships both
        return
    channel = grpc.insecure_channel(f"{host}:{port}")
    try:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        stub.GetClusterId(gcs_service_pb2.GetClusterIdRequest(), timeout=timeout_s)  # type: ignore[attr-defined]
    except grpc.RpcError as exc:
        code = exc.code() if hasattr(exc, "code") else None
        if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
            return  # a GCS that wants a token: ray.init will say so
        name = code.name if code is not None else type(exc).__name__
        raise TransportError(f"cannot join Ray at {address}: it answers, but not as a Ray head node "
                             f"(GCS call failed: {name}); check --address / transport.address") from None
    finally:
        channel.close()
