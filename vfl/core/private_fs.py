"""Owner-only files and directories for run directories (checkpoints hold every node's state).

A run directory holds model and optimizer states, recorded views, metrics and the config: only
its owner may read them. Modes are set explicitly after creation (``chmod``/``fchmod``), so they
hold whatever the process umask is: directories 0700, files 0600.
"""

from __future__ import annotations

import os
from pathlib import Path

from vfl.core.errors import RunDirError

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: str | Path) -> Path:
    """Create ``path`` (its missing parents with the default mode) and make it owner-only."""
    p = Path(path)
    p.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(p, DIR_MODE)
    return p


def open_private(path: str | Path, flags: int) -> int:
    """``os.open`` that creates ``path`` owner-only (0600) and returns the descriptor; an existing
    file is made owner-only too."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        os.fchmod(fd, FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_bytes(path: Path, data: bytes) -> None:
    """Write and fsync ``path``; an OS error (disk full, read-only) names the file."""
    try:
        with open(open_private(path, os.O_WRONLY | os.O_TRUNC), "wb") as f:  # owner-only (0600)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from None


def write_atomic(path: Path, data: bytes) -> None:
    """Replace ``path`` by ``data`` all at once (temporary file + rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    write_bytes(tmp, data)
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from None
