"""``transport.compiled_graph: auto``: time the task path and the compiled graph on the run's own
training steps and keep the faster one for the rest of the run.

Which path wins depends on the machine's load, the bottoms' width and M (a compiled graph's actors
wait on shared-memory channels; on a loaded machine that can cost more than the task hops it
saves), so no fixed rule picks right everywhere. At the run's start the driver times blocks of real
steps on the task path, then compiles the chain (its compile time reported apart) and times as
many on it, each path after an untimed warm-up block; the compiled graph is kept only if its median
ms per step beats the task path's by more than ``WIN_MARGIN``, otherwise it is torn down. Not
interleaved: while a compiled graph exists its actors wait on their channels, and under contention
that slowed the task path's blocks 2-14x in an interleaved probe, which then picked the graph.
Once the compiled path is ``DECISIVE`` times slower or faster, the probe stops early (under
contention a compiled step was 10-20x slower here: a full probe would have cost seconds). The probe's
steps are ordinary training steps: both paths deliver the same wires to the same hosts in the same
order, so losses, parameters, bytes and epsilon equal a run on either path
(``tests/engine/runtime/test_compiled_auto.py``). The choice and its timings are in the summary
(``compiled_graph_choice``).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from parties.vertical.round_plan import RoundPlan
from strategies.base.dropout import Dropouts
from strategies.base.round_loop import task_step
from vfl.engine.strategy import Progress
from vfl.runtime.grid import Grid
from vfl.runtime.message import Wire, round_tag

PROBE_BLOCK = 16  # steps per timed block (the task path syncs every 16 steps too: its real cost)
WARM_STEPS = 4  # untimed steps per path before the timed blocks (first tasks, the graph's first run)
PROBE_ROUNDS = 3  # timed blocks per path, interleaved task, compiled, task, ...
WIN_MARGIN = 0.05  # the compiled graph is kept only if >= 5 % faster per step (else: noise, keep tasks)
DECISIVE = 2.0  # one path this many times slower after a timed block each: decide at once (caps the probe's cost)
TASK, COMPILED = "task", "compiled"
SOCKET = "socket"  # transport.data_plane: socket (no probe: the chain over TCP is used throughout)


@dataclass
class PathChoice:
    """The probe's plan and what it measured; ``chosen`` is None while probing."""

    rounds: int = PROBE_ROUNDS
    block: int = PROBE_BLOCK
    warm: int = WARM_STEPS
    chosen: str | None = None
    reason: str = ""
    compile_s: float | None = None
    blocks: dict[str, list[float]] = field(default_factory=lambda: {TASK: [], COMPILED: []})
    _plan: list[tuple[str, int, bool]] = field(default_factory=list)
    _started: bool = False
    _partial: tuple[int, float] = (0, 0.0)  # steps and seconds of a block cut by the epoch's end

    def decide_without_probe(self, chosen: str, reason: str) -> None:
        """Settle on ``chosen`` without timing (the graph cannot be used, or the run is too short)."""
        if self.chosen is None:
            self.chosen, self.reason = chosen, reason

    def next_block(self) -> tuple[str, int, bool]:
        """(path, steps, timed) of the next probe block; call while ``chosen`` is None."""
        if not self._started:
            self._started = True
            self._plan = [(p, n, timed) for p in (TASK, COMPILED)  # tasks first: no graph alive yet
                          for n, timed in [(self.warm, False)] + [(self.block, True)] * self.rounds]
        return self._plan[0]

    def record(self, path: str, steps: int, seconds: float, *, planned: int, timed: bool) -> None:
        """Book a block that ran ``steps`` of its ``planned`` steps: one cut by the epoch's end goes
        on in the next epoch (its parts' times summed; the epoch's start broadcast is not timed)."""
        left = planned - steps
        done, spent = self._partial[0] + steps, self._partial[1] + seconds
        if left > 0:
            self._plan[0], self._partial = (path, left, timed), (done, spent)
            return
        self._partial = (0, 0.0)
        if timed:
            self.blocks[path].append(spent / done * 1e3)
        self._plan.pop(0)
        if not self._plan or self._decisive():
            self._decide()

    def _decisive(self) -> bool:
        """Both paths timed and one ``DECISIVE`` times the other: more blocks would only cost time."""
        task, compiled = self.blocks[TASK], self.blocks[COMPILED]
        if not (task and compiled):
            return False
        ratio = statistics.median(compiled) / statistics.median(task)
        return ratio >= DECISIVE or ratio <= 1 / DECISIVE

    def _decide(self) -> None:
        if not (self.blocks[TASK] and self.blocks[COMPILED]):
            self.chosen, self.reason = TASK, "measured: too few steps timed"
            return
        task, compiled = (statistics.median(self.blocks[p]) for p in (TASK, COMPILED))
        wins = compiled < task * (1 - WIN_MARGIN)
        self.chosen = COMPILED if wins else TASK
        self.reason = (f"measured: compiled {'<' if wins else '>='} task x {1 - WIN_MARGIN:g} "
                       f"({len(self.blocks[TASK])}+{len(self.blocks[COMPILED])} timed blocks)")

    def summary(self) -> dict[str, Any]:
        """``compiled_graph_choice`` for the run summary."""
        med = {p: round(statistics.median(v), 3) if v else None for p, v in self.blocks.items()}
        return {"compiled_graph_choice": {
            "chosen": self.chosen or TASK, "reason": self.reason or "not decided", "task_ms": med[TASK],
            "compiled_ms": med[COMPILED], "task_blocks_ms": [round(v, 3) for v in self.blocks[TASK]],
            "compiled_blocks_ms": [round(v, 3) for v in self.blocks[COMPILED]],
            "compile_s": None if self.compile_s is None else round(self.compile_s, 3), "block_steps": self.block}}


