"""All actors of a run or none: an admission check with one Ray placement group before any actor starts.

Without it, an actor whose resources the cluster cannot give (``transport.gpus_per_actor=1`` on a
CPU-only cluster, more ``cpus_per_actor`` or ``transport.resources.<profile>.cpus`` than a node has) is queued forever and the run hangs on
its first call. Here the request is checked against the cluster's totals first (one line naming
the resource), then reserved as a whole within ``transport.schedule_timeout_s`` (one line naming
what was asked and what is free).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from vfl.config.resources import DEFAULT_KEYS
from vfl.core.errors import TransportError
from vfl.runtime.transport.base import HostGroup


def bundle_of(group: HostGroup) -> dict[str, float]:
    """The resources one host actor reserves (``num_cpus`` > 0 by the config's range)."""
    bundle = {"CPU": float(group.num_cpus)}
    if group.num_gpus > 0:
        bundle["GPU"] = float(group.num_gpus)
    return bundle


def check_fits(bundles: Sequence[dict[str, float]], names: Sequence[str], available: dict[str, float],
               keys: Sequence[tuple[str, str]] | None = None) -> None:
    """A TransportError naming the resource and its config key if one actor, or all of them
    together, ask for more than the cluster has in total (``available``: ``ray.cluster_resources()``;
    ``keys``: per actor, the config keys of its CPU and GPU amounts, default ``transport.*_per_actor``)."""
    keys = list(keys) if keys is not None else [DEFAULT_KEYS] * len(bundles)
    index = {"CPU": 0, "GPU": 1}
    for bundle, name, key in zip(bundles, names, keys, strict=True):
        for res, amount in bundle.items():
            if amount > available.get(res, 0.0):
                raise TransportError(f"actor {name} needs {res}={amount:g} ({key[index[res]]}) but the Ray cluster "
                                     f"has {res}={available.get(res, 0.0):g} in total")
    for res in ("CPU", "GPU"):
        total = sum(b.get(res, 0.0) for b in bundles)
        if total > available.get(res, 0.0) + 1e-9:
            named = " or ".join(dict.fromkeys(k[index[res]] for b, k in zip(bundles, keys, strict=True) if res in b))
            each = "each" if len(set(k[index[res]] for k in keys)) == 1 else "per actor"
            raise TransportError(f"{len(bundles)} actors need {res}={total:g} together ({named} {each}) but the "
                                 f"Ray cluster has {res}={available.get(res, 0.0):g}; lower {named} or "
                                 f"transport.max_actors")


def admit(ray: Any, groups: Sequence[HostGroup], *, timeout_s: float) -> None:
    """Reserve every host actor's resources at once (one placement group) within ``timeout_s``, then
    hand the reservation back so the actors start in it: a run either gets all its actors' resources
    or fails with one line, instead of queueing actors forever.

    The group is released at once rather than held for the run: a group outlives the actors it was
    made for (a killed actor frees its CPUs, a reserved bundle does not), and on a shared session
    cluster leftovers would starve later runs.
    """
    from ray.util.placement_group import placement_group, remove_placement_group

    bundles = [bundle_of(g) for g in groups]
    check_fits(bundles, [g.name for g in groups], ray.cluster_resources(), [g.keys for g in groups])
    group = placement_group(bundles, strategy="PACK")
    try:
        ray.get(group.ready(), timeout=timeout_s)
    except ray.exceptions.GetTimeoutError:
        asked = {r: sum(b.get(r, 0.0) for b in bundles) for r in ("CPU", "GPU")}
        free = {r: v for r, v in ray.available_resources().items() if r in ("CPU", "GPU")}
        raise TransportError(f"Ray could not reserve {len(bundles)} actors (CPU={asked['CPU']:g}, "
                             f"GPU={asked['GPU']:g}) within transport.schedule_timeout_s={timeout_s:g}; "
                             f"free now: {free}") from None
    finally:
        remove_placement_group(group)


def check_local_fit(groups: Sequence[HostGroup], *, cpus: float, gpus: float) -> None:
    """``vfl run --dry-run`` of a local Ray run: the actors must fit the cluster Ray would start here
    (this machine's ``cpus`` cores and ``gpus`` CUDA devices); the same one line ``admit`` would give
    at start-up, without starting Ray."""
    check_fits([bundle_of(g) for g in groups], [g.name for g in groups], {"CPU": float(cpus), "GPU": float(gpus)},
               [g.keys for g in groups])
