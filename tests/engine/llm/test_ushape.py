"""``ushape-lora`` in-process: a tiny Llama fine-tuned on the shipped instruction set over the U-shaped
split. The loss falls; what the model server receives holds no token ids and no labels; the trained split
answers through the wire exactly as its three parts do in one process; a checkpoint restores them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.ushape.generate import generate
from parties.llm.ushape.parts import real_mask
from parties.llm.ushape.wire import CLIENT_ID, SERVER_ID, Kind
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.transport.inprocess import InProcessTransport

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def ushape_config(model_dir: str, epochs: int = 3, **params) -> dict:
    return {"name": "ushape-test", "strategy": "ushape-lora", "dataset": "tiny-instruct", "num_parties": 1, "seed": 2,
            "data": {"train_subsample": 48, "test_subsample": 8},
            "train": {"epochs": epochs, "batch_size": 16, "optimizer": "adamw", "lr": 1e-2},
            "params": {"model_dir": model_dir, "max_len": 40, "lora_rank": 4, "lora_targets": ["all-linear"],
                       "gen_samples": 4, "max_new_tokens": 6, **params}}


@pytest.fixture(scope="module")
def trained(llama):
    """One 3-epoch run; every message the model server received."""
    cfg = load_run_config(ushape_config(llama))
    engine = Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False)
    seen: list = []
    result = _run_tapped(engine, seen)
    nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}
    return result, nodes[CLIENT_ID], nodes[SERVER_ID], seen


def _run_tapped(engine: Engine, seen: list):
    """Run with the server node's ``handle`` wrapped to keep what it receives."""
    from parties.llm.ushape.server import BodyServer

    orig = BodyServer.handle

    def tap(self, messages):
        seen.extend(messages)
        return orig(self, messages)

    BodyServer.handle = tap  # type: ignore[method-assign]
    try:
        return engine.run()
    finally:
        BodyServer.handle = orig  # type: ignore[method-assign]


def test_the_loss_falls_and_the_metrics_are_reported(trained):
    result, *_ = trained
    losses = [h["train_loss"] for h in result.history]
    assert losses[-1] < losses[0] - 0.3, losses
    last = result.history[-1]
    assert last["test_ppl"] == pytest.approx(np.exp(last["test_loss"])) and 0 <= last["rouge_l"] <= 1
    s = result.summary
    assert len(s["samples"]) == 4 and all(set(x) == {"prompt", "reference", "generation"} for x in s["samples"])
    assert set(s["train_bytes_per_step"]) == {"train.head_out", "train.body_out", "train.body_grad",
                                              "train.head_grad", "train.step"}


def test_the_server_never_receives_token_ids_or_labels(trained):
    _, client, _, seen = trained
    kinds = {m.metadata.message_type for m in seen}
    assert kinds <= {Kind.INIT, Kind.TRAIN_HEAD, Kind.TRAIN_BODY_GRAD, Kind.EVAL_HEAD, Kind.GEN_HEAD}
    assert {Kind.TRAIN_HEAD, Kind.TRAIN_BODY_GRAD, Kind.GEN_HEAD} <= kinds
    labels = set(client.train_rows.labels[client.train_rows.labels >= 0].tolist())
    for m in seen:
        for rec_name, rec in m.content.array_records.items():
            for name, arr in rec.items():
                a = wire.from_array(arr)
                if name == "lengths":
                    assert a.ndim == 1 and a.dtype == np.int32  # the one integer array: token counts
                    continue
                assert (rec_name, name) in {("hidden", "h"), ("grad", "g")} and a.dtype == np.float32
                assert a.ndim == 2 and a.shape[1] == 32  # hidden-size rows, never ids
                assert not np.isin(a, list(labels)).all()


def test_the_wire_generations_are_the_parts_generations(trained):
    """The run decoded through the wire; the same three parts in one process give the same answers."""
    result, client, server, _ = trained
    tok = client.tokenizer
    local = generate(head=client.head, body=server.body, tail=client.tail, prompts=client.samples.prompt_ids,
                     eos=tok.eos_token_id, pad=tok.pad_token_id, max_new=client.samples.max_new)
    texts = [tok.decode(t, skip_special_tokens=True).strip() for t in local]
    assert texts == [x["generation"] for x in result.summary["samples"]]


def test_the_trained_split_is_a_whole_model_with_merged_adapters(trained, llama):
    """Probe: the split's logits equal one causal LM whose blocks carry the three parts' trained adapters."""
    from parties.llm.common.lora import LoraSpec, inject_lora
    from parties.llm.ushape.parts import load_causal_lm, split_causal_lm

    _, client, server, _ = trained
    lm = load_causal_lm(llama)
    inject_lora(lm.base_model.layers, LoraSpec(rank=4, alpha=16.0, targets=("all-linear",)))
    head, body, tail = split_causal_lm(lm, split=1, tail=1)  # views of lm's modules: loading them loads lm
    head.load_state_dict(client.head.state_dict())
    body.load_state_dict(server.body.state_dict())
    tail.load_state_dict(client.tail.state_dict())
    ids = torch.tensor(client.test_rows.ids[:2, :20])
    mask = real_mask(torch.tensor([20, 20]), 20)
    with torch.no_grad():
        whole = lm(input_ids=ids, attention_mask=mask).logits
        split = client.tail(server.body(client.head(ids, mask), mask), mask)
    assert torch.allclose(whole, split, atol=1e-5)


def test_a_checkpoint_restores_the_adapters(trained):
    _, client, server, _ = trained
    for node in (client, server):
        state = node.state()
        assert state["lora"] and all("lora_" in k for k in state["lora"])
        before = {k: v.clone() for k, v in node.lora_state().items()}
        for p in node.params:
            p.data.zero_()
        node.load_state(state)
        assert all(torch.equal(before[k], v) for k, v in node.lora_state().items())


def test_model_dir_is_required():
    cfg = ushape_config("")
    with pytest.raises(ConfigError, match="params.model_dir.*required"):
        load_run_config({**cfg, "params": {k: v for k, v in cfg["params"].items() if k != "model_dir"}})


def test_a_cut_without_a_body_block_is_refused(llama):
    cfg = load_run_config(ushape_config(llama, split=2, tail_blocks=1))
    with pytest.raises(ConfigError, match="params.split"):
        Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()


def test_a_max_len_that_cuts_every_response_is_refused(llama):
    """Prompts longer than ``max_len`` leave no response token: refused, not a run that trains on nothing."""
    cfg = load_run_config(ushape_config(llama, epochs=1, max_len=4))
    with pytest.raises(ConfigError, match=r"params\.max_len.*no response token"):
        Engine(cfg, InProcessTransport(), ConfigDataSource.from_config(cfg), progress=False).run()
