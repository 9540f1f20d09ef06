"""Where a Ray run's memory goes: every process of the run (driver, host actors, Ray's own daemons
and agents, the reaper) with its RSS, USS and PSS.

RSS counts pages shared between processes (torch's libraries, mapped once by the kernel) once per
process; USS is what each process alone holds (freed if it exits); PSS splits shared pages among
the processes sharing them, so summed PSS is what the run costs the machine. The issue's target is
summed RSS of the driver and the host actors (``rss_gib``); USS/PSS and the whole session are
reported beside it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import psutil

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class ProcMem:
    pid: int
    role: str  # driver | actor:<group> | gcs_server | raylet | ray:<what> | worker | other
    rss: int
    uss: int
    pss: int

    @property
    def is_run(self) -> bool:
        """Counted in ``rss_gib``: the driver and the host actors."""
        return self.role == "driver" or self.role.startswith("actor:")


def role_of(*, pid: int, name: str, cmdline: str, driver: int, actors: dict[int, str]) -> str:
    """A short label for one process of the session (from its pid, name and command line)."""
    if pid == driver:
        return "driver"
    if pid in actors:
        return f"actor:{actors[pid]}"
    if name in ("gcs_server", "raylet"):
        return name
    if "ray_reaper" in cmdline:
        return "vfl:reaper"
    for key, label in (("dashboard/agent", "ray:dashboard_agent"), ("DashboardAgent", "ray:dashboard_agent"),
                       ("RuntimeEnvAgent", "ray:runtime_env_agent"), ("runtime_env/agent", "ray:runtime_env_agent"),
                       ("dashboard.py", "ray:dashboard"), ("log_monitor", "ray:log_monitor"),
                       ("monitor.py", "ray:autoscaler_monitor"), ("default_worker", "ray:idle_worker")):
        if key in cmdline:
            return label
    if name.startswith("ray::"):
        return "ray:idle_worker" if name == "ray::IDLE" else f"ray:{name[5:]}"
    return "other"


def session_processes(actors: dict[int, str]) -> list[ProcMem]:
    """This driver and every process it started (Ray's head processes, agents, actors, the reaper);
    ``actors``: host actor pid -> group name. Processes that exit while being read are skipped."""
    me = psutil.Process()
    procs = {p.pid: p for p in [me, *me.children(recursive=True)]}
    for pid in actors:  # an actor on a node this driver did not start is still the run's
        if pid not in procs and psutil.pid_exists(pid):
            procs[pid] = psutil.Process(pid)
    out = []
    for p in procs.values():
        try:
            info = p.memory_full_info()
            role = role_of(pid=p.pid, name=p.name(), cmdline=" ".join(p.cmdline()), driver=me.pid, actors=actors)
        except psutil.Error:
            continue
        out.append(ProcMem(p.pid, role, info.rss, info.uss, getattr(info, "pss", info.uss)))
    return out


def summarize(procs: Iterable[ProcMem]) -> dict[str, Any]:
    """GiB summed over the run's processes (driver + actors: ``rss_gib``, ``uss_gib``, ``pss_gib``) and
    over the whole session (``session_*``), and MiB per role (actors of one kind summed, with a count)."""
    procs = list(procs)
    run = [p for p in procs if p.is_run]
    roles: dict[str, dict[str, float]] = {}
    for p in procs:
        key = "actor" if p.role.startswith("actor:") else p.role
        r = roles.setdefault(key, {"count": 0, "rss_mib": 0.0, "uss_mib": 0.0, "pss_mib": 0.0})
        r["count"] += 1
        r["rss_mib"] += p.rss / MIB
        r["uss_mib"] += p.uss / MIB
        r["pss_mib"] += p.pss / MIB
    return {
        "rss_gib": sum(p.rss for p in run) / GIB,
        "uss_gib": sum(p.uss for p in run) / GIB,
        "pss_gib": sum(p.pss for p in run) / GIB,
        "session_rss_gib": sum(p.rss for p in procs) / GIB,
        "session_uss_gib": sum(p.uss for p in procs) / GIB,
        "session_pss_gib": sum(p.pss for p in procs) / GIB,
        "by_role_mib": {k: {n: round(v, 1) for n, v in r.items()} for k, r in sorted(roles.items())},
    }


def table(summary: dict[str, Any]) -> str:
    """The per-role table printed by ``overhead --scaling``."""
    lines = [f"{'process':<26} {'count':>5} {'rss_mib':>9} {'uss_mib':>9} {'pss_mib':>9}"]
    for role, r in summary["by_role_mib"].items():
        lines.append(f"{role:<26} {int(r['count']):>5} {r['rss_mib']:>9.0f} {r['uss_mib']:>9.0f} {r['pss_mib']:>9.0f}")
    lines.append(f"{'driver+actors (GiB)':<26} {'':>5} {summary['rss_gib']:>9.3f} {summary['uss_gib']:>9.3f} "
                 f"{summary['pss_gib']:>9.3f}")
    lines.append(f"{'whole session (GiB)':<26} {'':>5} {summary['session_rss_gib']:>9.3f} "
                 f"{summary['session_uss_gib']:>9.3f} {summary['session_pss_gib']:>9.3f}")
    return "\n".join(lines)
