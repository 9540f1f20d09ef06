"""Wire vocabulary of the U-shaped split (``ushape-lora``): kinds, records, the message builder and codec.

What crosses the wire per training step (client = data holder, server = model server):
  train.head_out   client -> server  the head's hidden states, packed real tokens + lengths
                                     (with ``params.eta``: ηdχ-privatized, SAP's release)
  train.body_out   server -> client  the body's hidden states of the same tokens
  train.body_grad  client -> server  dLoss/d(body output): the tail, the LM head and the loss are the client's
  train.head_grad  server -> client  dLoss/d(head output), for the head's adapters
  evaluate.head_out / evaluate.body_out      the same forward for the held-out rows (perplexity)
  evaluate.gen_head / evaluate.gen_body      one greedy decoding step of a batch of test prompts
Never sent: token ids, logits, labels (the response tokens). Not hidden from the server: each row's
token count (``lengths``) and what dLoss/d(body output) carries about the next tokens.

``ushape-p3eft`` (P3EFT's private backprop, ``private.py``) sends train.head_out to every model server
with the body's adapters (``adapter``: the tensors changed since that server last got them, ``theta``
config), train.body_grad as one random-looking piece per server, and gets back train.head_grad with
the piece's adapter gradient (``adapter_grad``); evaluation and generation go to the first server.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from flwr.common import ConfigRecord, Message

from parties.llm.common import wire as common
from parties.llm.common.wire import pack, unpack
from vfl.runtime import message as wire

SERVER_ID, CLIENT_ID = 0, 1


class Kind(common.Kind):
    """Message kinds between the two nodes, then the driver's control kinds."""

    TRAIN_HEAD, TRAIN_BODY = "train.head_out", "train.body_out"
    TRAIN_BODY_GRAD, TRAIN_HEAD_GRAD = "train.body_grad", "train.head_grad"
    EVAL_HEAD, EVAL_BODY = "evaluate.head_out", "evaluate.body_out"
    GEN_HEAD, GEN_BODY = "evaluate.gen_head", "evaluate.gen_body"
    GENERATE = "evaluate.generate"  # driver -> client: decode the sample prompts
    INIT = "query.ushape_init"  # driver -> server: the run's optimizer steps
    QUERY_SAMPLES = "query.samples"  # driver -> client: the sample prompts, references and generations


class Record(common.Record):
    """Record names: hidden states (``h``: packed rows, ``lengths``) and gradients (``g``)."""

    HIDDEN, GRAD, SAMPLES, WHICH, TASK = "hidden", "grad", "samples", "which", "task"
    ADAPTER, ADAPTER_GRAD = "adapter", "adapter_grad"  # ushape-p3eft: the body's adapters and their gradient


def step_config(*, epoch: int, step: int) -> ConfigRecord:
    return wire.config(epoch=epoch, step=step)


def read_step(m: Message) -> tuple[int, int]:
    """(epoch, step) of a message."""
    c = common.step_of(m)
    return wire.config_int(c, "epoch"), wire.config_int(c, "step")


def send(kind: str, *, src: int, dst: int, to: Message | None, phase: str, epoch: int, step: int,
         records: Mapping[str, Mapping[str, np.ndarray]], configs: Mapping[str, ConfigRecord] | None = None
         ) -> Message:
    """A protocol message carrying named array records (``{Record.HIDDEN: {"h": ..., "lengths": ...}}``)
    and config records besides its step."""
    return common.send(kind, src=src, dst=dst, to=to, phase=phase, step=step_config(epoch=epoch, step=step),
                       records=records, configs=configs)


def received_hidden(m: Message, device: str) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """(B, L, d) padded hidden states, their (B, L) mask and the lengths of a ``Record.HIDDEN`` message."""
    lengths = np.asarray(wire.get_array(m, Record.HIDDEN, "lengths")).astype(np.int64)
    flat = torch.as_tensor(np.array(wire.get_array(m, Record.HIDDEN, "h")), device=device)
    h, mask = unpack(flat, torch.as_tensor(lengths, device=device))
    return h, mask, lengths


def hidden_record(h: torch.Tensor, lengths: np.ndarray) -> dict[str, dict[str, np.ndarray]]:
    """The real tokens of (B, L, d) hidden states, packed, with their lengths."""
    flat = pack(h.detach(), torch.as_tensor(lengths, device=h.device))
    return {Record.HIDDEN: {"h": flat.cpu().numpy().astype(np.float32, copy=False),
                            "lengths": lengths.astype(np.int32)}}
