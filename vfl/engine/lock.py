"""One writer per run directory: an exclusive ``flock`` on ``<run>/.lock`` for the life of a run.

The kernel drops the lock when the holding process ends in any way (even SIGKILL), so a crashed
run never leaves a stale lock. The file itself stays: unlinking it would let a waiting process
lock a dead inode while a third one locks a new file. The holder writes its PID into the file so
that a refused writer can name it.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from vfl.core.errors import ConfigError
from vfl.core.private_fs import open_private

LOCK_FILE = ".lock"


def _read_pid(fd: int) -> str:
    """The PID the holder wrote (it may still be writing it: retry briefly)."""
    for _ in range(20):
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        if text:
            return text
        time.sleep(0.025)
    return "unknown"


class RunLock:
    """``with RunLock(dir, key="--out"):`` holds the directory's lock or raises ``ConfigError``
    (exit 2) naming the directory and the PID of the run that holds it."""

    def __init__(self, directory: str | Path, *, key: str = "--out") -> None:
        self.directory = Path(directory)
        self.path = self.directory / LOCK_FILE
        self.key = key
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        try:
            fd = open_private(self.path, os.O_RDWR)  # owner-only (0600), whatever the umask
        except OSError as exc:
            raise ConfigError(self.key, f"cannot use {self.directory}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise ConfigError(self.key, f"{self.directory} is in use by another vfl run (PID {holder}); "
                              "wait for it to end or choose another directory") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode("ascii"), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
