"""Received-message views: per node, the arrays of the messages it received (opt-in, bounded).

Attacks must run on what a participant really got, so the host that decodes a node's incoming
wires keeps a copy of their arrays (``privacy.record_views``). A node may also note what it
legitimately *derives* from them (the server's fused input: for secure aggregation the decoded
SUM, which is exactly what the protocol reveals) — never another node's internals.

On disk (``views/`` in the run directory, format 1; see ``docs/attacks.md``):
``views/<node>.npz`` holds one array per entry under keys ``a000000``, ``a000001``, ...
(``numpy.savez``, no pickle); ``views/index.json`` lists per node the entries in arrival
order: key, src, kind, round tag (phase, epoch, step), record, name, dtype, shape, the message's
config records (scalars only) and whether the entry is derived.
"""

from __future__ import annotations

import json
import os
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from flwr.common import Message

from vfl.core.errors import DataError
from vfl.core.private_fs import open_private, private_dir, write_atomic
from vfl.runtime.message import from_array, parse_round, round_of

FORMAT = 1
INDEX = "index.json"
DERIVED = "derived"


@dataclass(frozen=True)
class ViewPolicy:
    """Which rounds a host records and how many bytes it may keep."""

    max_bytes: int
    every: int = 1
    phases: tuple[str, ...] = ("train", "eval")

    @classmethod
    def from_privacy(cls, privacy: Any) -> ViewPolicy | None:
        """The policy of a ``PrivacyConfig`` (None when ``record_views`` is off: zero cost)."""
        if privacy is None or not getattr(privacy, "record_views", False):
            return None
        return cls(max_bytes=int(float(privacy.record_max_mb) * 2**20), every=int(privacy.record_every))

    def wants(self, tag: str) -> bool:
        """Train rounds are sampled: (epoch + step) % every == 0 (every step is covered over ``every`` epochs)."""
        try:
            phase, epoch, step = parse_round(tag)
        except Exception:
            return False
        if phase not in self.phases:
            return False
        return phase != "train" or (epoch + step) % self.every == 0


def _scalars(value: Any) -> Any:
    if isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list) and all(isinstance(v, bool | int | float | str) for v in value):
        return list(value)
    return None  # bytes (keys, sealed shares) are not kept


def _configs(message: Message) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for rec_name, rec in message.content.config_records.items():
        kept = {k: _scalars(v) for k, v in rec.items()}
        out[rec_name] = {k: v for k, v in kept.items() if v is not None}
    return out


@dataclass
class ViewLog:
    """One host's recorder: entries per node in arrival order, until the byte budget is spent."""

    policy: ViewPolicy
    entries: dict[int, list[tuple[dict[str, Any], np.ndarray]]] = field(default_factory=dict)
    dropped: dict[int, int] = field(default_factory=dict)
    nbytes: int = 0

    def _add(self, node_id: int, meta: dict[str, Any], array: np.ndarray) -> None:
        if self.nbytes + array.nbytes > self.policy.max_bytes:
            self.dropped[node_id] = self.dropped.get(node_id, 0) + 1
            return
        self.nbytes += array.nbytes
        self.entries.setdefault(node_id, []).append((meta, array))

    def record(self, node_id: int, message: Message, *, skip: frozenset[str] = frozenset()) -> None:
        """Keep the arrays of ``message`` as received by ``node_id`` (if its round is sampled), but those named
        in ``skip`` (the node's ``unviewed``: ciphertexts under another node's key, bulky and unreadable to it)."""
        md = message.metadata
        if not message.has_content() or not self.policy.wants(round_of(message)):
            return
        configs = _configs(message)
        for rec_name, rec in message.content.array_records.items():
            for name, arr in rec.items():
                if name in skip:
                    continue
                meta = {"src": int(md.src_node_id), "kind": md.message_type, "round": round_of(message),
                        "record": rec_name, "name": name, "config": configs, "derived": False}
                self._add(node_id, meta, from_array(arr))

    def derive(self, node_id: int, tag: str, name: str, value: np.ndarray) -> None:
        """Keep what ``node_id`` computed from what it received (e.g. the decoded secure sum)."""
        if not self.policy.wants(tag):
            return
        meta = {"src": node_id, "kind": DERIVED, "round": tag, "record": DERIVED, "name": name, "config": {},
                "derived": True}
        self._add(node_id, meta, np.array(value, copy=True))

    def export(self) -> dict[int, dict[str, Any]]:
        """Everything recorded since the last export, per node (and forget it): ``{"entries", "arrays",
        "dropped"}``. The byte budget is the host's for the whole run: exports do not refill it."""
        out = {nid: {"entries": [m for m, _ in rows], "arrays": [a for _, a in rows],
                     "dropped": self.dropped.get(nid, 0)} for nid, rows in self.entries.items()}
        for nid, n in self.dropped.items():
            out.setdefault(nid, {"entries": [], "arrays": [], "dropped": n})
        self.entries, self.dropped = {}, {}
        return out


