"""Run directories for the ``vfl verify`` tests: an engine run written as ``vfl run`` writes it (resolved config
with its digest, the privacy ledger, checkpoints, metrics, summary.json with the chain's head), on any data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import strategies  # noqa: F401
from simulations.cli.runner import _drive
from simulations.cli.verify import _expected, read_run
from vfl.engine.rundir import RunDir
from vfl.privacy.verify.check import Verdict, verify_files
from vfl.runtime.transport.inprocess import InProcessTransport


def make_run(path: Path, cfg: Any, data: Any, *, resume: bool = False) -> dict[str, Any]:
    """Run ``cfg`` on ``data`` into ``path`` (or resume it there with ``cfg``); returns summary.json's dict."""
    run_dir = RunDir.open(path) if resume else RunDir.create(path)
    try:
        if not resume:
            run_dir.write_config(cfg.to_dict(), note="created by: tests")
        started = (lambda engine: run_dir.write_config(cfg.to_dict(), note="resumed")) if resume else None
        result = _drive(cfg, data, run_dir, resume=resume, progress=False, on_epoch_end=None, on_step=None,
                        on_started=started, transport=InProcessTransport())
        return result.summary
    finally:
        run_dir.close()


def verify(files: dict[str, Any], source: Path) -> Verdict:
    """``vfl verify``'s verdict on ``files`` (as ``read_run`` gives them, maybe changed by a test)."""
    return verify_files(files, expected=_expected(files, source))


def verify_dir(path: Path) -> Verdict:
    return verify(read_run(path), path)
