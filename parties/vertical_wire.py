"""Message kinds, record names and keys of the vertical-FL step, in one place (the role of
Flower's ``secaggplus_constants``). Message sequences: ``docs/protocols.md``.

  TRAIN_FORWARD  server -> parties   STEP (+ GRAD: the gradient of step t; forward step t+1)
  TRAIN_FORWARD  party -> server     STEP + EMB (its embedding, re-encoded by its mods; ENC if packed)
  EVAL_FORWARD   driver -> parties   STEP;  party -> server: STEP + EMB (no reply)
  METRICS        driver -> server    control read; reply: ``vfl.message.METRICS_RECORD``
  DROP           driver -> server    control: DROP_RECORD ``parties`` left the run (skip-party)
"""

from __future__ import annotations

from vfl.message import METRICS, METRICS_RECORD

TRAIN_FORWARD = "train.forward"
EVAL_FORWARD = "evaluate.forward"
DROP = "query.drop_parties"

# node ids of the vertical layout: the label-holding server is 0, party k (0-based) is k + 1
SERVER_ID = 0


def party_node_id(index: int) -> int:
    """The node id of party ``index`` (0-based) in the vertical layout."""
    return index + 1


FORWARD_KINDS = (TRAIN_FORWARD, EVAL_FORWARD)
KINDS = (TRAIN_FORWARD, EVAL_FORWARD, METRICS, DROP)

# record names
STEP = "step"  # config record: epoch, step, forward, grad_step
EMB = "emb"  # array record: the (possibly encoded) embedding
ENC = "enc"  # config record of a bit-packed embedding: k, rows, cols, masked
GRAD = "grad"  # array record: the gradient of the fused input
DROP_RECORD = "drop"  # config record of DROP

# array names
FLOAT, INTS, PACKED = "e", "q", "p"  # EMB holds exactly one: float embedding, integers, packed integers
GRAD_ALL = "g"  # GRAD of sum fusion: one tensor for every party (GRAD_PART + index: concat fusion)
GRAD_PART = "g"

# config keys
EPOCH, STEP_KEY, FORWARD, GRAD_STEP = "epoch", "step", "forward", "grad_step"
BITS, ROWS, COLS, MASKED = "k", "rows", "cols", "masked"
PARTIES = "parties"

__all__ = ["BITS", "COLS", "DROP", "DROP_RECORD", "EMB", "ENC", "EPOCH", "EVAL_FORWARD", "FLOAT", "FORWARD",
           "FORWARD_KINDS", "GRAD", "GRAD_ALL", "GRAD_PART", "GRAD_STEP", "INTS", "KINDS", "MASKED", "METRICS",
           "METRICS_RECORD", "PACKED", "PARTIES", "ROWS", "STEP", "STEP_KEY", "TRAIN_FORWARD"]
