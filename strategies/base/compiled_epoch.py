"""The vertical training loop over a Ray Compiled Graph (``transport.compiled_graph``).

Every step of a vertical round is the same hop chain, the round's ``RoundPlan``
(``parties/vertical/round_plan.py``): parties -> server (-> parties -> server per secure-aggregation
exchange) -> parties. Compiled once (``vfl.runtime.fast.ray_chain``), a step is
one write and one read of shared-memory channels instead of a task per hop; the hosts run the
same ``deliver_piped`` and log the same outbox rows, so messages, bytes and results equal the
task path's (``tests/ray/test_compiled_graph.py``). The driver waits for every step (the
next step's input is this step's output), and a failure is a PartyFailure for the engine:
``train.on_dropout: skip-party`` needs the task path's per-hop handles, so it never compiles.
"""

from __future__ import annotations

from typing import Any

from parties.secagg.plan import plan_for_hops
from parties.vertical.round_plan import RoundPlan
from strategies.base.compiled_auto import SOCKET, TASK, LazyChain, PathChoice
from vfl.core.errors import ProtocolError
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import Progress
from vfl.runtime.grid import Grid
from vfl.runtime.message import Wire, round_tag

MIN_AUTO_STEPS = 2000  # compiled_graph: auto (the default) probes runs with at least this many training steps


def compiled_chain(grid: Grid, cfg: RunConfig, *, server: str, steps: int, plan: RoundPlan | None = None,
                   unmask_hops: int = 0, choice: PathChoice | None = None) -> Any:
    """The chain for one training step (the hops of ``plan``; ``unmask_hops`` names the training
    plan with that many SecAgg exchanges), or None where the task path is used: ``off``, the
    in-process transport, ``on_dropout: skip-party``, ``auto`` on a run shorter than
    ``MIN_AUTO_STEPS`` steps (compiling costs seconds once: a proxy actor is started), or ``auto``
    once ``choice`` (``strategies.base.compiled_auto``) measured the task path faster. With
    ``transport.data_plane: socket`` the chain runs over TCP between the hosts instead
    (``vfl.runtime.fast.socket_chain``; on_dropout: fail only), whatever the run's length."""
    mode = cfg.transport.compiled_graph
    if cfg.transport.data_plane == "socket" and cfg.train.on_dropout == "fail":  # no compile cost: any run length
        plan = plan if plan is not None else plan_for_hops(unmask_hops)
        chain = grid.socket_chain(plan.targets(server=server, parties=tuple(grid.party_groups)))
        if choice is not None:
            choice.decide_without_probe(SOCKET if chain is not None else TASK, "transport.data_plane: socket")
        return chain
    if mode == "off" or cfg.train.on_dropout != "fail":
        if choice is not None:
            choice.decide_without_probe(TASK, "off" if mode == "off" else "train.on_dropout: skip-party")
        return None
    if mode == "auto" and steps * cfg.train.epochs < MIN_AUTO_STEPS:
        if choice is not None:
            choice.decide_without_probe(TASK, f"short run: < {MIN_AUTO_STEPS} training steps")
        return None
    if choice is not None and choice.chosen == TASK:
        return None
    plan = plan if plan is not None else plan_for_hops(unmask_hops)
    hops = plan.targets(server=server, parties=tuple(grid.party_groups))
    if choice is None:
        return grid.chain(hops)
    chain = LazyChain(grid, hops, choice)  # while probing: compiled after the task blocks
    return chain if choice.chosen is None else chain.build()


def train_epoch_compiled(grid: Grid, chain: Any, *, start: Wire, epoch: int, steps: int, sync_every: int,
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
