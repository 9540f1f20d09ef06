"""What the model server of ``ushape-lora`` can learn from what it receives, played with everything it
holds (the pretrained model: it owns it; the messages of a tapped run).

1. Inputs: with ``split 0`` the head's output is the token embeddings, and the nearest row of the
   embedding table names every token (control); SAP's ηdχ noise on the head's output (``params.eta``)
   takes that away.
2. Labels: no label, logit or dLoss/dlogits crosses the wire, but dLoss/d(body output) is a function of
   the response tokens. With ``tail_blocks 0`` (the tail is the final norm and the LM head) and the tail's
   pretrained weights (the adapters are zero at the first step) the server solves it for every label:
   the U-shape hides the labels from the wire, not from the gradient (docs/llm-ushape.md); with a tail block
   (the bundled cut) the same holds, solved position by position from the end.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.wire import pack
from parties.llm.ushape.attacks import labels_from_gradient, labels_from_update, tokens_nearest
from parties.llm.ushape.instruct import IGNORE
from parties.llm.ushape.parts import load_causal_lm, split_causal_lm
from parties.llm.ushape.wire import CLIENT_ID, SERVER_ID, Kind
from simulations.data.source import ConfigDataSource
from tests.engine.llm.test_ushape import _run_tapped, ushape_config
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
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
    return float((tokens_nearest(h, table) == packed_rows(client, "ids")).mean())


def test_dchi_on_the_head_output_stops_the_nearest_token_inversion(llama):
    table = load_causal_lm(llama).get_input_embeddings().weight.detach()
    plain = token_recovery(*tapped_run(llama, split=0)[::2], table=table)
    noisy = token_recovery(*tapped_run(llama, split=0, eta=5.0)[::2], table=table)
    assert plain == 1.0  # control: without noise the server reads every token of every prompt and answer
    assert noisy < 0.2, noisy


def step0(seen) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The head's release, its lengths and the gradient (or piece) a server received at step 0:0."""
    up = first(seen, Kind.TRAIN_HEAD)
    lengths = torch.as_tensor(np.array(wire.get_array(up, "hidden", "lengths"))).long()
    h = torch.as_tensor(np.array(wire.get_array(up, "hidden", "h")))
    return h, lengths, torch.as_tensor(np.array(wire.get_array(first(seen, Kind.TRAIN_BODY_GRAD), "grad", "g")))


def label_recovery(client, seen, model_dir: str, *, oracle_support: bool = False, tail_blocks: int = 0,
                   rows: int | None = None) -> float:
    """The server's attack on step 0:0 (``parties/llm/ushape/attacks.py:labels_from_gradient``), scored on the
    labelled positions (of the first ``rows`` rows). ``oracle_support``: the attacker is also told which
    positions are labelled (a piece of ``ushape-p3eft`` is non-zero everywhere)."""
    _, body, tail = split_causal_lm(load_causal_lm(model_dir), split=1, tail=tail_blocks)
    h, lengths, g = step0(seen)
    truth = packed_rows(client, "labels", shift=1)
    labelled = truth != IGNORE
    if not oracle_support and not tail_blocks:  # the gradient's support names the answer's positions
        assert np.array_equal(labelled, (g.abs().sum(1) > 0).numpy())
    guess = labels_from_gradient(h_in=h, lengths=lengths, grad=g, body=body, tail=tail,
                                 labelled=labelled if oracle_support else None, rows=rows)
    row_of = np.repeat(np.arange(len(lengths)), lengths.numpy())
    scored = labelled & (row_of < (rows or len(lengths)))
    return float((guess[scored] == truth[scored]).mean())


def test_the_body_gradient_names_the_response_tokens_to_a_server_that_knows_the_tail(llama):
    client, _, seen = tapped_run(llama, split=1, tail_blocks=0)
    assert label_recovery(client, seen, llama) > 0.99  # exposed: the U-shape is no label protection by itself


def test_with_a_tail_block_the_body_gradient_still_names_the_response_tokens(llama):
    """The bundled config's cut (tail_blocks 1): the tail's block does not hide the labels either."""
    client, _, seen = tapped_run(llama, split=1, tail_blocks=1)
    assert label_recovery(client, seen, llama, tail_blocks=1, rows=4) > 0.9  # one Jacobian per position: 4 rows


