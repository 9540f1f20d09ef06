"""Transports behind one interface: ``inprocess`` (tests, debugging) and ``ray`` (the product path)."""

from vfl.runtime.transport.base import HostGroup, Transport
from vfl.runtime.transport.factory import make_transport

__all__ = ["HostGroup", "Transport", "make_transport"]
