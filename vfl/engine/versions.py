"""What software produced a run: package versions, Python, platform and the project's git commit
(recorded in summary.json as ``versions``; a missing package or git is ``None``, never an error)."""

from __future__ import annotations

import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGES = ("torch", "flwr", "ray", "transformers", "peft", "cryptography", "dp-accounting", "opacus", "numpy")


def _version(dist: str) -> str | None:
    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def git_commit(path: Path | None = None) -> str | None:
    """HEAD of the git checkout holding this package (``+dirty`` with uncommitted changes), or None."""
    where = path or Path(__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")


def versions() -> dict[str, str | None]:
    """``{package: version}`` plus ``python``, ``platform``, ``vfl`` and ``git_commit``."""
    from vfl import __version__

    out: dict[str, str | None] = {name: _version(name) for name in PACKAGES}
    out.update(python=sys.version.split()[0], platform=platform.platform(), vfl=__version__,
               git_commit=git_commit())
    return out
