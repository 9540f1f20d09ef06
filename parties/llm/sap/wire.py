"""SAP wire vocabulary shared by the vendor and customer nodes: kinds, records, codec.

What crosses the wire (Shen et al., arXiv:2312.15603, Algorithm 1; labels are not sent, but see below):
  query.sap_bottom vendor -> customer  bottom weights + public model config (once, setup phase)
  train.reps       customer -> vendor  privatized representations, packed real tokens + lengths
                                       (frozen bottom: the whole train set once, in chunks;
                                        trainable bottom: one fresh batch per step)
  train.logits     vendor -> customer  top-model output for the batch
  train.grad       customer -> vendor  dLoss/dlogits (the customer computes the loss)
  train.bottom_grad vendor -> customer dLoss/d(received reps) (trainable bottom only)
  evaluate.reps / evaluate.logits      the same for the test set (inference)
Driver-issued ``train.step``/``train.forward``/``*.upload``/``query.*`` are control messages.
Not hidden from the vendor: each text's token count (``lengths``), and every label through the sign
pattern of dLoss/dlogits (softmax − one-hot); SAP protects the inputs, not the labels.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from flwr.common import ConfigRecord, Message

from parties.llm.common import wire as common
from vfl.core.errors import ProtocolError
from vfl.runtime import message as wire

VENDOR_ID, CUSTOMER_ID = 0, 1


class Kind(common.Kind):
    """Message kinds between the parties, then the driver's control kinds (besides TRAIN_STEP /
    EVAL_STEP, with which the driver steps the vendor in a frozen-bottom run)."""

    BOTTOM = "query.sap_bottom"  # vendor -> customer, setup
    TRAIN_REPS, EVAL_REPS = "train.reps", "evaluate.reps"
    TRAIN_LOGITS, EVAL_LOGITS = "train.logits", "evaluate.logits"
    TRAIN_GRAD, TRAIN_BOTTOM_GRAD = "train.grad", "train.bottom_grad"
    INIT = "query.sap_init"  # driver -> vendor: the task sizes
    TRAIN_FORWARD, EVAL_FORWARD = "train.forward", "evaluate.forward"  # driver -> customer (trainable bottom)
    TRAIN_UPLOAD, EVAL_UPLOAD = "train.upload", "evaluate.upload"  # driver -> customer (frozen bottom)
    QUERY_EIA, QUERY_AIA, QUERY_TRUTH = "query.eia", "query.aia", "query.truth"


class Record(common.Record):
    """Record names (STEP is the config epoch, step, mode, offset)."""

    REPS, LOGITS, GRAD, BGRAD = "reps", "logits", "grad", "bgrad"
    TASK, MODEL, WEIGHTS = "task", "model", "weights"  # INIT config; BOTTOM config (model json) + arrays
    EIA, AIA, AUX = "eia", "aia", "aux"  # attack replies; AUX: the attacker's known attribute values
    ASK, TRUTH = "ask", "truth"  # QUERY_TRUTH: asked sample ids; the customer's ground truth


class Mode:
    """The ``mode`` of a STEP record: a chunk of a whole-split upload, or one training batch."""

    UPLOAD, BATCH = "upload", "batch"


def step_config(*, epoch: int, step: int, mode: str = Mode.BATCH, offset: int = 0) -> ConfigRecord:
    return wire.config(epoch=epoch, step=step, mode=mode, offset=offset)


def read_step(m: Message) -> tuple[int, int, str, int]:
    """(epoch, step, mode, offset) of a message."""
    c = common.step_of(m)
    try:
        return (wire.config_int(c, "epoch"), wire.config_int(c, "step"), str(c["mode"]),
                wire.config_int(c, "offset"))
    except KeyError:
        raise ProtocolError(f"{m.metadata.message_type} from node {m.metadata.src_node_id} has no step config") from None


def send(kind: str, *, src: int, dst: int, to: Message | None, phase: str, epoch: int, step: int,
         mode: str = Mode.BATCH, offset: int = 0, records: Mapping[str, Mapping[str, np.ndarray]] | None = None,
         **arrays: Mapping[str, np.ndarray]) -> Message:
    """A protocol message carrying named array records (``reps={"h": ..., "lengths": ...}``, or
    ``records={Record.REPS: {...}}`` when the names are the vocabulary's constants)."""
    return common.send(kind, src=src, dst=dst, to=to, phase=phase,
                       step=step_config(epoch=epoch, step=step, mode=mode, offset=offset),
                       records={**(records or {}), **arrays})


def split_packed(flat: np.ndarray, lengths: np.ndarray) -> list[np.ndarray]:
    """Packed (T, ...) rows -> one array per sample."""
    if int(lengths.sum()) != len(flat):
        raise ProtocolError(f"packed rows {len(flat)} != sum of lengths {int(lengths.sum())}")
    return np.split(flat, np.cumsum(lengths)[:-1]) if len(lengths) else []
