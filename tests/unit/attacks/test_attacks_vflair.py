"""The VFLAIR attacks we lacked, as pure functions: model completion (Fu et al. 2022), GRN (Luo et al.
2021), non-targeted backdoors (noisy samples, missing features), and the active completion party."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import strategies  # noqa: F401
from parties.vertical import wire as vw
from parties.vertical.party import step_config
from simulations.data.source import ConfigDataSource
from vfl.attacks.grn import grn_attack
from vfl.attacks.model_completion import completion_accuracy, known_label_ids
from vfl.attacks.reconstruction import mean_baseline, mse
from vfl.attacks.robustness import accuracy_drop, missing_features, noisy_samples
from vfl.core.errors import ConfigError, DataError
from vfl.engine.schema import load_run_config
from vfl.engine.strategy import STRATEGIES
from vfl.runtime import message as wire
from vfl.runtime.node import NodeSpec


def _clusters(rng, n=600, k=5, d=8, spread=0.6):
    centers = rng.normal(size=(k, d)) * 2
    y = rng.integers(0, k, n)
    return centers[y] + spread * rng.normal(size=(n, d)), y


def test_known_label_ids_are_per_class_and_distinct():
    y = np.repeat(np.arange(4), [10, 10, 10, 2])
    ids = known_label_ids(y=y, per_class=3, rng=np.random.default_rng(0))
    assert len(set(ids.tolist())) == len(ids) == 3 + 3 + 3 + 2
    assert np.bincount(y[ids]).tolist() == [3, 3, 3, 2]
    with pytest.raises(DataError):
        known_label_ids(y=y, per_class=0, rng=np.random.default_rng(0))


def test_completion_infers_labels_from_informative_outputs_and_is_at_chance_on_random_labels():
    rng = np.random.default_rng(1)
    x, y = _clusters(rng)
    known = known_label_ids(y=y, per_class=4, rng=rng)
    rest = np.setdiff1d(np.arange(len(y)), known)
    acc = completion_accuracy(known_x=x[known], known_y=y[known], eval_x=x[rest], eval_y=y[rest], num_classes=5, seed=0)
    assert acc > 0.9
    y_rand = rng.integers(0, 5, len(y))  # control: labels independent of the outputs
    chance = completion_accuracy(known_x=x[known], known_y=y_rand[known], eval_x=x[rest], eval_y=y_rand[rest],
                                 num_classes=5, seed=0)
    assert chance < 0.35


def _linear_model(rng, d_adv, d_vic, k):
    w_a = torch.as_tensor(rng.normal(size=(d_adv, k)), dtype=torch.float32)
    w_v = torch.as_tensor(rng.normal(size=(d_vic, k)) * 2, dtype=torch.float32)
    return lambda adv, vic: torch.softmax(adv @ w_a + vic @ w_v, dim=1)


def test_grn_recovers_victim_features_from_predictions_and_not_from_shuffled_ones():
    rng = np.random.default_rng(2)
    n, d_adv, d_vic, k = 300, 4, 3, 8  # k - 1 > d_vic: the prediction pins the victim's features
    adv, vic = rng.normal(size=(n, d_adv)), rng.normal(size=(n, d_vic))
    predict = _linear_model(rng, d_adv, d_vic, k)
    with torch.no_grad():
        obs = predict(torch.as_tensor(adv, dtype=torch.float32), torch.as_tensor(vic, dtype=torch.float32)).numpy()
    kw = {"predict": predict, "adv_x": adv, "prior_mean": np.zeros(d_vic), "prior_std": np.ones(d_vic),
          "seed": 0, "epochs": 400, "prior_weight": 0.01}
    est = grn_attack(observed=obs, rng=torch.Generator().manual_seed(0), **kw)
    base = mean_baseline(np.zeros((1, d_vic)), vic)
    assert mse(est, vic) < 0.5 * base
    control = grn_attack(observed=obs[rng.permutation(n)], rng=torch.Generator().manual_seed(0), **kw)
    assert mse(control, vic) > 0.9 * base  # predictions of other samples: nothing about these samples
    with pytest.raises(DataError):
        grn_attack(observed=obs[:1], rng=torch.Generator(), **{**kw, "adv_x": adv[:1]})


def test_noisy_samples_and_missing_features_touch_only_the_chosen_rows():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 5)).astype(np.float32)
    noisy, rows = noisy_samples(x, fraction=0.25, scale=1.0, rng=np.random.default_rng(0))
    changed = np.flatnonzero((noisy != x).any(1))
    assert len(rows) == 10 and np.array_equal(changed, rows)
    gone, rows2 = missing_features(x, fraction=0.5, rng=np.random.default_rng(0))
    assert len(rows2) == 20 and (gone[rows2] == 0).all()
    keep = np.setdiff1d(np.arange(40), rows2)
    assert np.array_equal(gone[keep], x[keep])
    with pytest.raises(DataError):
        missing_features(x, fraction=0.0, rng=np.random.default_rng(0))


def test_accuracy_drop_measures_the_damage_and_is_zero_for_a_model_that_ignores_the_party():
    rng = np.random.default_rng(4)
    x_party, x_other = rng.normal(size=(400, 2)), rng.normal(size=(400, 2))
    y = (x_party[:, 0] + x_other[:, 0] > 0).astype(int)

    def uses(xp):
        return (xp[:, 0] + x_other[:, 0] > 0).astype(int)

    def ignores(xp):
        return (x_other[:, 0] > 0).astype(int)

    gone, rows = missing_features(x_party, fraction=1.0, rng=rng)
    hurt = accuracy_drop(clean_pred=uses(x_party), attacked_pred=uses(gone), y=y, rows=rows)
    assert hurt["clean_acc"] == 1.0 and hurt["acc_drop"] > 0.15
    assert hurt["acc_drop"] == pytest.approx(hurt["clean_acc"] - hurt["attacked_acc"])
    blind = accuracy_drop(clean_pred=ignores(x_party), attacked_pred=ignores(gone), y=y, rows=rows)
    assert blind["acc_drop"] == 0.0


def _party(attack):
    cfg = load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": 2, "attack": attack,
                           "model": {"embed_dim": 8, "bottom_hidden": [16]}, "train": {"batch_size": 32}})
    strat = STRATEGIES.get("npq")(cfg)
    data = ConfigDataSource.from_config(cfg)
    strat.prepare(data)
    party = strat.build_node(NodeSpec(1, "party", "party0", "parties"), data)
    start = wire.make(vw.Kind.TRAIN_FORWARD, src=0, dst=1, round=wire.round_tag(0, 0),
                      content=wire.records(**{vw.Record.STEP: step_config(epoch=0, step=0, forward=True)}))
    party.on_train([start])
    return party


def test_the_active_completion_party_moves_its_bottom_amc_scale_times_the_honest_step():
    g = np.random.default_rng(0).normal(size=(32, 8)).astype(np.float32) * 0.01
    armed = _party({"amc_party": 0, "amc_scale": 3.0})
    honest = _party({})  # control: the same party, same gradient, honest optimizer
    assert type(armed).__name__.startswith("ActiveCompletion") and type(honest).__name__ == "PassiveParty"
    start = [p.detach().clone() for p in honest.bottom.parameters()]
    armed.apply_gradient(g, 0, 0)
    honest.apply_gradient(g, 0, 0)
    for s, a, h in zip(start, armed.bottom.parameters(), honest.bottom.parameters(), strict=True):
        assert torch.allclose(a - s, 3.0 * (h - s), atol=1e-6)
    assert any(not torch.allclose(a, h) for a, h in zip(armed.bottom.parameters(), honest.bottom.parameters(),
                                                         strict=True))


def test_amc_party_must_name_a_party():
    with pytest.raises(ConfigError, match="attack.amc_party"):
        load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": 2, "attack": {"amc_party": 2}})
    with pytest.raises(ConfigError, match="attack.amc_scale"):
        load_run_config({"strategy": "npq", "dataset": "digits", "num_parties": 2, "attack": {"amc_scale": 0}})


def test_the_matrix_runs_the_new_attacks_and_scores_grn_as_an_mse():
    from simulations.benchmarks.matrix import QUICK_ATTACKS, attack_success
    from simulations.report.render import ORDER, RUN_ATTACKS

    new = ("passive_model_completion", "active_model_completion", "grn_feature_inference", "noisy_samples",
           "missing_features")
    assert all(n in RUN_ATTACKS and n in ORDER for n in new)  # `vfl report` and `--attacks all` run them
    assert set(new) - {"active_model_completion"} <= set(QUICK_ATTACKS)  # the quick grid too
    assert attack_success("grn_feature_inference", 0.25, 1.0) == 0.75  # MSE at a quarter of the mean guess
    assert attack_success("missing_features", 0.12, 0.0) == 0.12  # an accuracy drop counts as it is
