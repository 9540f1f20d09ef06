"""The vertical training loop over the socket data plane (``transport.data_plane: socket``).

Every step of a vertical round is the same hop chain, the round's ``RoundPlan``
(``parties/vertical/round_plan.py``): parties -> server (-> parties -> server per secure-aggregation
exchange) -> parties. Set up once as a chain of TCP connections between the host actors
(``vfl.runtime.transport.socket.chain``), a step is one frame per edge instead of a Ray task per hop; the
hosts run the same ``deliver_piped`` and log the same outbox rows, so messages, bytes and results
equal the task path's (``tests/ray/test_socket_chain_ray.py``). The driver waits for every step (the
next step's input is this step's output), and a failure is a PartyFailure for the engine:
``train.on_dropout: skip-party`` needs the task path's per-hop handles, so it never chains.
"""

from __future__ import annotations

from typing import Any

from parties.vertical.round_plan import RoundPlan
from vfl.core.errors import ProtocolError
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress
from vfl.runtime.grid import Grid
from vfl.runtime.message import Wire, round_tag

TASK, SOCKET = "task", "socket"  # the training step's data plane, as the summary names it


def data_plane(cfg: RunConfig) -> str:
    """The plane a vertical training step takes: ``socket`` where ``transport.data_plane: socket`` applies
    (Ray, ``train.on_dropout: fail``; the config refuses it elsewhere), else Ray tasks (or in-process calls)."""
    return SOCKET if cfg.transport.data_plane == "socket" and cfg.train.on_dropout == "fail" else TASK


def plane_summary(cfg: RunConfig) -> dict[str, Any]:
    """``compiled_graph_choice`` for the summary of a vertical run: which plane the step took and why (the
    key's name predates the removal of the compiled graph; docs/performance.md)."""
    chosen = data_plane(cfg)
    if chosen == SOCKET:
        reason = "transport.data_plane: socket"
    elif cfg.transport.kind != "ray":
        reason = f"transport.kind: {cfg.transport.kind}"
    else:
        reason = "train.on_dropout: skip-party" if cfg.transport.data_plane == "socket" else "transport.data_plane: ray"
    return {"compiled_graph_choice": {"chosen": chosen, "reason": reason}}


def socket_chain(grid: Grid, cfg: RunConfig, *, server: str, plan: RoundPlan) -> Any:
    """The chain for one training step (the hops of ``plan``), or None where the task path is used."""
    if data_plane(cfg) != SOCKET:
        return None
    return grid.socket_chain(plan.targets(server=server, parties=tuple(grid.party_groups)))


def train_epoch_chained(grid: Grid, chain: Any, *, start: Wire, epoch: int, steps: int, sync_every: int,
                        timeout_s: float, progress: Progress) -> None:
    """One epoch: the start broadcast by the task path, then ``steps`` runs of the chain, each
    fed the parties' replies of the step before. Every wire is counted by ``grid.drain``."""
    ups = grid.collect(grid.submit([[start]], to=grid.party_groups), round=round_tag(epoch, 0))
    done = 0
    for step in range(steps):
        ups = chain.run(ups, round=round_tag(epoch, step), timeout_s=timeout_s)
        if (step + 1) % sync_every == 0 or step == steps - 1:
            progress(step + 1 - done)
            done = step + 1
    grid.drain()
    if ups:
        raise ProtocolError(f"parties sent {len(ups)} messages after the last step of epoch {epoch}")
