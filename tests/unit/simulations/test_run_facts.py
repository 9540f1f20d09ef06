"""summary.json's ``wall_s``: from the process's start for `vfl run` (the process is the run), from
the call for vfl.run and sweeps (the control: the same clock without the switch)."""

from __future__ import annotations

import time

import psutil

from simulations.cli import run_facts


def test_wall_s_counts_from_process_start_once_vfl_run_says_so(monkeypatch) -> None:
    monkeypatch.setattr(run_facts, "_FROM_PROCESS_START", [])
    age = time.time() - psutil.Process().create_time()  # this test process: seconds of imports already
    assert age > 0.5
    started = time.perf_counter()
    assert run_facts.wall_seconds(started) < 0.1  # vfl.run, sweeps: from the call
    run_facts.count_from_process_start()
    assert abs(run_facts.wall_seconds(started) - age) < 1.1  # vfl run: the whole process (psutil: 1 s steps)
    assert abs(run_facts.wall_seconds(started) - run_facts.process_age()) < 0.05
