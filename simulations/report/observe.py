"""Read a node's recorded view as attack inputs: rows of received arrays keyed by training sample.

A node knows the shared batch schedule, so a round tag (phase, epoch, step) gives the sample ids
of the rows it received — no ground truth is involved in this mapping.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from parties.vertical import wire as vw
from parties.vertical.wire import party_node_id
from simulations.report.run import RunArtifacts, Skipped
from vfl.core.errors import DataError
from vfl.runtime.views import NodeView
from vfl.secagg import unpack_bits

# Views recorded before the #29.2 wire vocabulary (commit 7bb5874) hold the long config key names:
# the reader takes either (key -> its name in older view files).
OLD_KEYS = {vw.Key.EPOCH: "epoch", vw.Key.STEP: "step", vw.Key.FORWARD: "forward", vw.Key.GRAD_STEP: "grad_step",
            vw.Key.ROWS: "rows", vw.Key.COLS: "cols", vw.Key.MASKED: "masked"}


@dataclass
class Observed:
    """Rows one node received in one round, with the batch's sample ids."""

    phase: str
    epoch: int
    step: int
    ids: np.ndarray
    rows: np.ndarray  # (len(ids), ...)
    entry: dict[str, Any]


def batch_ids(run: RunArtifacts, phase: str, epoch: int, step: int) -> np.ndarray:
    sched = run.schedule
    return sched.train_ids(epoch, step) if phase == "train" else sched.test_ids(step)


def received_gradients(run: RunArtifacts, index: int) -> list[Observed]:
    """The gradient rows party ``index`` received, per training step, in arrival order."""
    view = run.view(f"party{index}")
    out = []
    for e, arr in view.select(kind=vw.Kind.TRAIN_FORWARD, record=vw.Record.GRAD, phase="train"):
        if e["name"] not in (vw.Array.GRAD, f"{vw.Array.GRAD}{index}"):
            continue
        ids = batch_ids(run, "train", e["epoch"], e["step"])
        out.append(Observed("train", e["epoch"], e["step"], ids, np.asarray(arr, np.float64).reshape(len(ids), -1), e))
    if not out:
        raise Skipped(f"party{index}'s view holds no received gradient")
    return out


def recorded(config: Mapping[str, Any], key: str, default: Any = DataError) -> Any:
    """A key of a recorded config record under its current name or, in an older view file, its old one."""
    for name in (key, OLD_KEYS.get(key)):
        if name is not None and name in config:
            return config[name]
    if default is DataError:
        raise DataError(f"recorded view: config record without key {key!r} (or its old name "
                        f"{OLD_KEYS.get(key, key)!r}); has {sorted(config)}")
    return default


def decode_entry(entry: dict[str, Any], arr: np.ndarray) -> tuple[str, np.ndarray]:
    """("float"|"int"|"masked", (rows, cols) values) of one received embedding array."""
    if entry["name"] == vw.Array.FLOAT:
        return "float", np.asarray(arr, np.float64)
    if entry["name"] == vw.Array.INTS:
        return "int", np.asarray(arr, np.int64)
    enc = entry["config"].get(vw.Record.ENC, {})
    rows, cols, k = (int(recorded(enc, key)) for key in (vw.Key.ROWS, vw.Key.COLS, vw.Key.BITS))
    values = unpack_bits(np.asarray(arr, np.uint8).tobytes(), k, rows * cols).reshape(rows, cols).astype(np.int64)
    return ("masked" if recorded(enc, vw.Key.MASKED, False) else "int"), values


def server_embeddings(run: RunArtifacts, phase: str = "train") -> dict[int, list[Observed]]:
    """Per party index: the embedding rows the server received from it that it can read on their own
    (float or unmasked integers). Masked (secure-aggregation) vectors are not readable: empty."""
    view = run.view("server")
    out: dict[int, list[Observed]] = {}
    for e, arr in view.select(kind=vw.Kind.TRAIN_FORWARD if phase == "train" else vw.Kind.EVAL_FORWARD, record=vw.Record.EMB,
                              phase=phase):
        kind, values = decode_entry(e, arr)
        if kind == "masked":
            continue
        index = int(e["src"]) - party_node_id(0)
        ids = batch_ids(run, phase, e["epoch"], e["step"])
        out.setdefault(index, []).append(Observed(phase, e["epoch"], e["step"], ids, values.reshape(len(ids), -1), e))
    return out


def server_fused(run: RunArtifacts, phase: str = "train") -> list[Observed]:
    """What the server derived and fed its head: the fused input (for SecAgg: the decoded sum)."""
    view: NodeView = run.view("server")
    out = []
    for e, arr in view.select(kind="derived", name="fused", phase=phase):
        ids = batch_ids(run, phase, e["epoch"], e["step"])
        out.append(Observed(phase, e["epoch"], e["step"], ids, np.asarray(arr, np.float64).reshape(len(ids), -1), e))
    return out


def latest_by_sample(obs: list[Observed]) -> tuple[np.ndarray, np.ndarray]:
    """(sample ids, rows): each sample's most recent observation (the model closest to the final one)."""
    latest: dict[int, np.ndarray] = {}
    for o in obs:
        for sid, row in zip(o.ids, o.rows, strict=True):
            latest[int(sid)] = row
    ids = np.array(sorted(latest), dtype=np.int64)
    return ids, np.stack([latest[int(i)] for i in ids]) if len(ids) else np.zeros((0, 0))
