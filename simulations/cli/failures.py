"""Every failure of a ``vfl`` command as one ``vfl:`` line and an exit status (docs/failures.md).

2: bad input (a config key, a file, a busy directory); 1: a failed run, a damaged run file, a Ray error of any
kind (an actor, the memory monitor, a worker crash, the local Ray's start-up); 3: training went NaN/inf;
128 + N: interrupted by signal N. A hint to resume is added only where the user can act on it: ``vfl run``
(naming the run directory and its newest checkpoint) and ``vfl sweep`` (its own command with ``--resume``);
never for a run file whose damage a resume would read again, nor for commands that write no run.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from simulations.cli import signals
from vfl.core.errors import (
    ConfigError,
    DataError,
    NonFiniteError,
    PartyFailure,
    RunDirError,
    RunFileError,
    TransportError,
    VFLError,
)

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_NONFINITE = 3  # training went NaN/inf: stopped, the last good checkpoint kept (docs/usage.md)


def resume_hint(args: argparse.Namespace) -> str:
    """'; last checkpoint: ...; resume with: ...' for what this command can resume (``vfl run``, ``vfl sweep``)."""
    run = getattr(args, "run_dir", None)
    command = getattr(args, "command", None)
    if not run:
        return ""
    if command == "sweep":
        argv = list(getattr(args, "argv", []))
        argv += [] if "--out" in argv else ["--out", str(run)]
        argv += [] if "--resume" in argv else ["--resume"]
        return f"; resume with: vfl {shlex.join(argv)}"
    from vfl.engine.checkpoint import CheckpointStore
    from vfl.engine.rundir import CKPT, CONFIG

    if command != "run" or not (Path(run) / CONFIG).is_file():
        return ""
    ckpt = CheckpointStore(Path(run) / CKPT).latest_name() or "none (stopped before the first epoch ended)"
    return f"; last checkpoint: {ckpt}; resume with: vfl run --resume {run}"


def _is_ray_error(exc: BaseException) -> bool:
    return any(c.__module__.split(".")[0] == "ray" for c in type(exc).__mro__ if c not in (Exception, BaseException))


def _first_line(exc: BaseException) -> str:
    lines = [x for x in str(exc).splitlines() if x.strip()]
    return lines[0].strip() if lines else type(exc).__name__


def report(exc: BaseException, args: argparse.Namespace) -> int | None:
    """Print ``exc`` as one line and return the exit status; None for an exception this does not own."""
    def say(line: str) -> None:
        print(line, file=sys.stderr)

    if isinstance(exc, (ConfigError, DataError)):
        say(f"vfl: error: {exc}")
        return EXIT_BAD_INPUT
    if isinstance(exc, NonFiniteError):
        say(f"vfl: run failed: {exc}{resume_hint(args)}")
        return EXIT_NONFINITE
    if isinstance(exc, RunFileError):  # resuming would read the same damage again
        say(f"vfl: error: {exc}")
        return EXIT_FAILED
    if isinstance(exc, (PartyFailure, RunDirError)):
        say(f"vfl: run failed: {exc}{resume_hint(args)}")
        return EXIT_FAILED
    if isinstance(exc, TransportError):
        say(f"vfl: error: {exc}{resume_hint(args)}")
        return EXIT_FAILED
    if isinstance(exc, VFLError):
        say(f"vfl: {type(exc).__name__}: {exc}")
        return EXIT_FAILED
    if _is_ray_error(exc):  # the memory monitor's OutOfMemoryError, a WorkerCrashedError, Ray's start-up ...
        say(f"vfl: run failed: Ray {type(exc).__name__}: {_first_line(exc)}{resume_hint(args)}")
        return EXIT_FAILED
    if isinstance(exc, OSError):  # e.g. disk full while writing plots or Ray's temp files
        where = f"{exc.filename}: " if exc.filename else ""
        say(f"vfl: run failed: {where}{exc.strerror or exc}{resume_hint(args)}")
        return EXIT_FAILED
    if isinstance(exc, KeyboardInterrupt):
        sig = signals.as_interrupted(exc)
        say(f"vfl: interrupted by {sig}{resume_hint(args)}")
        return sig.exit_code
    return None
