"""Real processes over Ray: SIGINT/SIGTERM during a Ray run, and SIGKILL of a run or a ``--parallel`` sweep,
leave no process behind after 10 s."""

from __future__ import annotations

import signal

import psutil
import pytest

from tests.e2e.test_cli_processes import SMALL, _has_rows, _vfl, _wait_for  # noqa: F401


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


@pytest.mark.ray
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_signals_over_ray_leave_nothing_behind(tmp_path, sig):
    out = tmp_path / "run"
    proc = _vfl("run", "demo", "--out", str(out), "--set", "train.epochs=100000", *SMALL)  # never finishes first
    try:
        _wait_for(lambda: _has_rows(out), proc, "the first epoch over Ray")
        tree = _descendants(proc.pid)
        assert any("raylet" in " ".join(p.cmdline()) for p in tree if p.is_running())
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, alive = psutil.wait_procs(tree, timeout=10)  # Ray's agents alone would linger ~60 s: at most 10 s (issue 47)
    assert alive == [], [" ".join(p.cmdline()[:3]) for p in alive if p.is_running()]
    if sig == signal.SIGTERM:
        assert proc.returncode == 143, err
        assert "SIGTERM received" not in err and "PC: @" not in err and "Traceback" not in err, err
        line = err.strip().splitlines()[-1]
        assert line.startswith("vfl: interrupted by SIGTERM; last checkpoint: epoch_")
        assert line.endswith(f"resume with: vfl run --resume {out}")


@pytest.mark.ray
def test_a_sigkilled_parallel_sweep_leaves_no_ray_process_behind(tmp_path):
    """Before, a sweep started its own local Ray without the watcher (``ray_reaper``): its agents outlived it."""
    import yaml

    from tests.ray.test_sweep_ray import TINY

    cfg = tmp_path / "tiny.yaml"
    cfg.write_text(yaml.safe_dump({**TINY, "train": {**TINY["train"], "epochs": 100000}}))  # never finishes first
    out = tmp_path / "sweep"
    proc = _vfl("sweep", str(cfg), "--seeds", "0,1", "--parallel", "2", "--out", str(out))
    try:
        _wait_for(lambda: any(_has_rows(d) for d in out.glob("0*")), proc, "a first epoch in a sweep task")
        tree = _descendants(proc.pid)
        assert any("raylet" in " ".join(p.cmdline()) for p in tree if p.is_running())
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    _, alive = psutil.wait_procs(tree, timeout=10)
    assert alive == [], [" ".join(p.cmdline()[:3]) for p in alive if p.is_running()]
