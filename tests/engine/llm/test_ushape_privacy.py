"""What the model server of ``ushape-lora`` can learn from what it receives, played with everything it
holds (the pretrained model: it owns it; the messages of a tapped run).

1. Inputs: with ``split 0`` the head's output is the token embeddings, and the nearest row of the
   embedding table names every token (control); SAP's ηdχ noise on the head's output (``params.eta``)
   takes that away.
2. Labels: no label, logit or dLoss/dlogits crosses the wire, but dLoss/d(body output) is a function of
   the response tokens. With ``tail_blocks 0`` (the tail is the final norm and the LM head) and the tail's
   pretrained weights (the adapters are zero at the first step) the server solves it for every label:
   the U-shape hides the labels from the wire, not from the gradient (docs/llm.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.causal.instruct import IGNORE
from parties.llm.causal.ushape import load_causal_lm, split_causal_lm
from parties.llm.causal.wire import CLIENT_ID, SERVER_ID, Kind
from parties.llm.sap.split import pack, unpack
from simulations.data.source import ConfigDataSource
from tests.engine.llm.test_ushape import _run_tapped, ushape_config
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy.mechanisms.dchi import nearest_rows
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def tapped_run(model_dir: str, **params):
    cfg = load_run_config(ushape_config(model_dir, epochs=1, gen_samples=0, **params))
    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False)
    seen: list = []
    _run_tapped(engine, seen)
    nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}
    return nodes[CLIENT_ID], nodes[SERVER_ID], seen


def first(seen, kind):
    return next(m for m in seen if m.metadata.message_type == kind)


def packed_rows(client, field: str, shift: int = 0) -> np.ndarray:
    """The client's ``ids`` or ``labels`` of step 0:0 in the packed order of the wire (``shift`` 1: the
    label each position's logits predict)."""
    sel = client.schedule.train_ids(0, 0)
    rows = getattr(client.train_rows, field)[sel]
    if shift:
        rows = np.concatenate([rows[:, shift:], np.full((len(rows), shift), IGNORE)], axis=1)
    n = torch.as_tensor(client.train_rows.lengths[sel])
    return pack(torch.as_tensor(rows).unsqueeze(-1), n).squeeze(-1).numpy()


def token_recovery(client, seen, table: torch.Tensor) -> float:
    h = torch.as_tensor(np.array(wire.get_array(first(seen, Kind.TRAIN_HEAD), "hidden", "h")))
    guess = nearest_rows(h, table=table).numpy()
    return float((guess == packed_rows(client, "ids")).mean())


def test_dchi_on_the_head_output_stops_the_nearest_token_inversion(llama):
    table = load_causal_lm(llama).get_input_embeddings().weight.detach()
    plain = token_recovery(*tapped_run(llama, split=0)[::2], table=table)
    noisy = token_recovery(*tapped_run(llama, split=0, eta=5.0)[::2], table=table)
    assert plain == 1.0  # control: without noise the server reads every token of every prompt and answer
    assert noisy < 0.2, noisy


def label_recovery(client, seen, model_dir: str) -> float:
    """The server's attack on step 0:0: per position, dLoss/dh_t = (J_tᵀ p_t − J_tᵀ e_y) / N with J_t the
    Jacobian of the pretrained tail's logits and N the positions with a non-zero gradient; J_tᵀ e_y is
    row y of J_t, so y = the row nearest to J_tᵀ p_t − N·dLoss/dh_t."""
    _, body, tail = split_causal_lm(load_causal_lm(model_dir), split=1, tail=0)
    up = first(seen, Kind.TRAIN_HEAD)
    lengths = torch.as_tensor(np.array(wire.get_array(up, "hidden", "lengths"))).long()
    h1, mask = unpack(torch.as_tensor(np.array(wire.get_array(up, "hidden", "h"))), lengths)
    with torch.no_grad():
        h2 = pack(body(h1, mask), lengths)  # the server's own forward of that step (its adapters are still zero)
    g = torch.as_tensor(np.array(wire.get_array(first(seen, Kind.TRAIN_BODY_GRAD), "grad", "g")))
    labelled = g.abs().sum(1) > 0
    n = int(labelled.sum())

    def logits(x: torch.Tensor) -> torch.Tensor:
        return tail.lm_head(tail.norm(x))

    jac = torch.func.vmap(torch.func.jacrev(logits))(h2[labelled])  # (T, V, d)
    p = torch.softmax(logits(h2[labelled]), -1)
    target = torch.einsum("tv,tvd->td", p, jac) - n * g[labelled]
    guess = (jac - target.unsqueeze(1)).norm(dim=-1).argmin(-1).numpy()
    truth = packed_rows(client, "labels", shift=1)
    assert np.array_equal(truth != IGNORE, labelled.numpy())  # the gradient's support names the answer's positions
    return float((guess == truth[labelled.numpy()]).mean())


def test_the_body_gradient_names_the_response_tokens_to_a_server_that_knows_the_tail(llama):
    client, _, seen = tapped_run(llama, split=1, tail_blocks=0)
    assert label_recovery(client, seen, llama) > 0.99  # exposed: the U-shape is no label protection by itself
