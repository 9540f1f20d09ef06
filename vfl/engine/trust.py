"""Someone else's run directory is untrusted input: its config may name code to import.

A config value ``package.module:attr`` (``model.bottom``, ``model.head``, ``dataset``, ...) is
imported when the run is resumed, reported on or dry-run: importing runs that module's code. A run
directory created by this user on this machine is trusted; any other one (copied, downloaded,
written by hand) is refused with one line unless the user says ``--trust-code`` (CLI) or
``VFL_TRUST_CODE=1`` (API).

How "created here" is known without trusting the directory itself: ``RunDir.create`` writes a
random token into ``<run>/.vfl-origin`` and the same token into the user's store
(``$VFL_CACHE_DIR`` or ``~/.cache/vfl``, ``trusted-runs/<sha256(real path)>``, mode 0600). A
crafted directory cannot hold the token the user's store has for its path; a moved or copied
run loses its trust (its real path changed) and needs the flag once.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError

ORIGIN = ".vfl-origin"
TRUST_ENV = "VFL_TRUST_CODE"
_STORE = "trusted-runs"
_IMPORT = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
_trusted_now = False  # set by the CLI's --trust-code for the duration of a command


def _store() -> Path:
    base = os.environ.get("VFL_CACHE_DIR") or str(Path.home() / ".cache" / "vfl")
    return Path(base) / _STORE


def _entry(run: Path) -> Path:
    return _store() / hashlib.sha256(str(run.resolve()).encode()).hexdigest()


def _write_private(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)


def mark_created(run: str | Path) -> None:
    """Record that this user created ``run`` (best effort: a read-only home only costs the flag later)."""
    token = secrets.token_hex(16)
    try:
        _store().mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_private(_entry(Path(run)), token)
        _write_private(Path(run) / ORIGIN, token)
    except OSError:
        pass


def created_here(run: str | Path) -> bool:
    """Whether ``run`` holds the token this user's store recorded for its real path."""
    try:
        mine = _entry(Path(run)).read_text().strip()
        theirs = (Path(run) / ORIGIN).read_text().strip()
    except OSError:
        return False
    return bool(mine) and hmac.compare_digest(mine, theirs)


def import_strings(cfg: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every (key, value) of ``cfg`` whose value names code to import (``pkg.module:attr``)."""
    if isinstance(cfg, Mapping):
        for k, v in cfg.items():
            yield from import_strings(v, f"{prefix}{k}.")
    elif isinstance(cfg, (list, tuple)):
        for i, v in enumerate(cfg):
            yield from import_strings(v, f"{prefix[:-1]}[{i}].")
    elif isinstance(cfg, str) and _IMPORT.match(cfg):
        yield prefix[:-1], cfg


@contextmanager
def trusting(enabled: bool) -> Iterator[None]:
    """While active (``--trust-code``), configs of any run directory may name code to import."""
    global _trusted_now
    before, _trusted_now = _trusted_now, _trusted_now or enabled
    try:
        yield
    finally:
        _trusted_now = before


def check_code(run: str | Path, cfg: Mapping[str, Any], *, key: str) -> None:
    """``ConfigError`` when ``run``'s config names code to import and the user has not trusted it."""
    if _trusted_now or os.environ.get(TRUST_ENV) == "1":
        return
    found = next(import_strings(cfg), None)
    if found is None or created_here(run):
        return
    name, value = found
    raise ConfigError(key, f"{run} was not created by you on this machine and its config names code to "
                      f"import ({name}: {value}); importing it runs that code. If you trust it, rerun with "
                      f"--trust-code (or {TRUST_ENV}=1)")
