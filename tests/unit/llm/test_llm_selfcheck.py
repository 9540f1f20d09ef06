"""The split-LLM strategies' start-up self-check (``parties/llm/common/selfcheck.py``).

Every family of ``parties/llm/common/tiny.py`` passes it for ``sap``, ``p3eft`` and ``split-lora`` (and
SAP in bfloat16) through the strategies' own ``build_node`` (the vendor / model server as a run
builds it). The controls: the adapters as they were before Gemma 3, Granite and EuroBERT were handled
(Granite's embedding multiplier dropped, EuroBERT under a causal mask, Gemma 3's rotary called without
a layer type) produce another output than the model, and the self-check refuses each in one
``params.model_dir`` line; so does a model server whose padding mask is wrong, and a bidirectional
Gemma 3 (EmbeddingGemma's layout, whose window mask no adapter here builds).
"""

from __future__ import annotations

import pytest
import torch

import parties.llm.common.rotary as rotary
import parties.llm.p3eft.adapters as adapters
import strategies  # noqa: F401  (registers the strategies)
from parties.llm.common.arch import arch_of
from parties.llm.common.backbone import load_encoder
from parties.llm.common.lora import lora_spec_for
from parties.llm.common.selfcheck import TOLERANCE, model_output, probe_batch
from parties.llm.common.tiny import FAMILIES, tiny_lm_dir
from parties.llm.p3eft.adapters import LoraEncoder
from parties.llm.sap.split import split_output
from simulations.data.source import ConfigDataSource
from vfl.core.errors import ConfigError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime.node import NodeSpec

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py
SERVER = NodeSpec(0, "server", "server", "server")


