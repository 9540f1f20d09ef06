"""Ray transport: each host group is one long-lived Ray actor holding its nodes for the whole run.

Without ``address`` a local Ray is started (``RAY_AUTH_MODE=disabled``, temp dir under the run
directory, ``num_cpus`` = the machine's cores) and shut down at the end; with ``address`` the
run joins an existing cluster and leaves it running. A dead actor becomes a ``PartyFailure``
naming its parties and the round.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from typing import Any

from vfl.errors import PartyFailure, VFLError
from vfl.host import NodeBuilder, NodeHost
from vfl.message import Wire
from vfl.transport.base import HostGroup, Transport

_MAX_SOCKET_DIR = 40  # Ray adds ~65 chars (session_<date>_<pid>/sockets/plasma_store); unix sockets < 108


def _short_temp_dir(temp_dir: str | None) -> str:
    if temp_dir and len(os.path.abspath(temp_dir)) <= _MAX_SOCKET_DIR:
        os.makedirs(temp_dir, exist_ok=True)
        return os.path.abspath(temp_dir)
    path = tempfile.mkdtemp(prefix="vflray-")
    if temp_dir:  # leave a pointer where the user expects the temp dir
        os.makedirs(os.path.dirname(os.path.abspath(temp_dir)) or ".", exist_ok=True)
        with open(os.path.abspath(temp_dir) + ".path", "w") as f:
            f.write(path + "\n")
    return path


class RayTransport(Transport):
    kind = "ray"

    def __init__(self, *, address: str | None = None, temp_dir: str | None = None,
                 num_cpus: int | None = None) -> None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        self._ray = ray
        self.address = address
        self.owns_ray = False
        self.actors: dict[str, Any] = {}
        self.groups: dict[str, HostGroup] = {}
        if ray.is_initialized():
            return
        if address:
            ray.init(address=address, log_to_driver=True, configure_logging=False)
        else:
            ray.init(
                num_cpus=num_cpus or os.cpu_count() or 2,
                _temp_dir=_short_temp_dir(temp_dir),
                include_dashboard=False,
                log_to_driver=True,
                configure_logging=False,
            )
            self.owns_ray = True

    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        remote_host = self._ray.remote(NodeHost)
        for g in groups:
            self.groups[g.name] = g
            self.actors[g.name] = remote_host.options(
                num_cpus=g.num_cpus, num_gpus=g.num_gpus, max_restarts=0, max_concurrency=1
            ).remote(build, g.specs, threads)
        # Wait until every actor has built its nodes (data loaded, models created).
        self._get({name: actor.ready.remote() for name, actor in self.actors.items()}, round="setup")

    def _get(self, futures: dict[str, Any], *, round: str) -> dict[str, Any]:
        ray = self._ray
        out: dict[str, Any] = {}
        for name, fut in futures.items():
            try:
                out[name] = ray.get(fut)
            except ray.exceptions.RayTaskError as exc:
                cause = exc.cause if hasattr(exc, "cause") else None
                if isinstance(cause, VFLError):
                    raise cause from None
                dead = self._dead_names()  # a chained task also fails when an upstream actor died
                if dead:
                    raise PartyFailure(dead, round, "its Ray actor died") from exc
                raise PartyFailure(self._names(name), round, f"{type(cause).__name__ if cause else 'error'}: "
                                   f"{cause if cause else exc}") from exc
            except (ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as exc:
                raise PartyFailure(self._dead_names() or self._names(name), round, "its Ray actor died") from exc
        return out

    def _dead_names(self) -> str:
        """Which hosts are really dead (a chained task fails when any upstream actor died)."""
        dead = []
        for name, actor in self.actors.items():
            try:
                self._ray.get(actor.ready.remote(), timeout=30)
            except Exception:
                dead.append(self._names(name))
        return ", ".join(dead)

    def _names(self, group: str) -> str:
        return ", ".join(s.name for s in self.groups[group].specs)

    def deliver(self, batches: dict[str, list[Wire]], *, round: str) -> dict[str, list[Wire]]:
        futures = {name: self.actors[name].deliver.remote(wires) for name, wires in batches.items()}
        return self._get(futures, round=round)

    def submit(self, groups: Sequence[str], parts: Sequence[Any]) -> dict[str, Any]:
        # ObjectRefs as top-level arguments are resolved by Ray and moved actor to actor.
        return {name: self.actors[name].deliver_piped.remote(*parts) for name in groups}

    def collect(self, handles: dict[str, Any], *, round: str) -> dict[str, list[Wire]]:
        return self._get(handles, round=round)

    def drain(self) -> list[tuple[int, int, str, str, int, int]]:
        rows = self._get({n: a.drain_outbox.remote() for n, a in self.actors.items()}, round="drain")
        return [row for part in rows.values() for row in part]

    def get_state(self) -> dict[int, bytes]:
        states: dict[int, bytes] = {}
        for part in self._get({n: a.get_state.remote() for n, a in self.actors.items()}, round="checkpoint").values():
            states.update(part)
        return states

    def set_state(self, states: dict[int, bytes]) -> None:
        futures = {}
        for name, actor in self.actors.items():
            ids = set(self.groups[name].node_ids)
            futures[name] = actor.set_state.remote({k: v for k, v in states.items() if k in ids})
        self._get(futures, round="resume")

    def call(self, group: str, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._get({group: self.actors[group].call.remote(node_id, method, *args, **kwargs)},
                         round="control")[group]

    def host_call(self, group: str, method: str, *args: Any) -> Any:
        return self._get({group: getattr(self.actors[group], method).remote(*args)}, round="control")[group]

    def kill(self, group: str) -> None:
        """Kill one host actor (fault injection in tests and demos)."""
        self._ray.kill(self.actors[group], no_restart=True)

    def shutdown(self) -> None:
        for actor in self.actors.values():
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # already dead
                pass
        self.actors.clear()
        if self.owns_ray and self._ray.is_initialized():
            self._ray.shutdown()
            self.owns_ray = False
