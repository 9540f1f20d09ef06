"""Checkpoints that verify themselves: a manifest records every file's size and SHA-256.

A checkpoint is written into a hidden temporary folder (node states, ``engine.json``, then the
manifest, each fsynced) and renamed into place, so ``epoch_NNNNN/`` (after epoch N) or
``step_NNNNN_KKKKKKK/`` (inside epoch N, after its K-th step: ``train.checkpoint_every_steps``) either
exists whole or not at all. Loading takes the newest folder whose files match its manifest; a newer damaged one is
skipped with one warning line, and when none is intact the error names the damaged file. The
``latest`` marker is only a hint for people: loading never trusts it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vfl.core.errors import RunDirError
from vfl.core.logs import get_logger
from vfl.core.private_fs import DIR_MODE, private_dir, write_atomic, write_bytes

MANIFEST = "manifest.json"
ENGINE = "engine.json"
LATEST = "latest"
PREFIX = "epoch_"
STEP_PREFIX = "step_"

Warn = Callable[[str], None]


def stderr_warning(message: str) -> None:
    """A warning through this module's logger (``vfl: warning: ...`` on stderr by default)."""
    get_logger(__name__).warning("%s", message)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _digest(data: bytes) -> dict[str, Any]:
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


@dataclass(frozen=True)
class Checkpoint:
    epoch: int  # the last epoch completed (-1: none)
    folder: Path
    nodes: dict[int, bytes]
    engine: dict[str, Any]
    step: int = 0  # steps of epoch ``epoch + 1`` done (0: an epoch's checkpoint)


def folder_name(epoch: int, step: int = 0) -> str:
    """``epoch_NNNNN`` after epoch ``epoch``; ``step_NNNNN_KKKKKKK`` after ``step`` steps of the next one."""
    return f"{PREFIX}{epoch:05d}" if step == 0 else f"{STEP_PREFIX}{epoch + 1:05d}_{step:07d}"


def _order(name: str) -> tuple[int, int] | None:
    """(epoch being trained, steps done) of a checkpoint folder's name: newer is larger (None: not one)."""
    if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
        return int(name[len(PREFIX):]) + 1, 0
    parts = name[len(STEP_PREFIX):].split("_") if name.startswith(STEP_PREFIX) else []
    if len(parts) == 2 and all(p.isdigit() for p in parts):
        return int(parts[0]), int(parts[1])
    return None


class Damaged(Exception):
    """One checkpoint folder failed verification (internal: turned into a warning or RunDirError)."""


class CheckpointStore:
    """``save`` / ``load_latest`` of the ``checkpoints/`` folder of a run (keeps the newest ``keep``)."""

    def __init__(self, root: str | Path, *, keep: int = 2, warn: Warn = stderr_warning) -> None:
        self.root = Path(root)
        self.keep = max(1, keep)
        self.warn = warn

    # ---- writing ------------------------------------------------------------------------------
    def save(self, epoch: int, nodes: dict[int, bytes], engine: dict[str, Any], *, step: int = 0) -> Path:
        """After epoch ``epoch`` (``step`` 0), or after ``step`` steps of epoch ``epoch + 1``."""
        try:
            private_dir(self.root)
        except OSError as exc:
            raise RunDirError(f"cannot create {self.root}: {exc.strerror or exc}") from None
        name = folder_name(epoch, step)
        final, tmp = self.root / name, self.root / f".tmp_{name}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            tmp.mkdir(mode=DIR_MODE)
            os.chmod(tmp, DIR_MODE)
        except OSError as exc:
            raise RunDirError(f"cannot create {tmp}: {exc.strerror or exc}") from None
        files: dict[str, bytes] = {f"node_{nid}.pt": data for nid, data in sorted(nodes.items())}
        files[ENGINE] = json.dumps(engine).encode()
        try:
            for fname, data in files.items():
                write_bytes(tmp / fname, data)
            manifest = {"epoch": epoch, "step": step, "files": {f: _digest(d) for f, d in files.items()}}
            write_bytes(tmp / MANIFEST, json.dumps(manifest, indent=1).encode())
            _fsync_dir(tmp)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        except (OSError, RunDirError) as exc:
            shutil.rmtree(tmp, ignore_errors=True)  # a partial checkpoint never becomes visible
            if isinstance(exc, RunDirError):
                raise
            raise RunDirError(f"cannot write checkpoint {final}: {exc.strerror or exc}") from None
        _fsync_dir(self.root)
        write_atomic(self.root / LATEST, (name + "\n").encode())
        for old in self._folders()[self.keep:]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    # ---- reading ------------------------------------------------------------------------------
    def _folders(self) -> list[Path]:
        """Checkpoint folders, newest first (by the epoch in the name)."""
        if not self.root.is_dir():
            return []
        found = [(key, p) for p in self.root.iterdir() if (key := _order(p.name)) is not None and p.is_dir()]
        return [p for _, p in sorted(found, reverse=True)]

    def latest_name(self) -> str | None:
        """The newest checkpoint folder's name, unverified (for messages)."""
        folders = self._folders()
        return folders[0].name if folders else None

    def load_latest(self) -> Checkpoint | None:
        """The newest intact checkpoint; ``None`` when there is none at all."""
        damaged: list[str] = []
        for folder in self._folders():
            try:
                ckpt = self.verify(folder)
            except Damaged as exc:
                damaged.append(str(exc))
                continue
            if damaged:
                self.warn(f"{damaged[0]}; resuming from the intact {folder.name} instead")
            return ckpt
        if damaged:
            raise RunDirError(f"no intact checkpoint in {self.root}: {damaged[0]}")
        return None

    def verify(self, folder: Path) -> Checkpoint:
        """Read ``folder`` and check every file against the manifest (raises ``Damaged``)."""
        try:
            manifest = json.loads((folder / MANIFEST).read_bytes())
            listed = manifest["files"]
            epoch = int(manifest["epoch"])
            step = int(manifest.get("step", 0))
        except FileNotFoundError:
            raise Damaged(f"checkpoint {folder} has no {MANIFEST}") from None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise Damaged(f"checkpoint manifest {folder / MANIFEST} is unreadable ({exc})") from None
        if ENGINE not in listed:
            raise Damaged(f"checkpoint manifest {folder / MANIFEST} does not list {ENGINE}")
        blobs: dict[str, bytes] = {}
        for fname, want in listed.items():
            path = folder / fname
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise Damaged(f"checkpoint file {path} is unreadable ({exc.strerror or exc})") from None
            if len(data) != want.get("bytes"):
                raise Damaged(f"checkpoint file {path} is truncated ({len(data)} of {want.get('bytes')} bytes)")
            if hashlib.sha256(data).hexdigest() != want.get("sha256"):
                raise Damaged(f"checkpoint file {path} is corrupt (SHA-256 differs from {MANIFEST})")
            blobs[fname] = data
        engine = json.loads(blobs.pop(ENGINE))
        nodes = {int(f[len("node_"):-len(".pt")]): d for f, d in blobs.items()
                 if f.startswith("node_") and f.endswith(".pt")}
        return Checkpoint(epoch, folder, nodes, engine, step)
