"""Ray transport: each host group is one long-lived Ray actor holding its nodes for the whole run.

Without ``address`` a local Ray is started (``RAY_AUTH_MODE=disabled``, temp dir under the run
directory, ``num_cpus`` = the machine's cores) and shut down at the end; with ``address`` the
run joins an existing cluster (checked first, within ``transport.connect_timeout_s``) and
leaves it running. All host actors' resources are reserved at once first
(``vfl.runtime.transport.ray_placement.admit``): a request the cluster cannot meet is a one-line error
within ``transport.schedule_timeout_s``, not a hang. A dead actor becomes a ``PartyFailure`` naming its parties and the round;
``restart`` recreates dead actors for the engine's recovery.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from typing import Any

from vfl.core.errors import PartyFailure, TransportError, VFLError
from vfl.runtime.faults import FORWARD_ENV, FaultPlan
from vfl.runtime.host import NodeBuilder, NodeHost
from vfl.runtime.message import Wire
from vfl.runtime.transport.base import HostGroup, Outcome, Transport
from vfl.runtime.transport.ray_connect import probe
from vfl.runtime.transport.ray_errors import raise_ray_failure, ray_cause
from vfl.runtime.transport.ray_placement import admit
from vfl.runtime.transport.ray_reaper import Reaper
from vfl.runtime.transport.ray_teardown import end_monitor
from vfl.runtime.transport.socket.chain import Hops, SocketChain

_MAX_SOCKET_DIR = 40  # Ray adds ~65 chars (session_<date>_<pid>/sockets/plasma_store); unix sockets < 108

def _short_temp_dir(temp_dir: str | None) -> tuple[str, bool]:
    """(Ray's temp dir, whether it was made here): ``temp_dir`` itself when its socket paths fit,
    else a fresh ``vflray-*`` folder (with a ``<temp_dir>.path`` pointer to it)."""
    if temp_dir and len(os.path.abspath(temp_dir)) <= _MAX_SOCKET_DIR:
        os.makedirs(temp_dir, exist_ok=True)
        return os.path.abspath(temp_dir), False
    path = tempfile.mkdtemp(prefix="vflray-")
    if temp_dir:  # leave a pointer where the user expects the temp dir
        os.makedirs(os.path.dirname(os.path.abspath(temp_dir)) or ".", exist_ok=True)
        with open(os.path.abspath(temp_dir) + ".path", "w") as f:
            f.write(path + "\n")
    return path, True


class RayTransport(Transport):
    kind = "ray"

    def __init__(self, *, address: str | None = None, temp_dir: str | None = None,
                 num_cpus: int | None = None, connect_timeout_s: float = 30.0,
                 schedule_timeout_s: float = 60.0, timeout_s: float = 1800.0) -> None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import ray

        self._ray = ray
        self.address = address
        self.owns_ray = False
        self.reaper: Reaper | None = None
        self.actors: dict[str, Any] = {}
        self.groups: dict[str, HostGroup] = {}
        self._build: NodeBuilder | None = None
        self._threads = 1
        self._remote_host: Any = None
        self.schedule_timeout_s = schedule_timeout_s
        self.timeout_s = timeout_s  # transport.timeout_s: every unguarded ray.get gives up after this
        self._socket_chains: dict[Hops, SocketChain] = {}  # hop chains over TCP (transport.data_plane: socket),
        # dropped when an actor changes
        self._made_temp: str | None = None  # a vflray-* folder this transport made: removed at shutdown
        if ray.is_initialized():
            return
        if address:
            probe(address, timeout_s=connect_timeout_s)
            try:
                ray.init(address=address, log_to_driver=True, configure_logging=False)
            except Exception as exc:  # any failure to join is this one-line error
                raise TransportError(f"cannot join Ray at {address}: {str(exc).splitlines()[0]}") from None
        else:
            self.reaper = Reaper()  # ends Ray's agents if this driver is SIGKILLed
            ray_temp, made = _short_temp_dir(temp_dir)
            self._made_temp = ray_temp if made else None
            try:
                ray.init(num_cpus=num_cpus or os.cpu_count() or 2, _temp_dir=ray_temp, include_dashboard=False,
                         log_to_driver=True, configure_logging=False)
            except Exception as exc:  # e.g. its start-up timeout on a loaded machine: one line, nothing left behind
                try:
                    ray.shutdown()  # whatever part of it had started
                except Exception:  # noqa: BLE001 - nothing more to end
                    pass
                self.reaper.reap_now()
                self.reaper = None
                self.shutdown()
                raise TransportError(f"cannot start a local Ray: {type(exc).__name__}: "
                                     f"{(str(exc).strip().splitlines() or [''])[0]}") from None
            self.owns_ray = True
            self.reaper.watch_descendants()

    def start(self, groups: Sequence[HostGroup], build: NodeBuilder, *, threads: int = 1) -> None:
        self._build, self._threads = build, threads
        FaultPlan.from_env()  # a bad VFL_FAULT_INJECT is one line here, before any actor starts
        admit(self._ray, groups, timeout_s=self.schedule_timeout_s)  # all resources or one line, no hang
        try:
            for g in groups:
                self.groups[g.name] = g
                self.actors[g.name] = self._spawn(g)
            # Wait until every actor has built its nodes (data loaded, models created).
            self._get({name: actor.ready.remote() for name, actor in self.actors.items()}, round="setup")
        except BaseException:
            self._release()  # a host that cannot start leaves no actor behind
            raise
        if self.reaper is not None:
            self.reaper.watch_descendants()

    def _spawn(self, g: HostGroup) -> Any:
        if self._remote_host is None:
            self._remote_host = self._ray.remote(NodeHost)
        env = {k: os.environ[k] for k in FORWARD_ENV if os.environ.get(k)}  # fault injection, profile counters
        extra: dict[str, Any] = {"runtime_env": {"env_vars": env}} if env else {}
        return self._remote_host.options(num_cpus=g.num_cpus, num_gpus=g.num_gpus, max_restarts=0,
                                         max_concurrency=1, **extra).remote(self._build, g.specs, self._threads)

    def _subset(self, group: str, states: dict[int, bytes]) -> dict[int, bytes]:
        ids = set(self.groups[group].node_ids)
        return {k: v for k, v in states.items() if k in ids}

    def restart(self, states: dict[int, bytes], *, timeout_s: float = 120.0) -> list[tuple[int, int, str, str, int, int]]:
        ray = self._ray
        self.close_chains()  # a socket chain holds connections to the actors about to be reset or replaced
        rows: list[tuple[int, int, str, str, int, int]] = []
        dead: list[str] = []
        futures = {n: a.reset.remote(self._subset(n, states)) for n, a in self.actors.items()}
        deadline = time.monotonic() + timeout_s  # one budget for all hosts: a hung one is dead after it
        for name, fut in futures.items():
            try:
                rows.extend(ray.get(fut, timeout=max(0.0, deadline - time.monotonic())))
            except ray.exceptions.RayTaskError as exc:
                cause = getattr(exc, "cause", None)
                if isinstance(cause, VFLError):
                    raise cause from None
                raise PartyFailure(self._names(name), "restart", f"{type(cause).__name__}: {cause}") from exc
            except ray.exceptions.RayError:  # dead, hung past the timeout, killed by the memory monitor: replace it
                dead.append(name)
        for name in dead:
            try:
                ray.kill(self.actors[name], no_restart=True)
            except Exception:  # already gone
                pass
            self.actors[name] = self._spawn(self.groups[name])
        if dead:
            self._get({n: self.actors[n].ready.remote() for n in dead}, round="restart")
            self._get({n: self.actors[n].set_state.remote(self._subset(n, states)) for n in dead}, round="restart")
            if self.reaper is not None:
                self.reaper.watch_descendants()
        return rows

    def _get(self, futures: dict[str, Any], *, round: str) -> dict[str, Any]:
        ray = self._ray
        out: dict[str, Any] = {}
        deadline = time.monotonic() + self.timeout_s
        for name, fut in futures.items():
            try:
                out[name] = ray.get(fut, timeout=max(0.0, deadline - time.monotonic()))
            except ray.exceptions.GetTimeoutError:  # name every host still busy: one may wait on another
                pending = [n for n, f in futures.items() if n not in out and not self._ray.wait([f], timeout=0)[0]]
                raise PartyFailure(", ".join(self._names(n) for n in pending or [name]), round,
                                   f"no answer within transport.timeout_s={self.timeout_s:g}") from None
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError, ray.exceptions.ActorDiedError) as exc:
                raise_ray_failure(ray, exc, round=round, culprit=self._names(name), dead=self._dead_names)
            except ray.exceptions.RayError as exc:  # the memory monitor's OutOfMemoryError, a worker crash, ...
                raise PartyFailure(self._dead_names() or self._names(name), round, ray_cause(exc)) from exc
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

    def ready(self, handles: dict[str, Any], *, timeout: float | None) -> set[str]:
        refs = {ref: name for name, ref in handles.items()}
        if not refs:
            return set()
        done, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=timeout, fetch_local=False)
        return {refs[ref] for ref in done}

    def outcome(self, handle: Any) -> Outcome:
        ray = self._ray
        try:
            return Outcome("ok", tuple(ray.get(handle)))
        except ray.exceptions.RayTaskError as exc:
            cause = getattr(exc, "cause", None)
            return Outcome("failed", error=cause if isinstance(cause, BaseException) else exc)
        except ray.exceptions.RayError as exc:  # a dead actor, the memory monitor, a worker crash
            return Outcome("failed", error=exc)

    def alive(self, group: str, timeout: float = 10.0) -> bool:
        if group not in self.actors:
            return False
        try:
            self._ray.get(self.actors[group].ready.remote(), timeout=timeout)
            return True
        except Exception:  # dead, or too busy to answer (a straggler): not alive for the round
            return False

    def remove(self, group: str) -> None:
        self.close_chains()
        actor = self.actors.pop(group, None)
        if actor is not None:
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # already dead
                pass

    def drain(self) -> list[tuple[int, int, str, str, int, int]]:
        rows = self._get({n: a.drain_outbox.remote() for n, a in self.actors.items()}, round="drain")
        return [row for part in rows.values() for row in part]

    def get_state(self) -> dict[int, bytes]:
        states: dict[int, bytes] = {}
        for part in self._get({n: a.get_state.remote() for n, a in self.actors.items()}, round="checkpoint").values():
            states.update(part)
        return states

    def set_state(self, states: dict[int, bytes]) -> None:
        futures = {n: a.set_state.remote(self._subset(n, states)) for n, a in self.actors.items()}
        self._get(futures, round="resume")

    def call(self, group: str, node_id: int, method: str, *args: Any, **kwargs: Any) -> Any:
        return self._get({group: self.actors[group].call.remote(node_id, method, *args, **kwargs)},
                         round="control")[group]

    def call_all(self, calls: Sequence[tuple[str, int, str]]) -> list[Any]:
        """Every call submitted before the first is awaited: the hosts answer concurrently (a party's
        first ``release_report`` imports scipy and dp_accounting, ~0.9 CPU s: serially that was 4x)."""
        futures = [(group, self.actors[group].call.remote(node_id, method)) for group, node_id, method in calls]
        return [self._get({group: fut}, round="control")[group] for group, fut in futures]

    def views(self) -> dict[int, dict[str, Any]]:
        parts = self._get({n: a.drain_views.remote() for n, a in self.actors.items()}, round="control")
        return {nid: v for part in parts.values() for nid, v in part.items()}

    def host_call(self, group: str, method: str, *args: Any) -> Any:
        return self._get({group: getattr(self.actors[group], method).remote(*args)}, round="control")[group]

    def kill(self, group: str) -> None:
        """Kill one host actor (fault injection in tests and demos)."""
        self._ray.kill(self.actors[group], no_restart=True)

    def socket_chain(self, hops: Hops) -> SocketChain:
        """The socket chain for ``hops`` (set up on first use, kept until an actor changes)."""
        chain = self._socket_chains.get(hops)
        if chain is None:
            unknown = sorted({h for hop in hops for h in hop} - set(self.actors))
            if unknown:
                raise PartyFailure(", ".join(unknown), "chain", "no such host actor")
            chain = SocketChain(self._ray, self.actors, hops, names=self._names, dead=self._dead_names)
            self._socket_chains[hops] = chain
        return chain

    def close_chains(self) -> None:
        """Tear down every socket chain (before actors are reset, replaced, removed or killed)."""
        chains = list(self._socket_chains.values())
        self._socket_chains = {}
        for chain in chains:
            chain.close()

    def _release(self) -> None:
        """Kill every host actor (their resources go back to the cluster)."""
        self.close_chains()
        for actor in self.actors.values():
            try:
                self._ray.kill(actor, no_restart=True)
            except Exception:  # already dead
                pass
        self.actors.clear()

    def shutdown(self) -> None:
        self._release()
        if self.owns_ray and self._ray.is_initialized():
            end_monitor()  # else ray.shutdown waits 1 s for it (vfl.runtime.transport.ray_teardown)
            self._ray.shutdown()
            self.owns_ray = False
        if self.reaper is not None:
            self.reaper.stand_down()
            self.reaper = None
        if self._made_temp is not None and not self._ray.is_initialized():
            shutil.rmtree(self._made_temp, ignore_errors=True)  # Ray's session files: none left in /tmp
            self._made_temp = None
