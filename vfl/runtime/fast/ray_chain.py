"""A fixed chain of pipelined hops compiled once into a Ray Compiled Graph (``ray.dag``).

A vertical training step is always the same actor chain: the parties' outputs go to the server
host, the server's replies to every party host (with secure aggregation, a fixed number of
unmask hops in between). Submitted as ordinary actor tasks, each hop costs a task submission
and a trip of its result through the driver; compiled, the chain's actors read and write
shared-memory channels set up once (``experimental_compile``), and the driver only writes the
step's input and reads its output. Each hop runs the same ``NodeHost.deliver_piped`` as the
task path, so the wires, their bytes and the hosts' outboxes (what the ledger counts) are the
same. Used only where the hop plan is fixed (``transport.compiled_graph``); multi-hop
conversations and dropout recovery keep the task path.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from vfl.core.errors import PartyFailure
from vfl.runtime.message import Wire
from vfl.runtime.transport.deferred_signals import deferred_signals
from vfl.runtime.transport.ray_errors import raise_ray_failure

Hops = tuple[tuple[str, ...], ...]
STUCK_AFTER_S = 5.0  # after a failed step, an actor whose compiled loop has not ended by then is killed


class CompiledChain:
    """``run(wires)`` sends ``wires`` through ``hops`` (each a tuple of host names) and returns
    the last hop's replies; one Ray Compiled Graph for the whole chain."""

    def __init__(self, ray: Any, actors: dict[str, Any], hops: Hops, *,
                 names: Callable[[str], str], dead: Callable[[], str]) -> None:
        from ray.dag import InputNode, MultiOutputNode

        if not hops or any(not hop for hop in hops):
            raise ValueError("a compiled chain needs at least one hop, each with at least one host")
        self._ray, self.hops, self._names, self._dead = ray, hops, names, dead
        with InputNode() as inp:
            prev: list[Any] = [inp]
            for hop in hops:  # every host of a hop reads every output of the previous hop
                prev = [actors[name].deliver_piped.bind(*prev) for name in hop]
            graph = MultiOutputNode(prev)
        self._dag: Any = graph.experimental_compile()
        self._actors = actors
        self.broken = False  # a step did not complete: an actor may still be stuck in it (see close)

    def run(self, wires: Sequence[Wire], *, round: str, timeout_s: float) -> list[Wire]:
        """The last hop's replies, host order; a host that fails, dies or does not answer within
        ``timeout_s`` is a PartyFailure (the chain is then unusable: ``close`` it). SIGINT/SIGTERM
        arriving meanwhile are handled once the step returned (``deferred_signals``: raised inside
        Ray's channel read, the interrupt would keep a channel buffer alive past ``ray.shutdown``); a
        second one within the step is raised at once, without the read's frames (``forget_frames``)."""
        try:
            return self._run(wires, round=round, timeout_s=timeout_s)
        except BaseException:
            self.broken = True  # the graph is left mid-step: close() must not wait for its actors
            raise

    def _run(self, wires: Sequence[Wire], *, round: str, timeout_s: float) -> list[Wire]:
        ray = self._ray
        try:
            with deferred_signals():
                out = ray.get(self._dag.execute(list(wires)), timeout=timeout_s)
        except ray.exceptions.RayError as exc:
            forget_frames(exc)  # Ray's read frames in its traceback could hold a channel buffer (see below)
            if isinstance(exc, (ray.exceptions.GetTimeoutError, ray.exceptions.RayChannelTimeoutError)):
                raise PartyFailure(self._everyone(), round, f"no answer within transport.round_timeout_s="
                                   f"{timeout_s:g} (compiled graph)") from None  # nobody died, somebody is late
            if isinstance(exc, (ray.exceptions.RayTaskError, ray.exceptions.RayActorError,
                                ray.exceptions.ActorDiedError)):
                raise_ray_failure(ray, exc, round=round, culprit=self._everyone(), dead=self._dead)
            if isinstance(exc, ray.exceptions.RayChannelError):  # a channel closed under us: an actor died
                raise PartyFailure(self._dead() or self._everyone(), round, "its Ray actor died") from exc
            raise
        except KeyboardInterrupt as exc:  # a second SIGINT/SIGTERM within the step, raised inside Ray's read
            forget_frames(exc)
            raise
        return [w for part in out for w in part]

    def _hosts(self) -> list[str]:
        """The chain's host names, each once, in hop order."""
        return list(dict.fromkeys(h for hop in self.hops for h in hop))

    def _everyone(self) -> str:
        return ", ".join(self._names(name) for name in self._hosts())

    def close(self) -> None:
        """Tear the graph down (the actors go back to ordinary tasks); safe to call twice. After a
        failed step an actor may still be stuck in it (a party that hangs): Ray's teardown would wait
        for its loop forever, so an actor whose loop has not ended after ``STUCK_AFTER_S`` is killed
        (the transport then replaces it, as it does a hung actor on the task path)."""
        dag, self._dag = self._dag, None
        if dag is None:
            return
        if not self.broken:
            _teardown(dag)
            return
        worker = threading.Thread(target=_teardown, args=(dag,), daemon=True, name="vfl-chain-teardown")
        worker.start()
        worker.join(STUCK_AFTER_S)
        if worker.is_alive():
            loops = getattr(dag, "worker_task_refs", None)  # actor -> its compiled loop (Ray's own table)
            stuck = ([a for a, ref in loops.items() if not self._ray.wait([ref], timeout=0)[0]]
                     if isinstance(loops, dict) else [self._actors[name] for name in self._hosts()])
            for actor in stuck:
                try:
                    self._ray.kill(actor, no_restart=True)
                except Exception:  # already gone
                    pass
            worker.join(STUCK_AFTER_S + 30.0)  # a killed loop ends at once; Ray's own cancel waits <= 30 s


def _teardown(dag: Any) -> None:
    try:
        dag.teardown()
    except Exception:  # an actor of the chain died: nothing left to tear down there
        pass


def forget_frames(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and the exceptions chained to it. An error raised inside a
    compiled graph's channel read keeps that read's frames, which may hold a ``Buffer`` over the
    channel's shared memory; kept alive past ``ray.shutdown`` (an error that ends the run is only
    freed at exit), freeing that buffer crashes the process (SIGSEGV, see ``deferred_signals``).
    The error's type and message, and a remote error's own traceback text, are kept."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        e.__traceback__ = None
        todo += [e.__cause__, e.__context__]
