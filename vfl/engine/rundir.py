"""A run's directory: resolved config, metrics.jsonl, summary.json, checkpoints (resumable).

Owner-only: the directory is 0700 and the files written here (and by ``vfl.engine.checkpoint``) 0600,
set explicitly so the umask does not matter; a resumed older run is tightened to 0700.

Invariants (see docs/failures.md): one process writes a run at a time (``.lock``); a new run goes
only into a new or empty directory; an epoch is committed by its checkpoint, which carries the
epoch's metrics row, and the row is appended to metrics.jsonl after it; resuming rewrites
metrics.jsonl to exactly the checkpointed epochs, so rows are never duplicated or lost.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from vfl.config.digest import DIGEST, check_config_text, config_digest, split_config
from vfl.config.fields import load_yaml
from vfl.core.errors import ConfigError, RunDirError, RunFileError
from vfl.core.private_fs import DIR_MODE, open_private, private_dir, write_atomic
from vfl.engine.checkpoint import Checkpoint, CheckpointStore, Warn, stderr_warning
from vfl.engine.lock import LOCK_FILE, RunLock
from vfl.engine.trust import ORIGIN, check_code, mark_created

CONFIG = "config.resolved.yaml"
METRICS = "metrics.jsonl"
SUMMARY = "summary.json"
CKPT = "checkpoints"
HISTORY = "# history:"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(name: str) -> str:
    """``name`` as one harmless path component (``../../x`` -> ``_.._x``): no separators, no
    leading dots, at most 80 characters."""
    return _UNSAFE.sub("_", name).lstrip(".")[:80] or "run"


def _first_missing(path: Path) -> Path | None:
    """The topmost directory of ``path`` that does not exist yet (what ``mkdir -p`` will create)."""
    made = None
    for p in (path, *path.parents):
        if p.exists():
            break
        made = p
    return made


def _clean(obj: Any) -> Any:
    """JSON-safe values (NaN/inf become null so every line parses with strict JSON readers)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


# summary.json keys a reader takes as numbers (report.md prints ``epsilon`` as the accountant's bound): a number
# or null, anything else is a damaged file
SUMMARY_NUMBERS = ("epsilon", "delta", "epsilon_label", "delta_label", "party_epsilon_worst_case",
                   "party_epsilon_released", "final_test_acc", "final_train_loss", "final_train_acc", "final_test_auprc",
                   "total_bytes_up", "total_bytes_down", "wall_s", "epochs")