class LazyChain:
    """The compiled chain, built when the probe first runs a compiled block (after the task
    blocks: see the module docstring); its build time is the choice's ``compile_s``."""

    def __init__(self, grid: Grid, hops: list[tuple[str, ...]], choice: PathChoice,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._grid, self._hops, self._choice, self._clock = grid, hops, choice, clock
        self.chain: Any = None

    def build(self) -> Any:
        """The chain, or None where the transport has none (the choice is then the task path)."""
        if self.chain is None:
            t0 = self._clock()
            self.chain = self._grid.chain(self._hops)
            if self.chain is None:
                self._choice.decide_without_probe(TASK, "no compiled graph on this transport")
            elif self._choice.compile_s is None:
                self._choice.compile_s = self._clock() - t0
        return self.chain

    def run(self, wires: list[Wire], *, round: str, timeout_s: float) -> list[Wire]:
        return self.build().run(wires, round=round, timeout_s=timeout_s)

    def close(self) -> None:
        if self.chain is not None:
            self.chain.close()


def train_epoch_probing(grid: Grid, chain: Any, choice: PathChoice, guard: Dropouts, *, start: Wire, epoch: int,
                        steps: int, server: str, plan: RoundPlan, timeout_s: float, progress: Progress,
                        clock: Callable[[], float] = time.perf_counter) -> None:
    """One epoch while ``auto`` is still probing (and the rest of it once decided): blocks of
    steps over the task path or the chain, each fed the parties' replies of the block before."""
    wires = grid.collect(grid.submit([[start]], to=grid.party_groups), round=round_tag(epoch, 0))
    step = 0
    while step < steps:
        if choice.chosen is None:
            path, planned, timed = choice.next_block()
        else:
            path, planned, timed = choice.chosen, choice.block, False
        n = min(planned, steps - step)
        if path == COMPILED and chain.build() is None:  # no graph here: decided for tasks
            path = TASK
        t0 = clock()
        if path == COMPILED:
            for s in range(step, step + n):
                wires = chain.run(wires, round=round_tag(epoch, s), timeout_s=timeout_s)
        else:
            wires = _task_block(grid, guard, wires, first=step, n=n, server=server, plan=plan)
        seconds = clock() - t0
        if choice.chosen is None:
            choice.record(path, n, seconds, planned=planned, timed=timed)
            if choice.chosen == TASK:
                chain.close()  # its actors go back to ordinary tasks
        step += n
        progress(n)
    grid.drain()
    if wires:
        from vfl.core.errors import ProtocolError

        raise ProtocolError(f"parties sent {len(wires)} messages after the last step of epoch {epoch}")


def _task_block(grid: Grid, guard: Dropouts, wires: list[Wire], *, first: int, n: int, server: str,
                plan: RoundPlan) -> list[Wire]:
    """Steps ``first .. first+n-1`` hop by hop (the task path's pipelined loop, ``task_step``),
    synced at the end; returns the parties' replies of the last step."""
    parts: list[Any] = [wires]
    ups: dict[str, Any] = {}
    for step in range(first, first + n):
        ups = task_step(grid, guard, parts, step=step, plan=plan, server=server)
        parts = list(ups.values())
    _, _, left = guard.sync(ups, step=first + n - 1)  # on_dropout: fail (auto never probes skip-party)
    return left