def test_private_backprop_leaves_each_server_a_piece_that_names_no_response_token(llama):
    """``ushape-p3eft`` (two model servers, each with one piece of the gradient): the same attack on each
    server's piece, even told the labelled positions, names about as many tokens as guessing
    (1 / vocabulary); the control is ``ushape-lora``'s single gradient."""
    from parties.llm.ushape.private import PieceServer
    from tests.engine.llm.test_ushape_p3eft import run_tapped

    client, _, seen = tapped_run(llama, split=1, tail_blocks=0)
    assert label_recovery(client, seen, llama, oracle_support=True) > 0.99  # control
    _, nodes, seen = run_tapped({**ushape_config(llama, epochs=1, gen_samples=0, split=1, tail_blocks=0),
                                 "strategy": "ushape-p3eft"}, PieceServer)
    client = nodes[CLIENT_ID]
    for sid in (SERVER_ID, 2):
        mine = [m for m in seen if int(m.metadata.dst_node_id) == sid]
        assert label_recovery(client, mine, llama, oracle_support=True) < 0.05, sid


def theta_difference_recovery(model_dir: str, **params) -> float:
    """P3EFT §3.3's θ-difference attack on ``ushape-p3eft`` (``tail_blocks 0``), played by the first model
    server: it builds the same parts from the run's seed, so it knows the clean initial adapters (B = 0);
    the adapters of the second step's request minus them is AdamW's first update, −lr·sign(g_θ) (+ the
    θ-noise). Since g_θ = Σ_t (∂logits_t/∂θ)ᵀ(p_t − e_{y_t})/N, the labels that best agree with that sign
    pattern s are y_t = argmin_y (∂logits_t/∂θ · s)_y: one directional derivative of the server's own
    forward (body + pretrained tail) along s names every position's token. Scored on the labelled
    positions of step 0:0 (chance 1 / vocabulary)."""
    from parties.llm.p3eft.wire import read_record
    from parties.llm.ushape.build import build_parts
    from parties.llm.ushape.private import PieceServer, body_adapters
    from strategies.ushape import UShapeP3eft
    from tests.engine.llm.test_ushape_p3eft import run_tapped

    raw = {**ushape_config(model_dir, epochs=1, gen_samples=0, split=1, tail_blocks=0, **params),
           "strategy": "ushape-p3eft", "privacy": {"noise_rng": "seeded"}}
    _, nodes, seen = run_tapped(raw, PieceServer)
    mine = [m for m in seen if int(m.metadata.dst_node_id) == SERVER_ID and m.metadata.message_type == Kind.TRAIN_HEAD]
    cfg = load_run_config(raw)
    _, body, tail = build_parts(model_dir, dtype="fp32", split=1, tail=0, lora=UShapeP3eft(cfg).lora_spec(),
                                seed=cfg.seed)
    clean = {k: p.detach().clone() for k, p in body_adapters(body).items()}
    second = {**read_record(mine[0], "adapter"), **read_record(mine[1], "adapter")}
    h, lengths, _ = step0([m for m in seen if int(m.metadata.dst_node_id) == SERVER_ID])
    guess = labels_from_update(h_in=h, lengths=lengths, clean=clean, second=second, body=body, tail=tail)
    truth = packed_rows(nodes[CLIENT_ID], "labels", shift=1)
    labelled = truth != IGNORE
    return float((guess[labelled] == truth[labelled]).mean())


def test_the_theta_difference_names_response_tokens_and_theta_noise_closes_it(llama):
    """What private backprop leaves: the body's adapters move by the recombined gradient. Without θ-noise
    the first update names ≈ 18 % of the response tokens (chance 0.25 %); θ + z with σ = 0.1 (lr 0.01),
    about what guessing does (the utility cost is in docs/llm-ushape.md)."""
    assert theta_difference_recovery(llama) > 0.08  # control
    assert theta_difference_recovery(llama, theta_noise=0.1) < 0.02
