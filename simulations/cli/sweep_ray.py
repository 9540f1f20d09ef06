"""``vfl sweep --parallel N``: the grid's runs as Ray tasks, at most N at a time.

Each (setting, seed) is one Ray task that runs the experiment in-process (``transport: inprocess``
inside the task) into its own run directory, exactly as the sequential path does; the task reserves
``--cpus-per-task`` CPUs (and uses that many torch threads) and ``--gpus-per-task`` GPUs (Ray sets
the task's CUDA_VISIBLE_DEVICES, so ``train.device: auto`` or ``cuda`` is the task's own GPU). Without ``--address`` a local Ray is
started for the sweep and shut down after it (a Ray already initialized in this process, e.g. a
notebook's, is used and left running).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError, TransportError, VFLError


def run_task(cfg: dict[str, Any], out_dir: str, note: str, threads: int) -> dict[str, Any]:
    """One grid point inside a Ray task: an in-process run; returns its summary."""
    import torch

    import vfl.engine.api

    torch.set_num_threads(max(1, threads))
    res = vfl.engine.api.run(cfg, out_dir=out_dir, transport="inprocess", progress=False, note=note)
    return res.summary


def check_parallel(*, parallel: int, cpus_per_task: float, transport: str | None, gpus_per_task: float = 0.0) -> None:
    """ConfigErrors naming ``--parallel``/``--cpus-per-task``/``--gpus-per-task``/``--transport``."""
    if parallel < 1:
        raise ConfigError("--parallel", f"got {parallel}; allowed: an integer >= 1 (1 = one run after another)")
    if not 0 < cpus_per_task <= 256:
        raise ConfigError("--cpus-per-task", f"got {cpus_per_task:g}; allowed: a value in (0, 256]")
    if not 0 <= gpus_per_task <= 64:
        raise ConfigError("--gpus-per-task", f"got {gpus_per_task:g}; allowed: a value in [0, 64]")
    if parallel > 1 and transport == "ray":
        raise ConfigError("--transport", "got 'ray' with --parallel > 1; each parallel run is one Ray task "
                          "running in-process (leave --transport out or use --parallel 1)")


def run_grid_on_ray(jobs: Sequence[tuple[dict[str, Any], Path, str]], *, parallel: int, cpus_per_task: float,
                    gpus_per_task: float = 0.0, address: str | None = None,
                    on_done: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``jobs`` (resolved config dict, run directory, note) as Ray tasks, at most ``parallel`` at
    once; the summaries in the order of ``jobs``. The first failed run cancels the rest and raises
    its error (a ``VFLError`` as itself)."""
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from vfl.runtime.transport.ray_reaper import Reaper

    owns = not ray.is_initialized()
    temp = tempfile.mkdtemp(prefix="vflsw-") if owns and not address else None
    reaper = Reaper() if temp is not None else None  # a SIGKILLed sweep leaves no Ray agent behind
    if owns:
        try:
            if address:
                ray.init(address=address, configure_logging=False, log_to_driver=True)
            else:
                ray.init(num_cpus=os.cpu_count() or 2, _temp_dir=temp,
                         include_dashboard=False, configure_logging=False, log_to_driver=True)
        except Exception as exc:  # one line, not Ray's traceback
            if reaper is not None:
                reaper.reap_now()  # what Ray started before it failed
            if temp is not None:
                shutil.rmtree(temp, ignore_errors=True)
            raise TransportError(f"cannot start Ray for the sweep: {str(exc).splitlines()[0]}") from None
    if reaper is not None:
        reaper.watch_descendants()
    try:
        have = ray.cluster_resources()
        for flag, res, amount in (("--cpus-per-task", "CPU", cpus_per_task), ("--gpus-per-task", "GPU", gpus_per_task)):
            if amount > float(have.get(res, 0.0)):
                raise ConfigError(flag, f"got {amount:g} but the Ray cluster has {res}={float(have.get(res, 0.0)):g}")
        task = ray.remote(num_cpus=cpus_per_task, num_gpus=gpus_per_task, max_retries=0)(run_task)
        return _schedule(ray, task, jobs, parallel=parallel, threads=max(1, int(cpus_per_task)), on_done=on_done)
    finally:
        if owns:
            ray.shutdown()
        if reaper is not None:
            reaper.stand_down()
        if temp is not None:
            shutil.rmtree(temp, ignore_errors=True)  # Ray's session files of the sweep: none left behind


def _schedule(ray: Any, task: Any, jobs: Sequence[tuple[dict[str, Any], Path, str]], *, parallel: int,
              threads: int, on_done: Callable[[int, dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    results: dict[int, dict[str, Any]] = {}
    pending: dict[Any, int] = {}
    queue = list(enumerate(jobs))
    try:
        while queue or pending:
            while queue and len(pending) < parallel:
                i, (cfg, out, note) = queue.pop(0)
                pending[task.remote(cfg, str(Path(out).absolute()), note, threads)] = i
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                results[i] = _get(ray, ref, jobs[i][1])
                if on_done is not None:  # e.g. the sweep's "run k/N done" line, as each run ends
                    on_done(i, results[i])
    finally:
        for ref in pending:  # a failed run: stop the others
            ray.cancel(ref, force=True)
    return [results[i] for i in range(len(jobs))]


def _get(ray: Any, ref: Any, out: Path) -> dict[str, Any]:
    try:
        return ray.get(ref)  # type: ignore[no-any-return]
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, VFLError):
            raise cause from None
        raise TransportError(f"sweep run {out} failed: {type(cause).__name__ if cause else 'error'}: "
                             f"{cause if cause else str(exc).splitlines()[0]}") from None
    except ray.exceptions.RayError as exc:  # a WorkerCrashedError, the memory monitor's OutOfMemoryError, ...
        from vfl.runtime.transport.ray_errors import ray_cause

        raise TransportError(f"sweep run {out} failed: {ray_cause(exc)}") from None