def _server(strategy: str, path: str, dtype: str, **params):
    """The vendor (sap) or model server 0 (p3eft, split-lora) as the strategy builds it at start-up."""
    cfg = load_run_config({"strategy": strategy, "dataset": "rt-polarity", "num_parties": 1, "seed": 0,
                           "data": {"train_subsample": 16, "test_subsample": 8}, "train": {"batch_size": 8},
                           "params": {"model_dir": path, "dtype": dtype, "max_len": 12, "lora_rank": 2, **params}})
    strat = STRATEGIES.get(strategy)(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    return strat.build_node(SERVER, data)


@pytest.mark.parametrize(("strategy", "dtype"), [("sap", "fp32"), ("sap", "bf16"), ("p3eft", "fp32"),
                                                 ("split-lora", "fp32")])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_every_family_passes_the_self_check(tiny_lm, family, strategy, dtype):
    """bf16 for SAP only: its customer runs the shipped bottom in float32, so the split differs from the
    model's bf16 forward by rounding (measured ≤ 0.019 on these families, allowed 0.05); a model server's
    path is the model's forward in its own dtype either way."""
    params = {"split": 1} if strategy == "sap" else {"micro_batch": 1} if strategy == "p3eft" else {}
    node = _server(strategy, tiny_lm(family, dtype=dtype), dtype, **params)
    assert type(node).__name__ == ("SapVendor" if strategy == "sap" else "ModelServer")


@pytest.mark.parametrize("strategy", ["p3eft", "split-lora"])
def test_a_whole_t5_passes_on_the_model_servers(tiny_lm, strategy):
    """``params.t5_stack: encoder-decoder`` (no SAP split): the model servers' path through both stacks."""
    node = _server(strategy, tiny_lm("t5"), "fp32", t5_stack="encoder-decoder", gradient_checkpointing=True)
    assert type(node.model.encoder).__name__ == "T5Seq2Seq"


def _refused(match: str, fn, *args, **kwargs) -> str:
    with pytest.raises(ConfigError, match=match) as err:
        fn(*args, **kwargs)
    line = str(err.value)
    assert err.value.key == "params.model_dir" and "\n" not in line and "refused" in line
    return line


def _old_split_is_off(path: str) -> float:
    """The control: the split's output against the model's own forward (relative, as the check measures)."""
    enc = load_encoder(path)
    ids, lengths = probe_batch(enc.config)
    how = arch_of(enc).default_pooling
    want = model_output(enc, ids, lengths, how)
    got = split_output(enc, split=1, pooling=how, ids=ids, lengths=lengths)
    return float((got - want).abs().max() / want.abs().max())


def test_granite_without_its_embedding_multiplier_is_refused(tiny_lm, monkeypatch):
    path = tiny_lm("granite")
    assert _old_split_is_off(path) == 0.0  # today's adapter applies config.embedding_multiplier (12)
    monkeypatch.setattr(rotary.TokenEmbeddings, "__init__", _without_multiplier)
    assert _old_split_is_off(path) > 0.1  # the old adapter: another model, silently
    line = _refused(r"SAP's split at block 1 differs from the model's own forward on a probe input by 0\.[1-9]",
                    _server, "sap", path, "fp32", split=1)
    assert path in line


_init = rotary.TokenEmbeddings.__init__


def _without_multiplier(self, table, scale=1.0, drop=None, multiplier=1.0):  # the adapter before Granite
    _init(self, table, scale, drop)


def test_eurobert_under_a_causal_mask_is_refused(tiny_lm, monkeypatch):
    path = tiny_lm("eurobert")
    assert arch_of(load_encoder(path)).kind == "encoder"  # bidirectional: mean pooling, no causal mask
    monkeypatch.setattr(rotary, "is_causal", lambda model: True)  # the old detection: every rotary model a decoder
    assert _old_split_is_off(path) > 0.1
    _refused("differs from the model's own forward", _server, "sap", path, "fp32", split=1, pooling="mean")


def test_gemma3_with_one_rotary_table_is_refused(tiny_lm, monkeypatch):
    path = tiny_lm("gemma3")
    monkeypatch.setattr(rotary, "_rotary_tables", lambda ctx, h, pos, types: dict.fromkeys(types, ctx(h, position_ids=pos)))
    _refused(r"fails on a probe input \(TypeError: .*layer_type", _server, "sap", path, "fp32", split=1)


def test_a_bidirectional_gemma3_is_refused_by_sap_and_served_by_p3eft(tmp_path, monkeypatch):
    """EmbeddingGemma's layout (``use_bidirectional_attention``): its sliding layers attend within an
    exclusive window no ``masking_utils`` mask builds, so SAP's split is off and refused; the model
    servers run the model's own forward and pass."""
    monkeypatch.setitem(FAMILIES, "gemma3-bi", ("Gemma3TextConfig", {**FAMILIES["gemma3"][1],
                                                                     "use_bidirectional_attention": True}))
    path = tiny_lm_dir(tmp_path, "gemma3-bi")
    _refused("SAP's split at block 1 differs", _server, "sap", path, "fp32", split=1)
    assert type(_server("p3eft", path, "fp32")).__name__ == "ModelServer"


def test_a_model_server_with_a_wrong_padding_mask_is_refused(tiny_lm, monkeypatch):
    path = tiny_lm("llama")
    monkeypatch.setattr(adapters, "attention_mask", lambda lengths, width: torch.ones(len(lengths), width,
                                                                                      dtype=torch.long))
    _refused("p3eft's model server differs", _server, "p3eft", path, "fp32")


def test_the_server_check_counts_no_pass_and_tolerances_follow_the_dtype(tiny_lm):
    enc = load_encoder(tiny_lm("llama"))
    server = LoraEncoder(enc, lora_spec_for(arch_of(enc), rank=2, alpha=4.0), pooling="last")
    assert server.self_check(model_dir="m", what="x") <= 1e-6 and server.passes == 0
    assert TOLERANCE[torch.float32] < TOLERANCE[torch.float16] < TOLERANCE[torch.bfloat16] <= 0.05


CAUSAL = sorted(set(FAMILIES) - {"bert", "roberta", "distilbert", "electra", "mpnet", "deberta_v2", "modernbert",
                                 "eurobert", "t5"})


def _ushape_server(path: str):
    """The ``ushape-lora`` model server as the strategy builds it (``build_parts`` with its self-check)."""
    cfg = load_run_config({"strategy": "ushape-lora", "dataset": "tiny-instruct", "num_parties": 1, "seed": 0,
                           "train": {"batch_size": 4}, "params": {"model_dir": path, "max_len": 24, "lora_rank": 2}})
    strat = STRATEGIES.get("ushape-lora")(cfg)
    return strat.build_node(SERVER, ConfigDataSource.from_config(cfg))


@pytest.mark.parametrize("family", CAUSAL)
def test_every_causal_family_passes_the_ushape_self_check(tiny_lm, family):
    """Head, body and tail against the model's own ``ForCausalLM.forward``: logits and loss (fp32, ≤ 1e-4)."""
    assert type(_ushape_server(tiny_lm(family))).__name__ == "BodyServer"


@pytest.mark.parametrize(("family", "off"), [("granite", 6.0), ("gemma2", 1e-4)])
def test_a_tail_without_the_models_logit_transform_is_refused(tiny_lm, monkeypatch, family, off):
    """The control: the tail as it was (the LM head's output taken as the logits) misses Granite's division
    by ``logits_scaling`` (8) and Gemma 2's ``final_logit_softcapping`` (30): refused in one line."""
    import parties.llm.ushape.parts as parts

    monkeypatch.setattr(parts.LogitsOut, "forward", lambda self, z: z)
    line = _refused(r"U-shaped split .* differs from the model's own forward", _ushape_server, tiny_lm(family))
    assert float(line.split("forward on a probe input by ")[1].split(" ")[0]) > off
