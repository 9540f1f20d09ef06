"""Audit canaries (one-run audit, Steinke, Nasr & Jagielski, NeurIPS 2023): in training rounds the
embedding rows of the canary samples become bit·C in every coordinate, the bit hidden from the server.

±C·1 is the vertex pair of the feature-privacy relation the accountant bounds (one party's
features of one sample change; any embedding stays in [-C, C]^P), so the audit tests the worst
case. The mod runs first, before quantization, noise and masking: the canary goes through the
same mechanism as every other row.
"""

from __future__ import annotations

import numpy as np
from flwr.common import Message

from vfl.data.sampling import Schedule
from vfl.runtime import message as wire
from vfl.runtime.mods import Mod, ModContext

EMB = "emb"


def canary_mod(*, ids: np.ndarray, bits: np.ndarray, c: float, schedule: Schedule) -> Mod:
    """Replace the outgoing embedding rows of canary samples by ``bit * c`` (train phase only)."""
    ids = np.asarray(ids, dtype=np.int64)
    value = {int(i): float(b) * c for i, b in zip(ids, bits, strict=True)}

    def mod(message: Message, ctx: ModContext) -> Message:
        if ctx.phase != "train":
            return message
        batch = schedule.train_ids(ctx.epoch, ctx.step)
        rows = np.flatnonzero(np.isin(batch, ids))
        if rows.size == 0:
            return message
        e = np.array(wire.get_array(message, EMB, "e"), dtype=np.float32, copy=True)
        e[rows] = np.array([value[int(batch[r])] for r in rows], dtype=np.float32)[:, None]
        message.content.array_records[EMB] = wire.arrays(e=e)
        return message

    return mod
