"""The pieces of causal-LM instruction tuning (``ushape-lora``): ROUGE-L against hand-computed values,
the instruction JSONL loader and the shipped set, prompt masking and the response loss, greedy decoding,
and the U-shaped split's exactness on an untrained tiny Llama."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from parties.llm.common.metrics import lcs_length, rouge_l
from parties.llm.ushape.generate import Greedy, generate
from parties.llm.ushape.instruct import IGNORE, encode_instructions, prompt_ids, response_nll
from parties.llm.ushape.parts import check_cut, load_causal_lm, real_mask, split_causal_lm
from simulations.data import load_dataset
from simulations.data.gen_instruct import generate as gen_lines
from simulations.data.gen_pairs import dumps
from vfl.core.errors import ConfigError, DataError

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


# ---- ROUGE-L ------------------------------------------------------------------------------------
def test_lcs_length_by_hand():
    assert lcs_length(list("abcbdab"), list("bdcaba")) == 4  # CLRS: "bcba"
    assert lcs_length([], ["a"]) == 0 and lcs_length(["a"], ["a"]) == 1


@pytest.mark.parametrize(("ref", "cand", "want"), [
    ("the cat sat on the mat", "the cat on the mat", 10 / 11),  # LCS 5: P = 5/5, R = 5/6, F = 2PR/(P+R)
    ("a b c d", "b a d", 4 / 7),  # LCS 2: P = 2/3, R = 2/4
    ("The Cat.", "the cat", 1.0),  # case and punctuation dropped
    ("police killed the gunman", "the gunman police killed", 0.5),  # Lin (2004): LCS 2 of 4 and 4
    ("a b", "c d", 0.0),
    ("", "a", 0.0),
])
def test_rouge_l_by_hand(ref, cand, want):
    assert rouge_l(reference=ref, candidate=cand) == pytest.approx(want)


def test_rouge_l_beta_weights_recall():
    # LCS 2, P = 1, R = 0.5: F_beta = (1 + b²)PR / (R + b²P)
    assert rouge_l(reference="a b c d", candidate="a b", beta=2.0) == pytest.approx(5 * 0.5 / (0.5 + 4))


# ---- the instruction loaders --------------------------------------------------------------------
def test_instruct_jsonl_with_and_without_a_test_file(tmp_path):
    lines = [{"prompt": f"q{i}", "response": f"a{i}"} for i in range(10)]
    (tmp_path / "train.jsonl").write_text(dumps(lines))  # type: ignore[arg-type]
    ds = load_dataset("instruct-jsonl", data_dir=tmp_path, seed=0)
    assert (ds.num_train, ds.num_test) == (8, 2) and ds.modality == "text"
    for split in ("train", "test"):
        xs, rs = getattr(ds, f"x_{split}"), ds.extras[f"response_{split}"]
        assert [f"a{x[1:]}" for x in xs] == list(rs)  # each prompt keeps its response
    (tmp_path / "test.jsonl").write_text(dumps(lines[:3]))  # type: ignore[arg-type]
    ds = load_dataset("instruct-jsonl", data_dir=tmp_path, seed=0)
    assert (ds.num_train, ds.num_test) == (10, 3) and list(ds.extras["response_test"]) == ["a0", "a1", "a2"]


@pytest.mark.parametrize(("line", "match"), [("not json", "line 2 is not JSON"),
                                             ('{"prompt": "q"}', "line 2 needs string keys"),
                                             ('{"prompt": "q", "response": 3}', "line 2 needs string keys")])
def test_instruct_jsonl_bad_lines_are_one_line_errors(tmp_path, line, match):
    (tmp_path / "train.jsonl").write_text(json.dumps({"prompt": "q", "response": "a"}) + "\n" + line + "\n")
    with pytest.raises(DataError, match=match):
        load_dataset("instruct-jsonl", data_dir=tmp_path, seed=0)


def test_shipped_tiny_instruct_is_the_generators_output():
    from importlib.resources import files

    train, test = gen_lines()
    root = files("simulations.data").joinpath("tiny_instruct")
    assert root.joinpath("train.jsonl").read_text(encoding="utf-8") == dumps(train)  # type: ignore[arg-type]
    assert root.joinpath("test.jsonl").read_text(encoding="utf-8") == dumps(test)  # type: ignore[arg-type]
    ds = load_dataset("tiny-instruct", seed=0)
    assert (ds.num_train, ds.num_test) == (len(train), len(test))
    assert ds.x_test[0] == test[0]["prompt"] and ds.extras["response_test"][0] == test[0]["response"]


# ---- prompt masking and the response loss -------------------------------------------------------
class CharTok:
    """One token per character (id = code point); eos = pad = 1."""

    eos_token_id = pad_token_id = 1

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


def test_prompt_tokens_are_masked_out_of_the_labels():
    tok = CharTok()
    rows = encode_instructions(tok, ["hi", "a long prompt"], ["yo", "zz"], max_len=16, template="{prompt}:")
    p0 = prompt_ids(tok, "hi", template="{prompt}:")
    assert p0 == [ord(c) for c in "hi:"] and rows.prompt_lengths[0] == 3
    row0 = [ord(c) for c in "hi: yo"] + [1]
    assert rows.ids[0, :7].tolist() == row0 and rows.lengths[0] == 7
    assert rows.labels[0].tolist() == [IGNORE] * 3 + row0[3:] + [IGNORE] * 9  # response + eos only
    # row 1 is cut at max_len: the prompt stays whole, the response loses its end (and the eos)
    assert rows.lengths[1] == 16 and rows.prompt_lengths[1] == len("a long prompt:")
    assert rows.labels[1].tolist() == [IGNORE] * 14 + [ord(" "), ord("z")]


def test_response_nll_counts_only_labelled_next_tokens():
    torch.manual_seed(0)
    logits = torch.randn(2, 5, 7)
    labels = torch.tensor([[IGNORE, IGNORE, 3, 4, IGNORE], [IGNORE, 6, 0, IGNORE, IGNORE]])
    nll, count = response_nll(logits, labels)
    lp = logits.log_softmax(-1)
    want = -(lp[0, 1, 3] + lp[0, 2, 4] + lp[1, 0, 6] + lp[1, 1, 0])  # logits at t predict the label at t + 1
    assert count == 4 and float(nll) == pytest.approx(float(want), rel=1e-6)


# ---- greedy decoding ----------------------------------------------------------------------------
def test_greedy_grows_each_row_until_eos_or_max_new():
    g = Greedy([[5, 6], [7]], eos=0, pad=9, max_new=3)
    ids, lengths = g.batch()
    assert ids.tolist() == [[5, 6], [7, 9]] and lengths.tolist() == [2, 1]
    g.advance(np.eye(4)[[2, 0]])  # row 0 -> 2, row 1 -> eos (done)
    g.advance(np.eye(4)[[3, 3]])  # row 0 -> 3; row 1 stays
    g.advance(np.eye(4)[[1, 1]])  # row 0 -> 1: its third token (done)
    assert g.finished and g.outputs() == [[2, 3, 1], []]
    g = Greedy([[5, 6], [7]], eos=0, pad=9, max_new=3, positions=3)  # no row grows past the position table
    g.advance(np.eye(4)[[2, 2]])
    assert g.finished is False and g.outputs() == [[2], [2]] and g.done.tolist() == [True, False]
    g.advance(np.eye(4)[[3, 3]])
    assert g.finished and g.outputs() == [[2], [2, 3]]


def test_generate_with_padding_equals_one_prompt_at_a_time(llama):
    lm = load_causal_lm(llama)
    head, body, tail = split_causal_lm(lm, split=1, tail=1)
    prompts = [[5, 9, 30, 41, 7], [12, 3]]
    both = generate(head=head, body=body, tail=tail, prompts=prompts, eos=-1, pad=0, max_new=4)
    alone = [generate(head=head, body=body, tail=tail, prompts=[p], eos=-1, pad=0, max_new=4)[0] for p in prompts]
    assert both == alone and all(len(o) == 4 for o in both)
    with torch.no_grad():  # the same as the whole model's greedy continuation
        out = lm.generate(torch.tensor([prompts[0]]), max_new_tokens=4, do_sample=False, eos_token_id=None,
                          pad_token_id=0)
    assert out[0, 5:].tolist() == both[0]


# ---- the split ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("split", "tail"), [(0, 0), (1, 1), (2, 0), (0, 2)])
def test_the_u_shaped_split_is_the_whole_model(llama, split, tail):
    lm = load_causal_lm(llama)
    head, body, tl = split_causal_lm(lm, split=split, tail=tail)
    assert (len(head.layers), len(body.layers), len(tl.layers)) == (split, 3 - split - tail, tail)
    ids = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(1))
    n = torch.tensor([9, 6])
    mask = real_mask(n, 9)
    with torch.no_grad():
        full = lm(input_ids=ids, attention_mask=mask).logits
        parts = tl(body(head(ids, mask), mask), mask)
    assert torch.equal(full[mask.bool()], parts[mask.bool()])


def test_the_cut_must_leave_the_server_a_block():
    check_cut(num_blocks=3, split=1, tail=1)
    with pytest.raises(ConfigError, match="params.split.*leaves no block"):
        check_cut(num_blocks=3, split=2, tail=1)


def test_an_encoder_is_refused(tiny_bert):
    with pytest.raises(ConfigError, match="params.model_dir.*not a decoder"):
        split_causal_lm(load_causal_lm(tiny_bert), split=0, tail=0)
