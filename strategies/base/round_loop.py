"""One training step on the task path, hop by hop as the round's ``RoundPlan`` declares it: the one
step loop the pipelined epoch (``strategies.base.vertical``) and the ``auto`` probe's task blocks share."""

from __future__ import annotations

from typing import Any

from parties.vertical.round_plan import SERVER, RoundPlan
from strategies.base.dropout import Dropouts
from vfl.runtime.grid import Grid


def task_step(grid: Grid, guard: Dropouts, parts: list[Any], *, step: int, plan: RoundPlan,
              server: str) -> dict[str, Any]:
    """Submit step ``step``'s hops without waiting, each fed the previous hop's handles (``parts``:
    the parties' replies to the forward of ``step``); returns the last hop's handles."""
    handles: dict[str, Any] = {}
    for hop in plan.hops:
        to = [server] if hop.dst == SERVER else grid.party_groups
        handles = guard.hop(step + 1 if hop.next_step else step, grid.submit(parts, to=to))
        parts = list(handles.values())
    return handles
