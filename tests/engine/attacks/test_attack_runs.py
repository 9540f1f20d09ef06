"""Attacks on real (in-process) runs: what a curious party or server recovers from its recorded view."""

from __future__ import annotations

import inspect
import json

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from simulations.cli.runner import execute, resolve_config
from simulations.report.render import RUN_ATTACKS, build_report, load_run

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _binary_run(out, strategy: str, **params):
    cfg = resolve_config({"name": "li", "dataset": "breast-cancer", "num_parties": 4, "strategy": strategy,
                          "params": params, "transport": {"kind": "inprocess"},
                          "model": {"embed_dim": 8, "bottom_hidden": [16], "head": "mlp", "head_hidden": [16]},
                          "train": {"epochs": 4, "batch_size": 50, "lr": 0.05, "momentum": 0.9},
                          "privacy": {"record_views": True}})
    execute(cfg, out_dir=out, progress=False)
    return RUN_ATTACKS.get("label_inference")(load_run(out))[0]


def test_label_inference_is_near_perfect_for_npq_and_falls_with_beta_for_pbm(tmp_path):
    npq = _binary_run(tmp_path / "npq", "npq")
    high = _binary_run(tmp_path / "pbm25", "pbm", b=16, beta=0.25)
    low = _binary_run(tmp_path / "pbm01", "pbm", b=16, beta=0.01)
    assert npq.value > 0.97 and npq.value > npq.baseline + 0.2
    assert high.value > 0.9  # PBM noises the forward pass; the gradient sent back still carries the label
    assert low.value < high.value - 0.1


def _digits(out, **over):
    base = {"name": "t", "dataset": "digits", "num_parties": 4, "strategy": "pbm",
            "params": {"b": 16, "beta": 0.25}, "transport": {"kind": "inprocess"},
            "model": {"bottom_hidden": [32], "head_hidden": [32]},
            "train": {"epochs": 3, "batch_size": 64, "lr": 0.05, "momentum": 0.9},
            "privacy": {"record_views": True}, "attack": {"canaries": 100}}
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v} if isinstance(v, dict) and k != "params" else v
    execute(resolve_config(base), out_dir=out, progress=False)
    return out


def test_report_of_a_pbm_run_has_every_number_and_figure(tmp_path, capsys):
    run = _digits(tmp_path / "pbm")
    assert main(["report", str(run)]) == 0
    rep = json.loads((run / "report.json").read_text())
    for key in ("epsilon", "epsilon_scope", "audit_epsilon_lower", "attacks"):
        assert key in rep
    names = {a["name"] for a in rep["attacks"]}
    assert {"label_inference", "feature_reconstruction", "dlg_label", "idlg_label", "membership_loss",
            "membership_label_only", "extraction", "audit"} <= names
    assert all({"name", "metric", "value", "baseline"} <= set(a) for a in rep["attacks"])
    assert 0 < rep["audit_epsilon_lower"] <= rep["epsilon"]
    assert rep["epsilon_scope"] and "SUM of 4 parties" in rep["epsilon_scope_detail"]
    assert rep["epsilon_is_guarantee"] is True
    for fig in ("accuracy", "communication", "epsilon_delta", "rdp", "attacks", "audit", "reconstruction"):
        assert (run / "report" / f"{fig}.png").exists()
    md = (run / "report.md").read_text()
    assert "audit ε" in md and "label_inference" in md and "![attacks]" in md
    capsys.readouterr()
    assert main(["attack", "membership", str(run)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in out["results"]] == ["membership_loss", "membership_label_only"]
    # the attacks that re-play the mechanism's noise give the report's numbers again (noise from the run seed)
    again = {a.name: a.value for n in ("noisy_samples", "missing_features") for a in RUN_ATTACKS.get(n)(load_run(run))}
    assert again == {a["name"]: a["value"] for a in rep["attacks"] if a["name"] in again}


@pytest.mark.parametrize("sigma", [2.0, 8.0])
def test_ldp_audit_stays_below_the_accountant(tmp_path, sigma):
    run = _digits(tmp_path / "ldp", strategy="ldp", params={"sigma": sigma}, attack={"canaries": 200})
    (res,) = RUN_ATTACKS.get("audit")(load_run(run))
    assert res.value <= res.details["accountant_epsilon"]
    assert res.details["scored_from"] == "the canary party's own messages"


def test_attacks_without_views_say_what_is_missing(tmp_path):
    run = _digits(tmp_path / "plain", privacy={"record_views": False}, attack={"canaries": 0})
    rep = build_report(run)
    assert "record_views" in rep["skipped"]["label_inference"] and rep["audit_epsilon_lower"] is None
    assert {a["name"] for a in rep["attacks"]} >= {"membership_loss", "extraction"}
    (ext,) = [a for a in rep["attacks"] if a["name"] == "extraction"]  # bounded work, every line done
    assert ext["lines_done"] == ext["lines"] and 0 < ext["queries"] < ext["query_budget"]
    assert main(["attack", "nope", str(run)]) == 2 and main(["report", str(tmp_path)]) == 2


_SEEDED_NOISE = "noise" in inspect.signature(__import__("vfl.privacy.mechanisms.gaussian", fromlist=["x"]).gaussian_perturb
                                              ).parameters


@pytest.mark.skipif(not _SEEDED_NOISE, reason="mechanisms do not draw from NoiseSource.for_round yet")
@pytest.mark.parametrize(("strategy", "params", "train"), [
    # sigma 200 on the embeddings: at the default lr the loss goes non-finite and the run now stops (exit 3)
    ("ldp", {"sigma": 200.0}, {"lr": 0.001, "momentum": 0.0}),
    ("pbm", {"b": 2, "beta": 0.01, "secagg": True}, {})])
def test_seeded_noise_audit_may_exceed_the_accountant_and_says_why(tmp_path, strategy, params, train):
    run = _digits(tmp_path / "seeded", strategy=strategy, params=params, attack={"canaries": 200},
                  privacy={"record_views": True, "noise_rng": "seeded"}, train=train)
    (res,) = RUN_ATTACKS.get("audit")(load_run(run))
    assert res.details["accuracy"] >= 0.95 and res.value > res.details["accountant_epsilon"]
    assert res.details["epsilon_is_guarantee"] is False and "seeded" in res.details["why"]


def test_gradient_replacement_backdoor_with_and_without_pbm(tmp_path):
    attack = {"canaries": 0, "backdoor_party": 1, "backdoor_target": 0, "backdoor_amplify": 20.0,
              "backdoor_trigger_size": 8, "backdoor_trigger": 5.0, "backdoor_poison": 200, "backdoor_known": 40}
    common = {"num_parties": 2, "data": {"partition_opts": {"sizes": [16, 48]}}, "attack": attack,
              "train": {"epochs": 10}, "privacy": {"record_views": False}}
    npq = RUN_ATTACKS.get("backdoor")(load_run(_digits(tmp_path / "npq", strategy="npq", params={}, **common)))[0]
    pbm = RUN_ATTACKS.get("backdoor")(load_run(_digits(tmp_path / "pbm", **common)))[0]
    assert npq.value > npq.baseline + 0.1 and npq.details["clean_accuracy"] > 0.85
    assert 0 <= pbm.value <= 1 and pbm.details["clean_accuracy"] > 0.5
