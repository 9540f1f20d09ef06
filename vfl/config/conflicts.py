"""Options that contradict each other or mean nothing together: refused with one line, or one
warning saying which wins. Decided here once (``vfl.engine.schema.load_run_config`` calls ``check_conflicts``;
the run's preflight calls ``check_machine`` for what depends on this machine); listed in docs/usage.md.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

from vfl.core.errors import ConfigError
from vfl.core.logs import get_logger

log = get_logger(__name__)
ROLES = ("server", "party", "model_server")
_warned: set[str] = set()  # warnings given once per process (a config is checked again on its way to a run)


def check_conflicts(cfg: Any) -> None:
    """Refuse pairs of keys that cannot both hold (config only; same answer on every machine)."""
    t, p = cfg.transport, cfg.privacy
    if t.kind == "inprocess" and t.address:
        raise ConfigError("transport.address", f"got {t.address!r} with transport.kind: inprocess (an address is "
                          "a Ray cluster's); drop --address/transport.address or use --transport ray")
    if t.compiled_graph == "on" and "compiled_graph" not in _warned:
        _warned.add("compiled_graph")
        log.warning("transport.compiled_graph: 'on' no longer compiles the step (the Ray Compiled Graph was removed: "
                    "the socket data plane was faster wherever both were measured, docs/performance.md); the step "
                    "goes over transport.data_plane: %s (socket: the fast step over Ray)", t.data_plane)
    if t.data_plane == "socket" and (t.kind == "inprocess" or cfg.train.on_dropout == "skip-party"):
        got = ("transport.kind: inprocess (the socket data plane joins Ray actors)" if t.kind == "inprocess" else
               "train.on_dropout: skip-party (a socket step cannot lose a party)")
        raise ConfigError("transport.data_plane", f"got 'socket' with {got}; allowed there: ray")
    if t.data_plane == "socket" and os.environ.get("RAY_USE_TLS", "0").strip().lower() in ("1", "true"):
        raise ConfigError("transport.data_plane", "got 'socket' with RAY_USE_TLS=1: the socket data plane is plain "
                          "TCP (each wire authenticated, none encrypted) and Ray's TLS does not cover it; allowed "
                          "with Ray TLS: ray")
    if p.max_epoch_attempts is not None and p.max_epoch_attempts < cfg.train.epochs:
        raise ConfigError("privacy.max_epoch_attempts", f"got {p.max_epoch_attempts} below train.epochs "
                          f"{cfg.train.epochs} (an honest run releases each training sample once per epoch: the "
                          f"parties would refuse its last epochs); allowed: >= {cfg.train.epochs}, or null")
    if p.target_epsilon is not None and p.epsilon_budget is not None and p.epsilon_budget < p.target_epsilon:
        raise ConfigError("privacy.epsilon_budget", f"got {p.epsilon_budget} below privacy.target_epsilon "
                          f"{p.target_epsilon} (the run would stop before its last epoch); allowed: >= "
                          f"{p.target_epsilon}, or no budget")


def warn_overridden(before: Any, after: Any, *, given: Mapping[str, Any]) -> list[str]:
    """``privacy.target_epsilon`` wins over a ``params`` value the config gave explicitly: one
    warning per replaced key (none when the given value already is the calibrated one, e.g. on resume)."""
    out: list[str] = []
    if not dataclasses.is_dataclass(before.params):
        return out
    for f in dataclasses.fields(before.params):
        old, new = getattr(before.params, f.name), getattr(after.params, f.name)
        if f.name not in given or old == new:
            continue
        if isinstance(old, float) and isinstance(new, float) and math.isclose(old, new, rel_tol=1e-9):
            continue
        msg = (f"privacy.target_epsilon={after.privacy.target_epsilon} wins over params.{f.name}={old!r} given "
               f"in the config: the run uses params.{f.name}={new!r} (calibrated); drop one of the two to silence this")
        log.warning("%s", msg)
        out.append(msg)
    return out


def _gpu_keys(t: Any) -> list[tuple[str, float]]:
    keys = [("transport.gpus_per_actor", float(t.gpus_per_actor))]
    keys += [(f"transport.resources.{r}.gpus", float(g)) for r in ROLES
             if (g := getattr(getattr(t.resources, r, None), "gpus", None))]
    return [(k, g) for k, g in keys if g > 0]


def check_machine(cfg: Any, *, cpus: int | None = None, cuda_devices: int | None = None) -> None:
    """What this machine cannot give a local run (no ``transport.address``: a cluster's nodes are
    not this machine): more torch threads than CPU cores, GPUs it does not have. GPU reservations
    in-process (no actors) are a warning: ``train.device`` alone picks the device there."""
    t = cfg.transport
    if t.address:
        return
    cores = cpus if cpus is not None else (os.cpu_count() or 1)
    for key, n in (("train.threads_per_actor", cfg.train.threads_per_actor),
                   ("train.driver_threads", getattr(cfg.train, "driver_threads", None))):
        if n is not None and n > cores:
            raise ConfigError(key, f"got {n} but this machine has {cores} CPU cores (more torch threads than "
                              f"cores only contend); allowed here: 1..{cores}")
    gpus = _gpu_keys(t)
    if not gpus:
        return
    key, amount = gpus[0]
    if t.kind == "inprocess":
        log.warning("%s", f"{key}={amount:g} has no effect in-process (no actors reserve GPUs); train.device "
                    f"({cfg.train.device!r}) alone picks the device")
        return
    if cuda_devices is None:
        import torch

        cuda_devices = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if cuda_devices == 0:
        raise ConfigError(key, f"got {amount:g} but this machine has no GPU (a local Ray cluster could never "
                          "place the actors); allowed here: 0, or join a cluster with GPUs (--address)")
