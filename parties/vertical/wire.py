"""Message kinds, record names and keys of the vertical-FL step, in one place: a class of string
constants per sort of name (``Kind``, ``Record``, ``Array``, ``Key``), the shape of the split-LLM
vocabularies (``parties/llm/*/wire.py``) and of Flower's ``secaggplus_constants``. Message
sequences: ``docs/protocols.md``.

  Kind.TRAIN_FORWARD  server -> parties   Record.STEP (+ Record.GRAD: the gradient of step t; forward step t+1)
  Kind.TRAIN_FORWARD  party -> server     Record.EMB (its embedding, re-encoded by its mods; Record.ENC if
                                          packed); its step is its round tag (#29.2: no STEP echo)
  Kind.EVAL_FORWARD   driver -> parties   Record.STEP;  party -> server: Record.EMB, step in the round tag (no reply)
  Kind.METRICS        driver -> server    control read; reply: Record.METRICS (``vfl.runtime.message.METRICS_RECORD``)
  Kind.DROP           driver -> server    control: Record.DROP, key ``parties`` left the run (skip-party)

Node ids of the vertical layout: the label-holding server is ``SERVER_ID`` (0), party k (0-based) is
``party_node_id(k)`` = k + 1; every module reads them from here.
"""

from __future__ import annotations

from typing import Any

from flwr.common import Message

from vfl.runtime import message as wire
from vfl.runtime.message import METRICS, METRICS_RECORD

SERVER_ID = 0  # the one definition of the server's node id (strategies, benchmarks and views import it)


def party_node_id(index: int) -> int:
    """The node id of party ``index`` (0-based) in the vertical layout."""
    return index + 1


class Kind:
    """Message kinds (``metadata.message_type``)."""

    TRAIN_FORWARD = "train.forward"
    EVAL_FORWARD = "evaluate.forward"
    METRICS = METRICS  # query.metrics (``vfl.runtime.message``)
    DROP = "query.drop_parties"


class Record:
    """Record names inside a message's content."""

    STEP = "step"  # config record: Key.EPOCH, Key.STEP, Key.FORWARD, Key.GRAD_STEP
    EMB = "emb"  # array record: the (possibly encoded) embedding
    ENC = "enc"  # config record of a bit-packed embedding: Key.BITS, ROWS, COLS, MASKED
    GRAD = "grad"  # array record: the gradient of the fused input
    DROP = "drop"  # config record of Kind.DROP: Key.PARTIES
    METRICS = METRICS_RECORD  # metric record of a Kind.METRICS reply (``vfl.runtime.message``)


class Array:
    """Array names inside an array record."""

    FLOAT, INTS, PACKED = "e", "q", "p"  # Record.EMB holds exactly one: float embedding, integers, packed integers
    GRAD = "g"  # Record.GRAD: "g" (sum fusion: one tensor for every party) or "g<index>" (concat fusion: one per party)


class Key:
    """Keys inside a config record: one letter each, since every message of a step carries them
    (issue #29.2: the key names are envelope bytes)."""

    EPOCH, STEP, FORWARD, GRAD_STEP = "e", "s", "f", "g"  # Record.STEP
    BITS, ROWS, COLS, MASKED = "k", "r", "c", "m"  # Record.ENC
    PARTIES = "parties"  # Record.DROP


FORWARD_KINDS = (Kind.TRAIN_FORWARD, Kind.EVAL_FORWARD)
KINDS = (Kind.TRAIN_FORWARD, Kind.EVAL_FORWARD, Kind.METRICS, Kind.DROP)

__all__ = ["FORWARD_KINDS", "KINDS", "SERVER_ID", "Array", "Key", "Kind", "Record", "party_node_id", "step_config",
           "step_of"]


def step_config(*, epoch: int, step: int, forward: bool, grad_step: int = -1) -> Any:
    """A step's STEP record: its epoch and step, whether parties forward it, and which step a gradient is of."""
    return wire.config(**{Key.EPOCH: epoch, Key.STEP: step, Key.FORWARD: forward, Key.GRAD_STEP: grad_step})


def step_of(message: Message) -> tuple[int, int]:
    """(epoch, step) of a message's STEP record."""
    cfg = wire.config_of(message, Record.STEP)
    return wire.config_int(cfg, Key.EPOCH), wire.config_int(cfg, Key.STEP)
