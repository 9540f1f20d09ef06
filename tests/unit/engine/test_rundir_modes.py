"""Run directories are owner-only whatever the umask: directories 0700, files 0600 (os.stat).

A run directory holds every node's checkpointed state, the recorded views and the metrics; with
the usual umask 022 they used to be world-readable (0755 / 0644), with umask 0 world-writable.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from vfl.engine.rundir import RunDir


@pytest.fixture(params=[0o000, 0o022, 0o077], ids=["umask000", "umask022", "umask077"])
def umask(request):
    before = os.umask(request.param)
    yield request.param
    os.umask(before)


def _modes(root: Path) -> dict[str, int]:
    out = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for p in root.rglob("*"):
        out[str(p.relative_to(root))] = stat.S_IMODE(os.stat(p).st_mode)
    return out


def _write_a_run(path: Path, *, create: bool = True) -> RunDir:
    run = RunDir.create(path) if create else RunDir.open(path)
    run.write_config({"name": "x"}, note="test")
    run.append_metrics({"epoch": 0, "loss": 1.0})
    run.save_checkpoint(0, {1: b"state of node 1", 2: b"state of node 2"}, {"epoch": 0})
    run.append_metrics({"epoch": 1, "loss": 0.5})
    run.reconcile_metrics(run.load_checkpoint())
    run.write_summary({"final": 1})
    return run


def test_every_directory_is_0700_and_every_file_0600(tmp_path, umask):
    run = _write_a_run(tmp_path / "runs" / "a")
    try:
        modes = _modes(run.path)
    finally:
        run.close()
    assert {"checkpoints", "summary.json", "metrics.jsonl", "config.resolved.yaml", ".lock"} <= set(modes)
    assert any(k.endswith("node_1.pt") for k in modes)
    for name, mode in modes.items():
        want = 0o700 if (run.path / name).is_dir() else 0o600
        assert mode == want, f"{name}: {oct(mode)} (umask {oct(umask)})"
    # control: what the umask alone gives a file or a directory created the ordinary way
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain.txt").write_text("x")
    plain = {stat.S_IMODE(os.stat(tmp_path / n).st_mode) for n in ("plain", "plain.txt")}
    assert plain == {0o777 & ~umask, 0o666 & ~umask}


def test_a_resumed_older_run_becomes_owner_only(tmp_path):
    run = _write_a_run(tmp_path / "old")
    run.close()
    os.chmod(run.path, 0o755)  # as runs were made before
    os.chmod(run.path / "metrics.jsonl", 0o644)
    again = _write_a_run(run.path, create=False)
    again.close()
    modes = _modes(run.path)
    assert modes["."] == 0o700 and modes["metrics.jsonl"] == 0o600


def test_recorded_views_are_owner_only(tmp_path, umask):
    import numpy as np

    from vfl.runtime.views import ViewPolicy, write_views

    entry = {"round": "train:0:1", "name": "grad", "kind": "train.forward", "src": 0}
    root = write_views(tmp_path / "views", {1: {"entries": [entry], "arrays": [np.ones(3)], "dropped": 0}},
                       names={1: "party0"}, roles={1: "party"}, policy=ViewPolicy(max_bytes=1 << 20))
    modes = _modes(root)
    assert modes == {".": 0o700, "party0.npz": 0o600, "index.json": 0o600}
