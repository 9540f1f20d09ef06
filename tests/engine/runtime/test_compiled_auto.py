"""``transport.compiled_graph: auto`` times both paths on the run's own steps and keeps the faster:
whichever it keeps (forced here through the margin), losses, parameters, bytes and epsilon equal
the task path's bit for bit; the probe's plan (tasks first, then the graph) and decision rule; the
choice in the summary."""

from __future__ import annotations

import pytest

import strategies  # noqa: F401
from strategies.base import compiled_epoch
from strategies.base.compiled_auto import COMPILED, TASK, PathChoice
from tests.ray.test_compiled_graph import _cfg

N, B = 240, 50  # 5 steps per epoch, 2 epochs


def _probe(choice: PathChoice, ms: dict[str, float]) -> list[tuple[str, int, bool]]:
    """Drive ``choice`` to a decision with ``ms`` per step per path; the blocks it asked for."""
    seen = []
    while choice.chosen is None:
        path, n, timed = choice.next_block()
        seen.append((path, n, timed))
        choice.record(path, n, ms[path] * n / 1e3, planned=n, timed=timed)
    return seen


def test_the_probe_times_tasks_first_then_the_graph_and_keeps_it_only_past_the_margin():
    choice = PathChoice(rounds=2, block=4, warm=2)
    seen = _probe(choice, {TASK: 10.0, COMPILED: 9.9})  # 1 % faster: within the margin, tasks kept
    assert seen == [(TASK, 2, False), (TASK, 4, True), (TASK, 4, True),  # no graph alive while tasks are timed
                    (COMPILED, 2, False), (COMPILED, 4, True), (COMPILED, 4, True)]
    assert choice.chosen == TASK and choice.blocks == {TASK: [10.0, 10.0], COMPILED: [9.9, 9.9]}
    fast = PathChoice(rounds=2, block=4, warm=1)
    _probe(fast, {TASK: 10.0, COMPILED: 8.0})
    out = fast.summary()["compiled_graph_choice"]
    assert (out["chosen"], out["task_ms"], out["compiled_ms"]) == (COMPILED, 10.0, 8.0)
    assert out["reason"].startswith("measured") and out["reason"].endswith("(2+2 timed blocks)")


def test_a_decisive_first_compiled_block_ends_the_probe_early():
    for ratio, chosen, compiled_blocks in ((2.5, TASK, 1), (0.4, COMPILED, 1), (1.5, TASK, 3)):
        choice = PathChoice(rounds=3, block=4, warm=1)
        seen = _probe(choice, {TASK: 10.0, COMPILED: 10.0 * ratio})
        assert choice.chosen == chosen and sum(p == COMPILED and t for p, _, t in seen) == compiled_blocks, ratio


def test_a_block_cut_by_the_epoch_end_goes_on_in_the_next_epoch_with_its_times_summed():
    choice = PathChoice(rounds=1, block=4, warm=3)
    path, n, timed = choice.next_block()
    choice.record(path, 1, 0.5, planned=n, timed=timed)  # the epoch ended after 1 of 3 warm steps
    assert choice.next_block() == (TASK, 2, False)
    choice.record(TASK, 2, 0.5, planned=2, timed=False)
    choice.record(TASK, 1, 0.010, planned=4, timed=True)  # 1 of 4 timed steps, then the epoch ends
    assert choice.blocks[TASK] == [] and choice.next_block() == (TASK, 3, True)
    choice.record(TASK, 3, 0.050, planned=3, timed=True)
    assert choice.blocks[TASK] == [pytest.approx(15.0)]  # 60 ms over 4 steps
    assert choice.next_block() == (COMPILED, 3, False)


def test_auto_without_a_graph_or_on_a_short_run_reports_the_task_path():
    class G:
        party_groups = ["p0", "p1"]

        def chain(self, hops):
            return None  # the in-process transport

    choice = PathChoice()
    cfg = _cfg("npq", {}, compiled="auto")
    assert compiled_epoch.compiled_chain(G(), cfg, server="s", unmask_hops=0, steps=5, choice=choice) is None
    assert (choice.chosen, choice.reason) == (TASK, f"short run: < {compiled_epoch.MIN_AUTO_STEPS} training steps")
    choice = PathChoice()
    lazy = compiled_epoch.compiled_chain(G(), cfg, server="s", unmask_hops=0, steps=10**6, choice=choice)
    assert choice.chosen is None and lazy.build() is None  # built when the probe first needs it
    assert (choice.chosen, choice.reason) == (TASK, "no compiled graph on this transport")
