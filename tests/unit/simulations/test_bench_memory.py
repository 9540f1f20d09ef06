"""The per-process memory table of ``overhead --scaling``: roles, sums, and the driver+actors subset."""

from __future__ import annotations

import psutil

from simulations.benchmarks.memory import (
    GIB,
    MIB,
    ProcMem,
    role_of,
    session_processes,
    summarize,
    table,
)
from simulations.benchmarks.two_node import abba, spread


def test_roles():
    actors = {11: "server", 12: "parties-0"}
    role = lambda pid, name="python", cmd="": role_of(pid=pid, name=name, cmdline=cmd, driver=10, actors=actors)  # noqa: E731
    assert role(10) == "driver"
    assert role(11) == "actor:server" and role(12) == "actor:parties-0"
    assert role(20, "raylet") == "raylet" and role(21, "gcs_server") == "gcs_server"
    assert role(22, cmd="python /x/vfl/transport/ray_reaper.py") == "vfl:reaper"
    assert role(23, cmd="python -u /x/ray/dashboard/agent.py --node-id=1") == "ray:dashboard_agent"
    assert role(24, cmd="python -u /x/ray/_private/log_monitor.py") == "ray:log_monitor"
    assert role(25, "ray::IDLE") == "ray:idle_worker"
    assert role(26, "bash") == "other"


def test_summarize_counts_driver_and_actors_in_rss_gib_and_everything_in_session():
    procs = [ProcMem(1, "driver", 800 * MIB, 500 * MIB, 520 * MIB),
             ProcMem(2, "actor:server", 900 * MIB, 450 * MIB, 480 * MIB),
             ProcMem(3, "actor:parties-0", 900 * MIB, 450 * MIB, 480 * MIB),
             ProcMem(4, "raylet", 30 * MIB, 28 * MIB, 28 * MIB)]
    s = summarize(procs)
    assert s["rss_gib"] == 2600 * MIB / GIB
    assert s["uss_gib"] == 1400 * MIB / GIB
    assert s["session_rss_gib"] == 2630 * MIB / GIB
    assert s["by_role_mib"]["actor"] == {"count": 2, "rss_mib": 1800.0, "uss_mib": 900.0, "pss_mib": 960.0}
    assert "raylet" in table(s) and "driver+actors" in table(s)


def test_session_processes_sees_this_driver():
    procs = session_processes({})
    me = [p for p in procs if p.pid == psutil.Process().pid]
    assert len(me) == 1 and me[0].role == "driver" and me[0].rss >= me[0].uss > 0


def test_spread_numbers_nodes_in_order_of_appearance():
    assert spread({"server": "aa", "parties-0": "bb", "parties-1": "aa"}) == {"server": 0, "parties-0": 1,
                                                                              "parties-1": 0}


def test_abba_alternates_the_order_of_the_topologies():
    assert abba(1) == [1, 2]
    assert abba(2) == [1, 2, 2, 1]
    assert abba(3) == [1, 2, 2, 1, 1, 2]