# ---- run directory: write / read -------------------------------------------------------------
def write_views(directory: str | Path, exports: Mapping[int, Mapping[str, Any]], *, names: Mapping[int, str],
                roles: Mapping[int, str], policy: ViewPolicy) -> Path:
    """Write ``<node>.npz`` + ``index.json``; entries already there (a resumed run) are kept first."""
    root = Path(directory)
    private_dir(root)  # owner-only (0700), as the run directory
    index: dict[str, Any] = _read_index(root) if (root / INDEX).exists() else {"format": FORMAT, "nodes": {}}
    index["policy"] = {"max_bytes": policy.max_bytes, "every": policy.every, "phases": list(policy.phases)}
    for nid, exp in sorted(exports.items()):
        name = names[nid]
        node: dict[str, Any] = index["nodes"].get(name) or {"node_id": nid, "role": roles[nid], "file": f"{name}.npz",
                                            "entries": [], "dropped": 0}
        arrays: dict[str, np.ndarray] = {}
        node["file"] = f"{name}.npz"  # never a path read back from the index (it may be crafted)
        if node["entries"]:
            arrays = _read_arrays(root / node["file"])
        for meta, arr in zip(exp["entries"], exp["arrays"], strict=True):
            key = f"a{len(node['entries']):06d}"
            arrays[key] = np.ascontiguousarray(arr)
            phase, epoch, step = parse_round(meta["round"])
            node["entries"].append({"key": key, **meta, "phase": phase, "epoch": epoch, "step": step,
                                    "dtype": str(arr.dtype), "shape": list(arr.shape)})
        node["dropped"] = int(node.get("dropped", 0)) + int(exp.get("dropped", 0))
        node["truncated"] = node["dropped"] > 0
        with open(open_private(root / node["file"], os.O_WRONLY | os.O_TRUNC), "wb") as f:  # 0600
            np.savez(f, **arrays)  # type: ignore[arg-type]
        index["nodes"][name] = node
    write_atomic(root / INDEX, json.dumps(index).encode())  # a kill leaves the old index or the new one
    return root


def mark_replaced(directory: str | Path, *, after_epoch: int, reason: str) -> int:
    """Flag the entries of epochs after ``after_epoch`` that are not flagged yet as ``replaced``
    (an aborted attempt: a restart or a resume redoes those epochs). They stay: the nodes did
    receive them, so attacks may use them; ``replaced`` tells them apart from the redone attempt.
    The index lists every aborted attempt (``aborted_attempts``): what the nodes received in an
    attempt killed before its views were written is not in the views. Returns the entries flagged."""
    root = Path(directory)
    if not (root / INDEX).exists():
        return 0
    index = _read_index(root)
    flagged = 0
    for node in index["nodes"].values():
        for e in node["entries"]:
            if int(e.get("epoch", -1)) > after_epoch and not e.get("replaced"):
                e["replaced"] = reason
                flagged += 1
    index.setdefault("aborted_attempts", []).append({"reason": reason, "after_epoch": after_epoch,
                                                     "entries_replaced": flagged})
    write_atomic(root / INDEX, json.dumps(index).encode())
    return flagged


