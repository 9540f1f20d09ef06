"""Wire vocabulary of split fine-tuning over a model-server API (P3EFT, ICLR 2025, Sec. 3.1): kinds and records.

client -> server (up)      train.forward    inputs (token ids, lengths) + one adapter's LoRA tensors
server -> client (down)    train.activations  h(x, θ) (B, d)
client -> server (up)      train.backprop   inputs + adapter + k cotangent pieces ĝ (k, B, d)
server -> client (down)    train.grads      k LoRA gradient sets, each tensor stacked (k, *shape)
                           evaluate.forward / evaluate.activations: the same for the test set
driver -> node (control)   train.step, evaluate.step (client); query.metrics (client); query.log (server)
Labels, the head, the mixing weights and the coefficients α never leave the client. The ``step``
record carries (epoch, step, tag, adapter): ``tag`` matches replies to requests and ``adapter``
is the client's index of the adapter set (the server could link sets by their weights anyway).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from flwr.common import ArrayRecord, ConfigRecord, Message

from parties.llm.common import wire as common
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire


class Kind(common.Kind):
    """Message kinds: client <-> model servers, and the driver's ``query.log`` to a server."""

    TRAIN_FORWARD, EVAL_FORWARD = "train.forward", "evaluate.forward"
    TRAIN_ACTS, EVAL_ACTS = "train.activations", "evaluate.activations"
    TRAIN_BACKPROP, TRAIN_GRADS = "train.backprop", "train.grads"
    QUERY_LOG = "query.log"  # drain the server's observation log


class Record(common.Record):
    """Record names: arrays INPUTS..GRADS, LOG; config WHICH; metrics STATS."""

    INPUTS, ADAPTER, GRAD, ACT, GRADS = "inputs", "adapter", "grad", "act", "grads"
    LOG = "log"  # query.log reply: observed rows and their (epoch, step, adapter, row) keys
    WHICH = "which"  # query.metrics: {"phase": "train" | "eval"}
    STATS = "stats"  # query.log reply: the server's busy time and call counts


@dataclass(frozen=True)
class StepTag:
    epoch: int
    step: int
    tag: int = 0
    adapter: int = -1


def step_record(t: StepTag) -> ConfigRecord:
    return wire.config(epoch=t.epoch, step=t.step, tag=t.tag, adapter=t.adapter)


def read_step(m: Message) -> StepTag:
    c = common.step_of(m)
    try:
        return StepTag(*(wire.config_int(c, k) for k in ("epoch", "step", "tag", "adapter")))
    except KeyError:
        raise ProtocolError(f"{m.metadata.message_type} from node {m.metadata.src_node_id} has no step record") from None


def request(kind: str, *, src: int, dst: int, phase: str, tag: StepTag,
            records: Mapping[str, Mapping[str, np.ndarray]] | None = None,
            configs: Mapping[str, ConfigRecord] | None = None, **arrays: Mapping[str, np.ndarray]) -> Message:
    """A protocol message: the step record plus named array records (``inputs={"ids": ...}``, or
    ``records={Record.INPUTS: {...}}`` when the names are the vocabulary's constants) and ``configs``
    (more config records, e.g. the ``theta`` versions of an adapter delta)."""
    return common.send(kind, src=src, dst=dst, phase=phase, step=step_record(tag), records={**(records or {}), **arrays},
                       configs=configs)


def respond(to: Message, kind: str, **arrays: Mapping[str, np.ndarray]) -> Message:
    """The reply to ``to``: same round and step record, new arrays."""
    content = wire.records(**{Record.STEP: common.step_of(to)}, **{k: wire.arrays(**v) for k, v in arrays.items()})
    return wire.reply(to, kind, content=content)


def inputs(ids: np.ndarray, lengths: np.ndarray, types: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """Token ids trimmed to the longest text of the batch (int32), per-text lengths and, for a
    sentence pair on a model with segment embeddings, the token types (int8, same width)."""
    width = max(1, int(lengths.max())) if len(lengths) else 1
    out = {"ids": np.ascontiguousarray(ids[:, :width], dtype=np.int32), "lengths": lengths.astype(np.int32)}
    if types is not None:
        out["types"] = np.ascontiguousarray(types[:, :width], dtype=np.int8)
    return out


def read_types(m: Message) -> torch.Tensor | None:
    """The token types of a request's inputs (None: single texts or a model without segments)."""
    if not wire.has_array(m, Record.INPUTS, "types"):
        return None
    types = torch.from_numpy(wire.get_array(m, Record.INPUTS, "types").astype(np.int64))
    ids = wire.get_array(m, Record.INPUTS, "ids")
    if tuple(types.shape) != tuple(ids.shape) or bool(((types < 0) | (types > 1)).any()):
        raise ProtocolError(f"{m.metadata.message_type}: malformed token types {tuple(types.shape)} "
                            f"for ids {tuple(ids.shape)} (allowed values 0, 1)")
    return types


def read_inputs(m: Message) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.from_numpy(wire.get_array(m, Record.INPUTS, "ids").astype(np.int64))
    lengths = torch.from_numpy(wire.get_array(m, Record.INPUTS, "lengths").astype(np.int64))
    if ids.dim() != 2 or lengths.shape != (ids.shape[0],) or bool((lengths > ids.shape[1]).any()):
        raise ProtocolError(f"{m.metadata.message_type}: malformed inputs ids {tuple(ids.shape)}, "
                            f"lengths {tuple(lengths.shape)}")
    return ids, lengths


def to_numpy(tensors: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    return {k: v.detach().cpu().numpy().astype(np.float32, copy=False) for k, v in tensors.items()}


def read_record(m: Message, record: str) -> dict[str, torch.Tensor]:
    """Every array of one record as tensors (empty if the record is absent)."""
    rec = wire.record_of(m, record, ArrayRecord)  # (flwr's view copies every record)
    return {} if rec is None else {k: torch.from_numpy(np.array(wire.from_array(a))) for k, a in rec.items()}
