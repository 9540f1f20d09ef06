"""Real processes: one writer per run directory, unique default names, SIGINT/SIGTERM name the real
run directory, and a killed CLI leaves no Ray process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
SMALL = ["--no-progress", "--set", "params.b=8", "--set", "data.train_subsample=256", "--set",
         "data.test_subsample=64"]


# A shell starting the tests in the background (``pytest &``, nohup, CI runners) makes SIGINT
# ignored, and a child inherits that: Python then installs no KeyboardInterrupt handler. These tests
# send SIGINT as a terminal would, so the child puts Python's default handler back first thing. Not
# a ``preexec_fn``: that forces a plain fork() of this multi-threaded pytest process, and the
# inherited gRPC event engine (flwr imports grpc) then aborted a child before exec (seen once:
# "epoll_wait error: Bad file descriptor", SIGABRT).
_CLI = ("import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "runpy.run_module('simulations.cli.main', run_name='__main__', alter_sys=True)")


def _vfl(*args: str, cwd: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", _CLI, *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(cond, proc: subprocess.Popen[str], what: str, timeout: float = 300.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if proc.poll() is not None:
            raise AssertionError(f"process ended before {what}: {proc.communicate()[1][-2000:]}")
        if time.monotonic() > end:
            proc.kill()
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def _has_rows(out: Path) -> bool:
    p = out / "metrics.jsonl"
    return p.exists() and p.read_text().count("\n") >= 1


def test_second_writer_is_refused_and_sigint_names_the_run_directory(tmp_path):
    out = tmp_path / "run"
    first = _vfl("run", "demo", "--transport", "inprocess", "--out", str(out), "--set", "train.epochs=100000", *SMALL)  # never finishes first
    try:
        _wait_for(lambda: _has_rows(out), first, "the first epoch")
        second = _vfl("run", "demo", "--transport", "inprocess", "--out", str(out), *SMALL)
        _, err = second.communicate(timeout=300)
        assert second.returncode == 2, err
        line = err.strip().splitlines()[-1]
        assert line == (f"vfl: error: --out: {out} is in use by another vfl run (PID {first.pid}); "
                        "wait for it to end or choose another directory"), err
        first.send_signal(signal.SIGINT)
        _, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err
    line = err.strip().splitlines()[-1]
    assert line.startswith("vfl: interrupted by SIGINT; last checkpoint: epoch_") and "Traceback" not in err
    assert line.endswith(f"; resume with: vfl run --resume {out}"), line
    rows = [json.loads(x)["epoch"] for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert rows == list(range(len(rows)))  # never interleaved


def test_runs_started_together_without_out_get_their_own_directories(tmp_path):
    procs = [_vfl("run", "demo", "--transport", "inprocess", "--set", "train.epochs=1", "--set", f"seed={s}",
                  *SMALL, cwd=tmp_path) for s in (1, 2)]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    runs = sorted((tmp_path / "runs").iterdir())
    assert len(runs) == 2
    for r in runs:
        assert [json.loads(x)["epoch"] for x in (r / "metrics.jsonl").read_text().splitlines()] == [0]
    assert {yaml.safe_load((r / "config.resolved.yaml").read_text())["seed"] for r in runs} == {1, 2}


