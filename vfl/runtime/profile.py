"""Opt-in per-process cost accumulators for the overhead benchmark (``VFL_PROFILE=1``).

Off by default: ``start()`` returns 0.0 and ``stop`` returns at once, so the hot path pays one
global read. On, each category sums ``time.perf_counter`` seconds and a call count in this process
(a Ray actor reports its own through ``NodeHost.profile_counters``). Categories:

- ``build``: making flwr messages and raw arrays (``vfl.runtime.message.make``/``to_array``), inside nodes;
- ``mods``: the privacy mods applied to an outgoing embedding (PBM, LDP, SecAgg masks);
- ``serialize`` / ``deserialize``: flwr protobuf serde of a wire;
- ``auth``: authenticating and verifying wires (HMAC per unicast, Ed25519 per broadcast);
- ``handle``: a node's handler, end to end (compute = handle - build - mods).
"""

from __future__ import annotations

import os
import time
from collections import defaultdict

ENV = "VFL_PROFILE"
CATEGORIES = ("build", "mods", "serialize", "deserialize", "auth", "handle")

enabled = os.environ.get(ENV) == "1"
_seconds: dict[str, float] = defaultdict(float)
_calls: dict[str, int] = defaultdict(int)


def enable(on: bool = True) -> None:
    """Switch accumulation on/off in this process (actors follow ``VFL_PROFILE`` at import)."""
    global enabled
    enabled = on


def start() -> float:
    """A start mark (0.0 when profiling is off)."""
    return time.perf_counter() if enabled else 0.0


def stop(category: str, t0: float) -> None:
    """Add the time since ``t0`` to ``category`` (no-op when profiling is off)."""
    if enabled:
        _seconds[category] += time.perf_counter() - t0
        _calls[category] += 1


def counters() -> dict[str, dict[str, float]]:
    """``{category: {"s": seconds, "calls": n}}`` accumulated in this process since ``reset``."""
    return {k: {"s": _seconds[k], "calls": float(_calls[k])} for k in sorted(_seconds)}


def reset() -> None:
    _seconds.clear()
    _calls.clear()
