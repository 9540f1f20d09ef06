"""Per-profile actor resources: ``transport.resources.{server,party,model_server}.{cpus,gpus}``.

Every node a strategy declares has a *resource profile*: ``party`` (a data holder), ``server`` (the
label holder of the vertical strategies) or ``model_server`` (the server-side node of the LLM
strategies: the vendor of SAP, the model servers of split-lora/p3eft/...). A profile's ``cpus`` or
``gpus``, when set, replaces ``transport.cpus_per_actor``/``gpus_per_actor`` for the actors holding
that profile. The packing (``vfl.runtime.transport.placement``) never mixes profiles in one actor (every
server-side node has an actor of its own, parties share actors only with parties); should an actor
ever hold several profiles, it reserves the largest amount per resource over its profiles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from vfl.config.fields import param

ROLES = ("server", "party", "model_server")
DEFAULT_KEYS = ("transport.cpus_per_actor", "transport.gpus_per_actor")


@dataclass(frozen=True)
class RoleResources:
    """What each actor holding one profile reserves (unset: the ``*_per_actor`` default)."""

    cpus: float | None = param(None, gt=0, le=64, help="Ray num_cpus of each actor of this profile")
    gpus: float | None = param(None, ge=0, le=64, help="Ray num_gpus of each actor of this profile "
                               "(fractions share a GPU)")


@dataclass(frozen=True)
class ResourcesConfig:
    """``transport.resources``: per-profile overrides of ``transport.cpus_per_actor``/``gpus_per_actor``."""

    server: RoleResources = dataclasses.field(default_factory=RoleResources,
                                              metadata={"help": "the label holder (vertical strategies)"})
    party: RoleResources = dataclasses.field(default_factory=RoleResources,
                                             metadata={"help": "every data-holding party"})
    model_server: RoleResources = dataclasses.field(default_factory=RoleResources,
                                                    metadata={"help": "server-side nodes of the LLM strategies "
                                                              "(SAP vendor, split-lora/p3eft servers)"})


@dataclass(frozen=True)
class ActorResources:
    """What one actor reserves, and the config keys the amounts came from (named in errors)."""

    cpus: float
    gpus: float
    cpu_key: str = DEFAULT_KEYS[0]
    gpu_key: str = DEFAULT_KEYS[1]


def profile_resources(transport: Any, profile: str) -> ActorResources:
    """The resources of one actor holding only ``profile`` under the ``transport`` config."""
    base_cpus = float(getattr(transport, "cpus_per_actor", 0.1))
    base_gpus = float(getattr(transport, "gpus_per_actor", 0.0))
    own = getattr(getattr(transport, "resources", None), profile, None)
    cpus, gpus = getattr(own, "cpus", None), getattr(own, "gpus", None)
    return ActorResources(
        cpus=base_cpus if cpus is None else float(cpus), gpus=base_gpus if gpus is None else float(gpus),
        cpu_key=DEFAULT_KEYS[0] if cpus is None else f"transport.resources.{profile}.cpus",
        gpu_key=DEFAULT_KEYS[1] if gpus is None else f"transport.resources.{profile}.gpus")


def actor_resources(transport: Any, profiles: Iterable[str]) -> ActorResources:
    """An actor holding nodes of several ``profiles`` reserves the most each profile asks, per resource."""
    options = [profile_resources(transport, p) for p in dict.fromkeys(profiles)] or [profile_resources(transport, "party")]
    cpu = max(options, key=lambda a: a.cpus)
    gpu = max(options, key=lambda a: a.gpus)
    return ActorResources(cpus=cpu.cpus, gpus=gpu.gpus, cpu_key=cpu.cpu_key, gpu_key=gpu.gpu_key)


def profile_of(spec: Any, *, server_profile: str = "server") -> str:
    """The resource profile of a node: ``party``, or the strategy's server profile for server-side nodes."""
    return server_profile if spec.is_server else "party"