def read_summary(path: str | Path) -> dict[str, Any]:
    """A run's ``summary.json``, checked: a JSON object whose numeric keys hold numbers or null; anything
    else is one ``RunFileError`` naming the file and the key (never a traceback, never printed as a bound)."""
    p = Path(path)
    try:
        data = json.loads(p.read_bytes())
    except OSError as exc:
        raise RunFileError(f"cannot read {p}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise RunFileError(f"{p} is not valid JSON ({exc}): truncated or damaged") from None
    if not isinstance(data, dict):
        raise RunFileError(f"{p} holds a JSON {type(data).__name__}, not the summary object a run writes")
    for key in SUMMARY_NUMBERS:
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise RunFileError(f"{p}: {key} is {value!r}; a run writes a number or null there (edited or damaged)")
    return data


class RunDir:
    def __init__(self, path: str | Path, *, keep_checkpoints: int = 2, warn: Warn = stderr_warning) -> None:
        self.path = Path(path)
        self.checkpoints = CheckpointStore(self.path / CKPT, keep=keep_checkpoints, warn=warn)
        self._lock: RunLock | None = None
        self._made: Path | None = None  # the topmost directory ``create`` made (None: it existed, empty)

    # ---- opening (locked) --------------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, *, key: str = "--out") -> RunDir:
        """A new run in ``path`` (created, or an existing empty directory), locked for this process;
        a directory holding anything else is refused (``ConfigError`` naming it)."""
        p = Path(path)
        if p.exists() and not p.is_dir():
            raise ConfigError(key, f"{p} is a file; give a new or empty directory")
        run = cls(p)
        try:
            if (p / LOCK_FILE).exists():
                run.lock(key)  # a live run there: name its PID
            if p.is_dir():
                run._refuse_foreign_content(key)  # before adding anything (not even a lock file)
            run._made = _first_missing(p)
            try:
                private_dir(p)  # 0700: checkpoints hold every node's state
            except OSError as exc:
                raise ConfigError(key, f"cannot create run directory {p}: {exc.strerror or exc}") from None
            run.lock(key)
            run._refuse_foreign_content(key)  # again, under the lock (another run may have started)
            mark_created(p)  # this user made it: resuming it may import the code its config names
        except BaseException:
            run.close()
            raise
        return run

    @classmethod
    def open(cls, path: str | Path, *, key: str = "--resume") -> RunDir:
        """An existing run (to resume), locked for this process."""
        p = Path(path)
        if not p.is_dir():
            raise ConfigError(key, f"{p} is not a directory")
        if not (p / CONFIG).is_file():
            raise ConfigError(key, f"{p} has no {CONFIG}; is it a run directory?")
        run = cls(p)
        run.lock(key)
        try:
            os.chmod(p, DIR_MODE)  # a run made before runs were owner-only becomes one
        except OSError as exc:
            run.close()
            raise ConfigError(key, f"cannot restrict {p} to its owner: {exc.strerror or exc}") from None
        return run

    def lock(self, key: str) -> None:
        if self._lock is None:
            self._lock = RunLock(self.path, key=key).acquire()

    def close(self) -> None:
        """Release the lock (the kernel also drops it if the process dies)."""
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def committed(self) -> bool:
        """Whether any epoch was committed (a checkpoint, a metrics row) or the run finished."""
        ckpt = self.path / CKPT
        return ((ckpt.is_dir() and any(ckpt.iterdir())) or (self.path / METRICS).is_file()
                or (self.path / SUMMARY).is_file())

    def discard(self) -> None:
        """Remove what ``create`` and this run made, when no epoch was committed (a run that failed
        to start must not look like a run): the directories it created, or, in a directory that
        existed (empty) before, everything in it. A directory that existed is never removed."""
        if self.committed():
            return
        pointer = self.path / "ray-tmp.path"  # a local Ray's temp dir kept outside (short socket paths)
        if pointer.is_file():
            outside = Path(pointer.read_text().strip())
            if outside.name.startswith("vflray-"):
                shutil.rmtree(outside, ignore_errors=True)
        if self._made is not None:
            shutil.rmtree(self._made, ignore_errors=True)
            return
        for child in self.path.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)

    def _refuse_foreign_content(self, key: str) -> None:
        names = sorted(p.name for p in self.path.iterdir() if p.name not in (LOCK_FILE, ORIGIN))
        if {CONFIG, METRICS, CKPT} & set(names):
            raise ConfigError(key, f"{self.path} already holds a run; continue it with "
                              f"`vfl run --resume {self.path}` or choose another directory")
        if names:
            shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
            raise ConfigError(key, f"{self.path} is not empty ({shown}) and is not a vfl run; "
                              "give a new or empty directory")

    # ---- config ------------------------------------------------------------------------------
    def config_history(self) -> list[str]:
        """The ``# history:`` lines of the resolved config (creation, then one per resume)."""
        p = self.path / CONFIG
        if not p.is_file():
            return []
        lines = p.read_text(errors="replace").splitlines()
        if HISTORY not in lines:
            return []
        out = []
        for line in lines[lines.index(HISTORY) + 1:]:
            if not line.startswith("#   "):
                break
            out.append(line[4:])
        return out

    def write_config(self, cfg: dict[str, Any], *, note: str | None = None) -> None:
        """Write the resolved config atomically; ``note`` is appended to its history."""
        history = self.config_history()
        if note:
            history.append(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {note}")
        head = ["# The exact settings of this run (resume reads them).", HISTORY]
        head += [f"#   {h}" for h in history]
        body = yaml.safe_dump(cfg, sort_keys=False)
        head.append(f"{DIGEST}{config_digest(body)}")  # the settings' own digest: a damaged file is refused
        try:
            private_dir(self.path)
        except OSError as exc:
            raise RunDirError(f"cannot create {self.path}: {exc.strerror or exc}") from None
        write_atomic(self.path / CONFIG, ("\n".join(head) + "\n" + body).encode())

    def read_config(self, *, key: str = "--resume") -> dict[str, Any]:
        """The resolved config; refused when it names code to import and the directory was not
        created by this user here (``vfl.engine.trust``: someone else's run directory is untrusted input)."""
        p = self.path / CONFIG
        if not p.exists():
            raise ConfigError(key, f"{self.path} has no {CONFIG}; is it a run directory?")
        try:
            text = p.read_text()
            data = load_yaml(text)
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
            raise ConfigError(key, f"{p} is unreadable: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise ConfigError(key, f"{p} does not hold a mapping of config keys")
        damaged = check_config_text(text)
        if damaged is not None:  # never filled with defaults: a resume must compute what the run computed
            raise RunFileError(f"{p}: {damaged}; the run's settings are unknown, so it cannot be read back")
        check_code(self.path, data, key=key)
        return data

    # ---- metrics -----------------------------------------------------------------------------
    def append_metrics(self, record: dict[str, Any]) -> None:
        line = json.dumps(_clean(record)) + "\n"
        try:
            with open(open_private(self.path / METRICS, os.O_WRONLY | os.O_APPEND), "a") as f:
                f.write(line)
                f.flush()
        except OSError as exc:
            raise RunDirError(f"cannot write {self.path / METRICS}: {exc.strerror or exc}") from None

    def read_metrics(self) -> list[dict[str, Any]]:
        """The rows; a partial LAST line (a run killed mid-write) is ignored, any other bad line
        raises ``RunDirError`` naming it."""
        p = self.path / METRICS
        if not p.exists():
            return []
        lines = p.read_text(errors="replace").splitlines()
        rows = []
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or not isinstance(row.get("epoch"), int):
                    raise ValueError("not a metrics row")
            except ValueError:
                if i == len(lines) - 1:
                    break
                raise RunDirError(f"{p} line {i + 1} is not a metrics row (corrupted run)") from None
            rows.append(row)
        return rows

    def reconcile_metrics(self, checkpoint: Checkpoint | None) -> list[dict[str, Any]]:
        """Rewrite metrics.jsonl to one row per checkpointed epoch (drop rows past the checkpoint
        and duplicates; rows lost, e.g. a deleted file, are restored from the checkpoint, which carries
        every committed row). A checkpoint of an older version carries only its own row: a gap is refused."""
        last = checkpoint.epoch if checkpoint is not None else -1
        by_epoch: dict[int, dict[str, Any]] = {}
        for row in self.read_metrics():
            if row["epoch"] <= last:
                by_epoch[row["epoch"]] = row  # a later duplicate is the replayed, committed one
        saved = checkpoint.engine.get("history") if checkpoint is not None else None
        for row in saved if isinstance(saved, list) else []:
            if isinstance(row, dict) and isinstance(row.get("epoch"), int) and row["epoch"] <= last:
                by_epoch[row["epoch"]] = row  # the committed row itself
        record = checkpoint.engine.get("record") if checkpoint is not None else None
        if record is not None:
            by_epoch[last] = record
        missing = [e for e in range(last + 1) if e not in by_epoch]  # every run starts at epoch 0
        if missing and checkpoint is not None:
            raise RunFileError(f"{self.path / METRICS} lacks the rows of epochs {missing} that checkpoint "
                               f"{checkpoint.folder.name} committed (deleted or truncated), and that checkpoint is "
                               "from a version that kept only its own row: they cannot be rebuilt")
        rows = [by_epoch[e] for e in sorted(by_epoch)]
        write_atomic(self.path / METRICS, "".join(json.dumps(_clean(r)) + "\n" for r in rows).encode())
        return rows

    def config_digest(self) -> str | None:
        """The digest ``config.resolved.yaml`` states for its settings (None: none, or from before digests)."""
        try:
            return split_config((self.path / CONFIG).read_text())[2]
        except (OSError, UnicodeDecodeError):
            return None

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_atomic(self.path / SUMMARY, json.dumps(_clean(summary), indent=2).encode())

    # ---- checkpoints -------------------------------------------------------------------------
    def save_checkpoint(self, epoch: int, nodes: dict[int, bytes], engine: dict[str, Any], *, step: int = 0) -> Path:
        """After epoch ``epoch``, or (``step`` > 0) after ``step`` steps of epoch ``epoch + 1``."""
        return self.checkpoints.save(epoch, nodes, _clean(engine), step=step)

    def load_checkpoint(self) -> Checkpoint | None:
        """The newest intact checkpoint (see ``CheckpointStore.load_latest``)."""
        return self.checkpoints.load_latest()

    def latest_checkpoint(self) -> tuple[dict[int, bytes], dict[str, Any]] | None:
        ckpt = self.load_checkpoint()
        return None if ckpt is None else (ckpt.nodes, ckpt.engine)
