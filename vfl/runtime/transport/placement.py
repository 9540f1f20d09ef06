"""Actor placement: how the runtime packs the nodes a strategy declares into hosts (actors).

A strategy only declares its nodes (``Strategy.layout``); how many processes run them is a
runtime decision made here from ``transport.*``: every server-side node gets a host of its own
(it is the hot spot of every round), the parties are packed into at most ``transport.max_actors``
hosts (or ``transport.parties_per_actor`` each), so M=100 parties do not cost 100 actors. What
each actor reserves comes from its profile (``vfl.config.resources``: ``transport.resources.<profile>``, else
``transport.cpus_per_actor``/``gpus_per_actor``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from vfl.config.resources import actor_resources, profile_of
from vfl.runtime.node import NodeSpec
from vfl.runtime.transport.base import HostGroup


def pack_nodes(specs: Sequence[NodeSpec], *, max_actors: int, parties_per_actor: int = 0,
               cpus_per_actor: float = 0.1, gpus_per_actor: float = 0.0, transport: Any = None,
               server_profile: str = "server") -> list[HostGroup]:
    """Pack ``specs`` into host groups.

    Args:
        specs: every node of the run, as the strategy declared them.
        max_actors: the most hosts the parties may use (ignored when ``parties_per_actor`` is set).
        parties_per_actor: parties per host; 0 spreads them evenly over ``max_actors`` hosts.
        cpus_per_actor, gpus_per_actor: what each host reserves (Ray resources) when ``transport``
            is None; else ``transport.resources.<profile>`` and ``transport.*_per_actor`` decide.
        transport: the run's transport config (per-profile resources, ``vfl.config.resources``).
        server_profile: the resource profile of server-side nodes (``server`` or ``model_server``).

    Returns:
        One group per server-side node (named after it), then ``parties-0``, ``parties-1``, ...
        in the declared party order. A group holds one profile only.
    """
    if transport is None:
        transport = SimpleNamespace(cpus_per_actor=cpus_per_actor, gpus_per_actor=gpus_per_actor, resources=None)

    def group(name: str, members: Sequence[NodeSpec]) -> HostGroup:
        res = actor_resources(transport, [profile_of(s, server_profile=server_profile) for s in members])
        return HostGroup(name, tuple(members), res.cpus, res.gpus, (res.cpu_key, res.gpu_key))

    groups = [group(s.name, (s,)) for s in specs if s.is_server]
    parties = [s for s in specs if not s.is_server]
    if parties:
        per = parties_per_actor or math.ceil(len(parties) / min(len(parties), max_actors))
        for i in range(0, len(parties), per):
            groups.append(group(f"parties-{i // per}", parties[i : i + per]))
    return groups


def auto_max_actors(cpus: int | None) -> int:
    """``transport.max_actors: 0``: two party actors per core (one computes while another waits on its
    messages), at most 8. Each host actor is a process of ~0.9 GiB (torch, flwr, Ray's worker); on 2
    cores 8 party actors ran no faster than 4 and cost 3.4 GiB more at M=100 (docs/performance.md)."""
    return max(1, min(8, 2 * (cpus or 1)))


def place(specs: Sequence[NodeSpec], transport: Any, *, server_profile: str = "server") -> list[HostGroup]:
    """``pack_nodes`` with the run's ``transport`` config (``max_actors``, 0 = ``auto_max_actors`` of this
    machine's cores; ``parties_per_actor``, ``cpus_per_actor``, ``gpus_per_actor``, ``resources``: Ray then
    sets each actor's CUDA_VISIBLE_DEVICES)."""
    max_actors = transport.max_actors or auto_max_actors(os.cpu_count())
    return pack_nodes(specs, max_actors=max_actors, parties_per_actor=transport.parties_per_actor,
                      transport=transport, server_profile=server_profile)
