"""GLUE-style tasks for the split-LLM strategies: sentence pairs with token types on the wire, F1/MCC,
lr warmup/decay schedules, JSON Lines / HF datasets loading, max_len against the position table."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.llm.common.backbone import load_encoder, load_tokenizer, pool
from parties.llm.common.metrics import confusion, f1, glue_scores, mcc
from parties.llm.common.tokens import check_max_len, encode, max_positions, uses_token_types
from parties.llm.common.wire import pack, unpack
from parties.llm.p3eft.adapters import LoraEncoder
from parties.llm.p3eft.wire import StepTag, inputs, read_inputs, read_types, request
from parties.llm.sap.split import bottom_state, build_bottom, split_encoder
from simulations.data import load_dataset
from simulations.data.gen_pairs import dumps, generate
from vfl.core.errors import ConfigError, DataError
from vfl.engine.schema import load_run_config
from vfl.runtime import message as wire
from vfl.runtime.optim import attach_schedule, lr_factor, warmup_count

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

FIRST = ["the committee approved the budget on monday", "a cat", "the bank lowered interest rates"]
SECOND = ["on monday the panel backed the spending plan", "sat on the mat in the sun all day", "the lender cut rates"]


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer(None)


@pytest.fixture(scope="module")
def minilm():
    return load_encoder(None)


# ---- sentence pairs ---------------------------------------------------------------------------
def test_pair_tokens_round_trip_through_the_wire(tok):
    enc = encode(tok, np.array(FIRST, object), 24, pairs=np.array(SECOND, object), types=True)
    ref = tok(FIRST, SECOND, padding="max_length", truncation="longest_first", max_length=24, return_tensors="np")
    np.testing.assert_array_equal(enc.ids, ref["input_ids"])
    np.testing.assert_array_equal(enc.types, ref["token_type_ids"])
    assert enc.types.max() == 1  # the second text is segment 1
    m = request("train.forward", src=1, dst=0, phase="train", tag=StepTag(0, 0),
                inputs=inputs(enc.ids, enc.lengths, enc.types))
    got = wire.Wire.of(m).open()  # the bytes that cross the wire, decoded on the server
    ids, lengths = read_inputs(got)
    types = read_types(got)
    width = int(enc.lengths.max())
    np.testing.assert_array_equal(ids.numpy(), enc.ids[:, :width])
    np.testing.assert_array_equal(types.numpy(), enc.types[:, :width])
    single = request("train.forward", src=1, dst=0, phase="train", tag=StepTag(0, 0),
                     inputs=inputs(enc.ids, enc.lengths))
    assert read_types(wire.Wire.of(single).open()) is None  # single texts: nothing extra on the wire


def test_model_server_applies_token_types(tok, minilm):
    enc = encode(tok, np.array(FIRST, object), 24, pairs=np.array(SECOND, object), types=True)
    ids, lengths, types = (torch.from_numpy(a) for a in (enc.ids, enc.lengths, enc.types))
    server = LoraEncoder(copy.deepcopy(minilm), None)
    mask = (torch.arange(24).unsqueeze(0) < lengths.unsqueeze(1)).long()
    with torch.no_grad():
        want = pool(minilm(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state, mask, "mean")
        without = server.forward(ids, lengths, None)
    got = server.forward(ids, lengths, None, types=types)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (got - without).abs().max() > 1e-3  # control: the segment embedding changes the activations


def test_sap_bottom_takes_token_types_and_the_split_stays_exact(tok, minilm):
    enc = encode(tok, np.array(FIRST, object), 24, pairs=np.array(SECOND, object), types=True)
    ids, lengths, types = (torch.from_numpy(a) for a in (enc.ids, enc.lengths, enc.types))
    mask = (torch.arange(24).unsqueeze(0) < lengths.unsqueeze(1)).long()
    bottom, top = split_encoder(copy.deepcopy(minilm), split=1, num_classes=2)
    config_json, state = bottom_state(bottom)
    rebuilt = build_bottom(config_json=config_json, split=1, state=state).eval()
    with torch.no_grad():
        want = top.head(pool(minilm(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state,
                             mask, "mean"))
        padded, m2 = unpack(pack(rebuilt(ids, mask, types), lengths), lengths)
        got = top.eval()(padded, m2)
        padded0, _ = unpack(pack(rebuilt(ids, mask), lengths), lengths)
        blind = top(padded0, m2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (blind - want).abs().max() > 1e-4  # control: without the types the split is not the model


def _llm_cfg(strategy: str, **over):
    raw = {"strategy": strategy, "dataset": "tiny-pairs", "num_parties": 1,
           "train": {"epochs": 1, "batch_size": 16, "optimizer": "adamw", "lr": 1e-3},
           "params": {"max_len": 32}}
    for k, v in over.items():
        sec, key = k.split(".")
        raw.setdefault(sec, {})[key] = v
    return load_run_config(raw)


class _Data:
    def __init__(self, ds):
        self.ds = ds

    def dataset(self):
        return self.ds


def test_token_types_only_for_pairs_on_models_with_segments(minilm):
    from vfl.engine.strategy import STRATEGIES

    pairs = load_dataset("tiny-pairs")
    s = STRATEGIES.get("split-lora")(_llm_cfg("split-lora"))
    assert uses_token_types(minilm.config) and s.token_types(pairs)
    sap = STRATEGIES.get("sap")(_llm_cfg("sap", **{"params.split": 0}))
    with pytest.raises(ConfigError, match=r"params\.split.*sentence pairs"):
        sap.prepare(_Data(pairs))
    STRATEGIES.get("sap")(_llm_cfg("sap", **{"params.split": 1})).prepare(_Data(pairs))  # types enter the bottom


# ---- GLUE metrics -------------------------------------------------------------------------------
TB = [0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 1, 1]
PB = [0, 1, 0, 0, 1, 1, 1, 0, 1, 1, 1, 0]
TM = [0, 1, 2, 2, 1, 0, 2, 1, 0, 2, 2, 1]
PM = [0, 2, 2, 2, 1, 0, 1, 1, 0, 0, 2, 1]


def test_metrics_match_scikit_learn_values():
    """Reference values: scikit-learn 1.9.1 f1_score (binary / average='macro') and matthews_corrcoef."""
    cb, cm3 = confusion(truth=np.array(TB), pred=np.array(PB), num_classes=2), \
        confusion(truth=np.array(TM), pred=np.array(PM), num_classes=3)
    assert f1(cb) == pytest.approx(0.7142857142857143, abs=1e-12)
    assert mcc(cb) == pytest.approx(0.3142857142857143, abs=1e-12)
    assert f1(cm3) == pytest.approx(0.7579365079365079, abs=1e-12)
    assert mcc(cm3) == pytest.approx(0.6316139407998892, abs=1e-12)
    const = confusion(truth=np.array([0, 0, 1]), pred=np.array([0, 0, 0]), num_classes=2)
    assert f1(const) == 0.0 and mcc(const) == 0.0  # undefined: 0, as scikit-learn
    assert glue_scores(cb)["acc"] == pytest.approx(np.mean(np.array(TB) == np.array(PB)))


@pytest.mark.parametrize("k", [2, 3, 5])
def test_metrics_match_scikit_learn_on_random_labels(k):
    metrics = pytest.importorskip("sklearn.metrics")
    rng = np.random.default_rng(k)
    for _ in range(20):
        t, p = rng.integers(k, size=50), rng.integers(k, size=50)
        agree = rng.random(50) < 0.5  # better than chance, so MCC is not always near 0
        p[agree] = t[agree]
        c = confusion(truth=t, pred=p, num_classes=k)
        want_f1 = metrics.f1_score(t, p) if k == 2 else metrics.f1_score(t, p, average="macro", labels=range(k))
        assert f1(c) == pytest.approx(want_f1, abs=1e-12)
        assert mcc(c) == pytest.approx(metrics.matthews_corrcoef(t, p), abs=1e-12)


# ---- lr schedules ---------------------------------------------------------------------------
@pytest.mark.parametrize(("schedule", "warmup"), [("linear", 0), ("linear", 3), ("constant", 4)])
def test_lr_factor_equals_transformers_schedules(schedule, warmup):
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    total = 12
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    ref = (get_linear_schedule_with_warmup(opt, warmup, total) if schedule == "linear"
           else get_constant_schedule_with_warmup(opt, warmup))
    ours = attach_schedule(torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5), schedule=schedule,
                           warmup=warmup, total=total)
    steps = range(total + 2)
    assert len(steps) == 14  # the loop below compares 14 steps
    for step in steps:
        want = opt.param_groups[0]["lr"]
        assert lr_factor(step, schedule=schedule, warmup=warmup, total=total) * 0.5 == pytest.approx(want, abs=1e-12)
        ours.step()  # the lr used by this step is what the hook set before it
        assert ours.param_groups[0]["lr"] == pytest.approx(want, abs=1e-12)
        opt.step()
        ref.step()


def test_schedule_values_at_steps_and_resume():
    assert [lr_factor(s, schedule="linear", warmup=2, total=6) for s in range(7)] == [0, 0.5, 1, 0.75, 0.5, 0.25, 0]
    assert [lr_factor(s, schedule="constant", warmup=2, total=6) for s in range(4)] == [0, 0.5, 1, 1]
    assert warmup_count(total=10, ratio=0.25) == 3 and warmup_count(total=10, steps=4) == 4
    p = torch.nn.Parameter(torch.zeros(1))
    opt = attach_schedule(torch.optim.AdamW([p], lr=1.0), schedule="linear", warmup=2, total=6)
    for _ in range(3):
        opt.step()
    saved = opt.state_dict()
    again = attach_schedule(torch.optim.AdamW([p], lr=1.0), schedule="linear", warmup=2, total=6)
    again.load_state_dict(saved)  # a resumed run continues at step 3, not at the warmup again
    again.step()
    assert again.param_groups[0]["lr"] == pytest.approx(0.75)


def test_schedule_keys_validated():
    with pytest.raises(ConfigError, match=r"train\.warmup_ratio.*one of the two"):
        _llm_cfg("split-lora", **{"train.warmup_steps": 2, "train.warmup_ratio": 0.1})
    with pytest.raises(ConfigError, match=r"train\.lr_schedule"):
        _llm_cfg("split-lora", **{"train.lr_schedule": "cosine"})
    with pytest.raises(ConfigError, match=r"train\.lr_schedule.*constant train\.lr"):
        load_run_config({"strategy": "npq", "dataset": "digits", "train": {"lr_schedule": "linear"}})
    from vfl.engine.strategy import STRATEGIES

    cfg = _llm_cfg("split-lora", **{"train.warmup_steps": 15})  # tiny-pairs: 240 / 16 = 15 steps in 1 epoch
    with pytest.raises(ConfigError, match=r"train\.warmup_steps.*all 15 optimizer steps"):
        STRATEGIES.get("split-lora")(cfg).prepare(_Data(load_dataset("tiny-pairs")))


# ---- JSON Lines / HF datasets ------------------------------------------------------------------
def test_jsonl_loading(tmp_path):
    rows = [{"text": f"t{i}", "text_pair": f"p{i}", "label": ["no", "yes"][i % 2]} for i in range(10)]
    (tmp_path / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = load_dataset("text-jsonl", data_dir=tmp_path)
    assert (ds.num_train, ds.num_test, ds.class_names) == (8, 2, ("no", "yes"))
    for x, pr, y in zip(ds.x_train, ds.extras["text_pair_train"], ds.y_train, strict=True):
        i = int(x[1:])
        assert pr == f"p{i}" and y == i % 2
    (tmp_path / "test.jsonl").write_text(json.dumps({"text": "a", "text_pair": "b", "label": "yes"}) + "\n")
    ds = load_dataset("text-jsonl", data_dir=tmp_path)
    assert (ds.num_train, ds.num_test, list(ds.extras["text_pair_test"])) == (10, 1, ["b"])
    single = tmp_path / "single"
    single.mkdir()
    (single / "train.jsonl").write_text("".join(json.dumps({"text": f"t{i}", "label": i % 3}) + "\n" for i in range(9)))
    assert "text_pair_train" not in load_dataset("text-jsonl", data_dir=single).extras


@pytest.mark.parametrize(("line2", "match"), [
    ("{not json", "line 2 is not JSON"),
    ('{"text": "b"}', "line 2 needs keys 'text' and 'label'"),
    ('{"text": "b", "label": 1}', "line 2: 'text_pair' must be on every line"),
])
def test_jsonl_bad_lines_are_one_line_errors(tmp_path, line2, match):
    (tmp_path / "train.jsonl").write_text('{"text": "a", "text_pair": "c", "label": 0}\n' + line2 + "\n")
    with pytest.raises(DataError, match=match) as e:
        load_dataset("text-jsonl", data_dir=tmp_path)
    assert "\n" not in str(e.value)


def test_shipped_tiny_pairs_is_the_generators_output():
    from importlib.resources import files

    train, test = generate()
    root = files("simulations.data").joinpath("tiny_pairs")
    assert root.joinpath("train.jsonl").read_text(encoding="utf-8") == dumps(train)
    assert root.joinpath("test.jsonl").read_text(encoding="utf-8") == dumps(test)
    ds = load_dataset("tiny-pairs")
    assert (ds.num_train, ds.num_test, ds.num_classes) == (240, 80, 2)
    assert 0.3 < ds.y_train.mean() < 0.7 and len(ds.extras["text_pair_test"]) == 80


def test_hf_datasets_without_the_package_is_one_line():
    try:
        import datasets  # noqa: F401
    except ImportError:
        with pytest.raises(DataError, match="'datasets' package is not installed") as e:
            load_dataset("hf-datasets", path="glue", subset="mrpc")
        assert "\n" not in str(e.value)
    else:
        pytest.skip("datasets is installed here: the refusal has nothing to refuse")


# ---- max_len ---------------------------------------------------------------------------------
def test_max_len_checked_against_the_position_table(minilm):
    check_max_len(minilm.config, 512)
    with pytest.raises(ConfigError, match=r"params\.max_len.*512 positions.*allowed: 4\.\.512"):
        check_max_len(minilm.config, 513)
    from transformers import RobertaConfig, T5Config

    assert max_positions(RobertaConfig(max_position_embeddings=514, pad_token_id=1)) == 512
    assert max_positions(T5Config()) is None  # relative positions: no table
    from vfl.engine.strategy import STRATEGIES

    cfg = _llm_cfg("split-lora", **{"params.max_len": 1024})  # the key allows > 512 ...
    with pytest.raises(ConfigError, match=r"params\.max_len.*got 1024"):  # ... the model decides
        STRATEGIES.get("split-lora")(cfg).prepare(_Data(load_dataset("tiny-pairs")))


def test_max_len_beyond_512_runs_where_the_model_allows(tmp_path):
    from transformers import LlamaConfig, LlamaModel

    from parties.llm.common.tiny import EOT, byte_tokenizer

    tok = byte_tokenizer(400)
    eot = tok.convert_tokens_to_ids(EOT)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                      bos_token_id=eot, eos_token_id=eot)
    torch.manual_seed(0)
    LlamaModel(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    check_max_len(cfg, 1024)
    enc = encode(load_tokenizer(str(tmp_path)), np.array(["word " * 900], object), 700,
                 pairs=np.array(["other " * 100], object))
    assert enc.lengths[0] == 700  # truncated longest-first to max_len > 512
    server = LoraEncoder(load_encoder(str(tmp_path)), None, pooling="last")
    h = server.forward(torch.from_numpy(enc.ids), torch.from_numpy(enc.lengths), None)
    assert h.shape == (1, 32) and torch.isfinite(h).all()


def test_llm_optimizer_factory_applies_the_configured_schedule():
    from strategies.base.llm import optimizer_factory

    cfg = _llm_cfg("split-lora", **{"train.lr_schedule": "linear", "train.warmup_ratio": 0.25})
    p = torch.nn.Parameter(torch.zeros(1))
    opt = optimizer_factory(cfg.train, 8)([p])  # warmup ceil(0.25 · 8) = 2 steps, then decay to 0 at step 8
    used = []
    for _ in range(8):
        opt.step()
        used.append(opt.param_groups[0]["lr"])
    assert used == pytest.approx([1e-3 * f for f in (0, 0.5, 1, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6)])
    assert optimizer_factory(cfg.train)([p]).param_groups[0].get("sched_step") is None  # no total: constant
