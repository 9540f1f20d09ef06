"""Stop a training step whose loss is NaN or inf, naming the first non-finite quantity.

A NaN loss used to finish the run "successfully" (``final_train_loss: null``, chance accuracy).
Every step pays one read of the scalar loss (``math.isfinite``); only once it is bad are the inputs
inspected, in the order the step computed them, to name the culprit.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from flwr.common import Message
from torch import nn

from parties.vertical import wire as vw
from vfl.core.errors import NonFiniteError
from vfl.runtime import message as wire

HINT = "lower train.lr, check the inputs, or bound the model's outputs; the last checkpoint is kept"


def check_loss(loss: torch.Tensor, *, epoch: int, step: int, messages: Sequence[Message], fused: torch.Tensor,
               logits: torch.Tensor, head: nn.Module) -> float | None:
    """Raise ``NonFiniteError`` when ``loss`` is not finite (call before ``backward``/the optimizer); returns a
    scalar loss's value (= ``float(loss)``, read once: the server's running loss reuses it), None for others."""
    if loss.numel() == 1 and math.isfinite(value := loss.item()):  # a scalar: one read instead of two tensor ops
        return value
    if loss.numel() != 1 and bool(torch.isfinite(loss).all()):
        return None
    what = culprit(messages=messages, fused=fused, logits=logits, head=head)
    raise NonFiniteError(f"training went non-finite at epoch {epoch}, step {step}: {what} holds NaN or inf "
                         f"(the loss is {float(loss.detach().reshape(-1)[0])}); {HINT}")


def check_embedding(emb: torch.Tensor, *, party: str, phase: str, epoch: int, step: int) -> None:
    """A party's own check before an encoding mod (PBM, LDP noise, SecAgg masking) hides its
    embedding from the server: one ``torch.isfinite`` per step, only where mods run."""
    if not bool(torch.isfinite(emb).all()):
        where = "training" if phase == "train" else "evaluation"
        raise NonFiniteError(f"{where} went non-finite at epoch {epoch}, step {step}: the embedding of {party} "
                             f"holds NaN or inf (before its encoding); {HINT}")


def culprit(*, messages: Sequence[Message], fused: torch.Tensor, logits: torch.Tensor, head: nn.Module) -> str:
    """The first non-finite quantity of the step: a party's embedding (float wires only; masked or
    encoded ones are judged by their fused sum), the fused input, the head's weights, its logits."""
    for m in sorted(messages, key=lambda m: int(m.metadata.src_node_id)):
        try:
            emb = wire.get_array(m, vw.Record.EMB, vw.Array.FLOAT)
        except Exception:  # noqa: BLE001 (an encoded or masked embedding: no float array to read)
            continue
        if not np.isfinite(emb).all():
            node = int(m.metadata.src_node_id)
            return f"the embedding of party{node - 1} (node {node})"  # parties are nodes 1..M
    if not bool(torch.isfinite(fused).all()):
        return "the fused input (the server's sum or concatenation of the embeddings)"
    for name, p in head.named_parameters():
        if not bool(torch.isfinite(p).all()):
            return f"the head's weight {name!r}"
    if not bool(torch.isfinite(logits).all()):
        return "the head's output (logits)"
    return "the loss"
