"""What every split-LLM protocol shares on the wire: the driver's control kinds, three records, the one
message builder and the packed-rows codec.

Each protocol's vocabulary (``parties/llm/p3eft/wire.py``, ``parties/llm/sap/wire.py``,
``parties/llm/ushape/wire.py``) extends ``Kind`` and ``Record``, so a node or strategy reads every name
from its own protocol's classes (as Flower's ``secaggplus_constants`` groups ``Stage`` and ``RecordKey``),
and builds its messages with ``send``: a ``step`` config record (``epoch``, ``step`` and the protocol's own
fields), more config records and named array records. Ragged token sequences travel packed (``pack``:
the real tokens only, with the lengths beside them; ``unpack`` restores the padded batch and its mask).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from flwr.common import ArrayRecord, ConfigRecord, Message

from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire


class Kind:
    """Message kinds (``metadata.message_type``) of driver control messages."""

    TRAIN_STEP = "train.step"
    EVAL_STEP = "evaluate.step"
    QUERY_METRICS = "query.metrics"  # the label owner's accuracy and loss


class Record:
    """Record names inside a message's content."""

    STEP = "step"  # config record: which step a message belongs to
    METRICS = "metrics"  # metric record of a query.metrics reply
    STEP_LOSS = "step_loss"  # array record of a training query.metrics reply: each step's loss since the last query


def step_of(m: Message) -> ConfigRecord:
    """The ``step`` config record of ``m``, read straight from the message (flwr's ``config_records`` view
    copies every record); a ProtocolError naming the kind and sender when it has none."""
    c = wire.record_of(m, Record.STEP, ConfigRecord)
    if c is None:
        raise ProtocolError(f"{m.metadata.message_type} from node {m.metadata.src_node_id} has no step record")
    return c


def send(kind: str, *, src: int, dst: int, phase: str, step: ConfigRecord, to: Message | None = None,
         records: Mapping[str, Mapping[str, np.ndarray]] | None = None,
         configs: Mapping[str, ConfigRecord] | None = None) -> Message:
    """A protocol message: the ``step`` record (its ``epoch`` and ``step`` make the round tag), ``configs``
    (more config records) and ``records`` (named array records, ``{Record.HIDDEN: {"h": ..., "lengths": ...}}``);
    ``to``: the message this one answers."""
    named: dict[str, ArrayRecord | ConfigRecord] = {Record.STEP: step, **(configs or {})}
    named.update({name: wire.arrays(**arrs) for name, arrs in (records or {}).items()})
    epoch, number = wire.config_int(step, "epoch"), wire.config_int(step, "step")
    return wire.make(kind, src=src, dst=dst, round=wire.round_tag(epoch, number, phase), content=wire.records(**named),
                     reply_to=to.metadata.message_id if to is not None else "")


def pack(h: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """(B, L, d) padded -> (sum(lengths), d): only real tokens go on the wire."""
    mask = torch.arange(h.shape[1], device=h.device).unsqueeze(0) < lengths.to(h.device).unsqueeze(1)
    return h[mask]


def unpack(flat: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(T, d) packed -> (B, max(lengths), d) zero-padded and the (B, L) attention mask."""
    lengths = lengths.to(torch.long)
    width = int(lengths.max()) if len(lengths) else 0
    mask = torch.arange(width, device=flat.device).unsqueeze(0) < lengths.to(flat.device).unsqueeze(1)
    out = flat.new_zeros(len(lengths), width, flat.shape[-1])
    out[mask] = flat
    return out, mask.to(torch.long)
