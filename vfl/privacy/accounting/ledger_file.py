"""The privacy ledger's file: appends that are whole or raise, a torn tail cut on open, a hash chain.

- **Appends** loop until every byte of the line is written (``os.write`` may write fewer: a full disk,
  a file-size limit), then fsync; any error is a ``RunDirError`` naming the file. A release whose line
  did not reach the disk whole was never announced as durable, so it is never sent.
- **A torn tail** (the bytes of a line whose append failed or whose process died mid-write) is cut by
  the writer when it opens the ledger: the bytes go to ``privacy_ledger.jsonl.torn-<time>`` beside it
  and one warning line says so. A whole record that lost only its newline gets it back (it was
  announced; keeping it charges at most one release too many). A line of an older version that glued
  a record onto torn bytes is split the same way. The next record is never glued onto torn bytes.
- **The hash chain**: the first line is a header ``{"record": "ledger", "format": 2, "orders": [...]}``
  and every line carries ``"prev"``, the SHA-256 of the previous line's bytes (64 zeros for the
  header). Deleting, editing or reordering a record breaks the link of the line after it; the digest
  of the last line, the head, goes into ``summary.json`` (``privacy_ledger_head``), so a change to the
  last record shows too. ``vfl verify`` checks it (``vfl/privacy/verify/``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vfl.core.errors import RunDirError, RunFileError
from vfl.core.private_fs import open_private

GENESIS = "0" * 64
HEADER = "ledger"
FORMAT = 2
_RECORD_START = b'{"record": '

Warn = Callable[[str], None]


class LedgerDamaged(RunFileError):
    """A privacy ledger line that is neither a record nor a torn tail, or a broken hash chain: a resume
    would charge releases it cannot read, so the run cannot go on (no resume hint)."""


def line_digest(line: bytes) -> str:
    """SHA-256 (hex) of one ledger line's bytes, without its newline: the next line's ``prev``."""
    return hashlib.sha256(line.rstrip(b"\n")).hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def append_line(path: Path, line: bytes) -> None:
    """Append ``line`` whole and fsync it, or raise ``RunDirError`` (a short write is retried; a write
    that makes no progress is an error, never taken as durable)."""
    new = not path.exists()
    try:
        fd = open_private(path, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(line)
            while view:
                written = os.write(fd, view)
                if written <= 0:
                    raise OSError(0, "the disk accepted no more bytes")
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        if new:
            _fsync_dir(path.parent)  # the file's name is durable too
    except OSError as exc:
        raise RunDirError(f"cannot write {path}: {exc.strerror or exc}") from None


def _whole(line: bytes, is_record: Callable[[dict[str, Any]], bool]) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return isinstance(record, dict) and is_record(record)


def _keep_aside(path: Path, torn: bytes) -> Path:
    aside = path.with_name(f"{path.name}.torn-{time.strftime('%Y%m%dT%H%M%S')}-{time.time_ns() % 10**9:09d}")
    fd = open_private(aside, os.O_WRONLY | os.O_EXCL)
    try:
        os.write(fd, torn)
        os.fsync(fd)
    finally:
        os.close(fd)
    return aside


def repair(path: Path, *, is_record: Callable[[dict[str, Any]], bool], warn: Warn) -> None:
    """Cut what is not a whole record from the ledger's end (kept aside, one ``warn`` line); the writer
    calls this under the run's lock before it appends. Also splits a line an older version glued onto
    torn bytes. A damaged line that is neither stays for the reader to name."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise RunDirError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    torn: list[bytes] = []
    kept: list[bytes] = []
    for line in lines:
        start = line.rfind(_RECORD_START)
        if line.strip() and not _whole(line, is_record) and start > 0 and _whole(line[start:], is_record):
            torn.append(line[:start])  # an older version appended this record onto torn bytes
            line = line[start:]
        kept.append(line)
    completed = bool(tail) and _whole(tail, is_record)
    if tail and not completed:
        torn.append(tail)
    if not torn and not completed:
        return
    body = b"".join(x + b"\n" for x in kept) + (tail + b"\n" if completed else b"")
    try:
        aside = _keep_aside(path, b"\n".join(torn)) if torn else None
        tmp = path.with_name(f".{path.name}.repair")
        fd = open_private(tmp, os.O_WRONLY | os.O_TRUNC)
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise RunDirError(f"cannot repair {path}: {exc.strerror or exc}") from None
    if aside is not None:
        warn(f"{path} held {sum(len(t) for t in torn)} byte(s) of a record whose write did not complete (never "
             f"sent); cut and kept in {aside.name}")
    if completed:
        warn(f"{path} ended in a whole record without its newline; the newline was added (the record stays charged)")
