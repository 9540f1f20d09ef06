"""The socket data plane is plain TCP: with Ray's TLS switched on it is refused, not silently unencrypted."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401  (registers the strategies the default config names)
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config


@pytest.mark.parametrize("value", ["1", "true", "TRUE"])
def test_socket_is_refused_with_ray_tls(monkeypatch, value):
    monkeypatch.setenv("RAY_USE_TLS", value)
    with pytest.raises(ConfigError, match="transport.data_plane: got 'socket' with RAY_USE_TLS=1"):
        load_run_config({"transport": {"kind": "ray", "data_plane": "socket"}})
    assert load_run_config({"transport": {"kind": "ray"}}).transport.data_plane == "ray"  # Ray's own path is fine


def test_socket_is_allowed_without_ray_tls(monkeypatch):
    monkeypatch.setenv("RAY_USE_TLS", "0")
    assert load_run_config({"transport": {"kind": "ray", "data_plane": "socket"}}).transport.data_plane == "socket"