def _read_arrays(path: Path) -> dict[str, np.ndarray]:
    """Every array of a views ``.npz``; ``DataError`` naming the file when it is damaged."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise DataError(f"{path}: cannot read recorded views ({type(exc).__name__}: {exc})") from None


def _confined(root: Path, name: Any) -> Path:
    """``root / name`` for a plain file name of the index; ``DataError`` for anything else
    (``../x``, an absolute path, a sub-folder): a crafted index never reaches outside ``root``."""
    if not isinstance(name, str) or not name or Path(name).name != name or name in {".", ".."}:
        raise DataError(f"{root / INDEX}: view file {name!r} is not a plain file name inside {root}")
    return root / name


def _read_index(root: Path) -> dict[str, Any]:
    try:
        with open(root / INDEX) as f:
            index = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{root / INDEX}: cannot read the view index ({exc})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        got = index.get("format") if isinstance(index, dict) else type(index).__name__
        raise DataError(f"{root / INDEX}: view format {got!r}, expected {FORMAT}")
    nodes = index.get("nodes")
    if not isinstance(nodes, dict) or not all(
            isinstance(n, dict) and isinstance(n.get("entries"), list) for n in nodes.values()):
        raise DataError(f"{root / INDEX}: damaged view index (expected nodes -> {{file, entries, ...}})")
    for n in nodes.values():
        _confined(root, n.get("file"))
    return index


@dataclass
class NodeView:
    """What one node received (and derived), read back from a run directory."""

    name: str
    node_id: int
    role: str
    entries: list[dict[str, Any]]
    path: Path
    truncated: bool = False
    _arrays: dict[str, np.ndarray] | None = None

    def array(self, key: str) -> np.ndarray:
        if self._arrays is None:
            self._arrays = _read_arrays(self.path)
        if key not in self._arrays:
            raise DataError(f"{self.path}: recorded view {key!r} listed in the index is missing")
        return self._arrays[key]

    def select(self, *, kind: str | None = None, record: str | None = None, name: str | None = None,
               phase: str | None = None, src: int | None = None,
               replaced: bool = False) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
        """(entry, array) pairs matching every given field, in arrival order; entries of an aborted
        attempt (``replaced``: redone after a restart or resume) only with ``replaced=True``."""
        for e in self.entries:
            if e.get("replaced") and not replaced:
                continue
            if ((kind is None or e["kind"] == kind) and (record is None or e["record"] == record)
                    and (name is None or e["name"] == name) and (phase is None or e["phase"] == phase)
                    and (src is None or e["src"] == src)):
                yield e, self.array(e["key"])


def load_views(run_dir: str | Path) -> dict[str, NodeView]:
    """Every node's view of a run (``DataError`` naming the folder when the run recorded none)."""
    root = Path(run_dir) / "views"
    if not (root / INDEX).exists():
        raise DataError(f"{run_dir}: no recorded views ({root / INDEX} missing); "
                        "rerun with --set privacy.record_views=true")
    index = _read_index(root)
    return {name: NodeView(name, int(n["node_id"]), str(n["role"]), list(n["entries"]), _confined(root, n["file"]),
                           bool(n.get("truncated", False)))
            for name, n in index["nodes"].items()}


def save_run_views(run_dir: str | Path, transport: Any, groups: Any, privacy: Any) -> Path | None:
    """Driver side, with every checkpoint and at the end of a run: fetch what every host recorded
    since the last call and append it to ``run_dir/views`` (a kill loses at most one epoch's views)."""
    policy = ViewPolicy.from_privacy(privacy)
    if policy is None:
        return None
    specs = {s.node_id: s for g in groups for s in g.specs}
    return write_views(Path(run_dir) / "views", transport.views(), names={n: s.name for n, s in specs.items()},
                       roles={n: s.role for n, s in specs.items()}, policy=policy)
