"""SAP over the in-process engine: what the vendor's message log holds (never token ids, never the
unperturbed representations in privatized modes, never labels) and config validation."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from tests.support.helpers import BlobSource
from vfl.core.errors import ConfigError
from vfl.data.dataset import Dataset, LabelShard
from vfl.engine.engine import Engine
from vfl.engine.schema import load_run_config
from vfl.privacy.mechanisms.dchi import nearest_rows
from vfl.runtime.transport.inprocess import InProcessTransport

POS = "great wonderful moving superb delightful charming".split()
NEG = "awful boring dull terrible tedious clumsy".split()
FILL = "the movie film plot story actor scene was is a an and it this of with".split()


@dataclass(frozen=True)
class ToySentiment:
    """Tiny in-memory text task: sentiment words + filler; extras["source"] is tied to text length."""

    num_train: int = 48
    num_test: int = 16
    seed: int = 0

    def dataset(self) -> Dataset:
        rng = np.random.default_rng(self.seed)
        n = self.num_train + self.num_test
        y, src = rng.integers(0, 2, n), rng.integers(0, 2, n)
        texts = []
        for yi, si in zip(y, src, strict=True):
            words = list(rng.choice(FILL, 5 + 6 * si)) + list(rng.choice(POS if yi else NEG, 2))
            rng.shuffle(words)
            texts.append(" ".join(words))
        x = np.array(texts, dtype=object)
        return Dataset("toy-sentiment", x[: self.num_train], y[: self.num_train], x[self.num_train:], y[self.num_train:],
                       2, modality="text", extras={"source": np.array(["imdb", "rt"])[src]})

    def partition(self) -> tuple[list, LabelShard]:
        d = self.dataset()
        return [], LabelShard(d.y_train, d.y_test, 2)


def sap_config(epochs: int = 1, **params):
    base = {"max_len": 16, "eia_samples": 4, "eia_steps": 5, "lora_rank": 2, "upload_chunk": 20, "inverter_samples": 64,
            "aia_finetune_epochs": 0}  # the fine-tuned AIA probe has its own tests (test_sap_aia_transformer.py)
    return load_run_config({"strategy": "sap", "num_parties": 1, "seed": 3,
                            "train": {"epochs": epochs, "batch_size": 16, "optimizer": "adam", "lr": 1e-3},
                            "params": {**base, **params}})


def run(params: dict, source=None):
    engine = Engine(sap_config(**params), InProcessTransport(), source or ToySentiment(), progress=False)
    result = engine.run()
    nodes = {nid: n for h in engine.transport.hosts.values() for nid, n in h.nodes.items()}
    return result, nodes[0], nodes[1]


def received_reps(vendor, customer, phase_kind="train.reps"):
    """(received rows, clean rows of the same samples, true token ids) over every rep message."""
    got, clean, toks = [], [], []
    for e in vendor.log:
        if e.kind != phase_kind:
            continue
        lengths = e.arrays["reps/lengths"]
        if e.config["step/mode"] == "upload":
            ids = np.arange(e.config["step/offset"], e.config["step/offset"] + len(lengths))
        else:
            ids = customer.schedule.train_ids(e.config["step/epoch"], e.config["step/step"])
        assert np.array_equal(customer.len_train[ids], lengths)
        width = int(lengths.max())
        x = torch.as_tensor(customer.ids_train[ids, :width])
        mask = (torch.arange(width)[None] < torch.tensor(lengths)[:, None]).long()
        with torch.no_grad():
            h = vendor.attack_bottom(x, mask)  # the initial bottom (= the customer's, before any update)
        got.append(e.arrays["reps/h"])
        clean.append(h[mask.bool()].numpy())
        toks.append(x[mask.bool()].numpy())
    return np.concatenate(got), np.concatenate(clean), np.concatenate(toks)


CUSTOMER_TO_VENDOR = {"reps/h", "reps/lengths", "grad/g"}


def _assert_nothing_private_on_the_wire(vendor, customer):
    from_customer = [e for e in vendor.log if e.src == customer.node_id]
    assert from_customer, "the vendor received nothing"
    assert {k for e in from_customer for k in e.shapes} <= CUSTOMER_TO_VENDOR  # no ids, texts or labels
    assert all(e.arrays is not None for e in from_customer)
    ints = {k for e in vendor.log for k, (dtype, _) in e.shapes.items() if dtype[1] in "iu"}
    assert ints <= {"reps/lengths", "aux/ids", "aux/values"}  # lengths; sample ids + attribute of the AIA query


@pytest.mark.parametrize(("split", "frozen", "eta"), [(0, True, 50.0), (0, False, 50.0), (2, True, 10.0)])
def test_vendor_never_receives_token_ids_or_clean_representations(split, frozen, eta):
    result, vendor, customer = run({"split": split, "frozen_bottom": frozen, "eta": eta})
    _assert_nothing_private_on_the_wire(vendor, customer)
    got, clean, toks = received_reps(vendor, customer)
    if not frozen:  # only the first batch was made with the initial bottom
        first = next(e for e in vendor.log if e.kind == "train.reps")
        n = len(first.arrays["reps/h"])
        got, clean, toks = got[:n], clean[:n], toks[:n]
    same_row = np.all(np.isclose(got, clean, atol=1e-6), axis=1)
    assert same_row.mean() < 0.5  # η=50: ~12 % of tokens survive snapping, deeper split: none
    if split == 0:  # every released vector is a vocabulary row (snapping), mostly not the true one
        vocab = vendor.attack_bottom.vocab
        rows = nearest_rows(torch.as_tensor(got), table=vocab)
        np.testing.assert_array_equal(vocab[rows].numpy(), got)
        assert (rows.numpy() != toks).mean() > 0.5
    else:
        assert not same_row.any()
    assert {"test_acc", "ep_eia", "ep_aia", "eta", "split"} <= set(result.history[-1])
    assert result.summary["eta"] == eta and result.summary["split"] == split


def test_without_privatization_the_vendor_sees_clean_representations_and_inverts_them():
    result, vendor, customer = run({"split": 0, "eta": None})
    _assert_nothing_private_on_the_wire(vendor, customer)  # no ids even without privatization...
    got, clean, _ = received_reps(vendor, customer)
    np.testing.assert_array_equal(got, clean)  # ...but the representations are the embeddings
    assert result.summary["ep_eia"] == 0.0  # and nearest-neighbour search recovers every token


def test_labels_are_not_sent_but_dlogits_names_every_one():
    """No label crosses the wire, yet the vendor reads every training label off dLoss/dlogits
    (softmax − one-hot: the label is its only negative entry). SAP does not protect labels."""
    _, vendor, customer = run({"split": 0, "eta": 50.0, "frozen_bottom": False})
    kinds = {e.kind for e in vendor.log if e.src == customer.node_id}
    assert kinds == {"train.reps", "train.grad", "evaluate.reps"}
    grads = [e for e in vendor.log if e.kind == "train.grad"]
    assert grads and all(e.shapes["grad/g"] == ("<f4", (16, 2)) for e in grads)  # dLoss/dlogits only
    for e in grads:  # the vendor's attack, from its own log and its own copy of the batch schedule
        guess = e.arrays["grad/g"].argmin(1)
        truth = customer.y_train[vendor.schedule.train_ids(int(e.config["step/epoch"]), int(e.config["step/step"]))]
        assert (guess == truth).all()


@pytest.mark.parametrize(("change", "key"), [({"num_parties": 2}, "num_parties"),
                                            ({"params": {"cti": True, "eta": None}}, "params.cti")])
def test_config_errors(change, key):
    raw = {"strategy": "sap", "num_parties": 1, **change}
    with pytest.raises(ConfigError, match=key):
        load_run_config(raw)


def test_prepare_rejects_non_text_data_and_a_split_beyond_the_model():
    with pytest.raises(ConfigError, match="dataset"):
        Engine(sap_config(), InProcessTransport(), BlobSource(num_parties=1), progress=False).start()
    with pytest.raises(ConfigError, match="params.split"):
        Engine(sap_config(split=6), InProcessTransport(), ToySentiment(), progress=False).start()
