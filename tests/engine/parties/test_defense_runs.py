"""Each defense against the attack it is meant to weaken, on real (in-process) runs of digits.

The control in every test is the same run without the defense: the passive party's label-inference
attack on the gradients it recorded must succeed there, and do (much) worse with the defense.
"""

from __future__ import annotations

import json
import re

import pytest

import strategies  # noqa: F401
from simulations.cli.main import main
from simulations.cli.runner import execute, resolve_config
from simulations.report.render import RUN_ATTACKS, load_run

pytestmark = [pytest.mark.usefixtures("one_thread")]


def _run(out, defenses, strategy="npq", **params):
    cfg = resolve_config({"name": "def", "dataset": "digits", "num_parties": 4, "strategy": strategy,
                          "params": params, "transport": {"kind": "inprocess"},
                          "model": {"bottom_hidden": [32], "head_hidden": [32], "embed_dim": 16},
                          "train": {"epochs": 3, "batch_size": 64, "lr": 0.05, "momentum": 0.9},
                          "privacy": {"record_views": True}, "defenses": defenses})
    summary = execute(cfg, out_dir=out, progress=False).summary
    return summary, RUN_ATTACKS.get("label_inference")(load_run(out))[0]


@pytest.fixture(scope="module")
def undefended(tmp_path_factory):
    """The run without a defense, once for every control of this module: (run directory, summary, label inference)."""
    out = tmp_path_factory.mktemp("none")
    summary, attack = _run(out, [])
    return out, summary, attack


@pytest.fixture(scope="module")
def control(undefended):
    """No defense: the gradient carries the labels (the attack's success is the control)."""
    _, summary, attack = undefended
    assert attack.value > attack.baseline + 0.2
    assert "epsilon_label" not in summary and "defenses" not in summary
    return summary, attack


def test_label_rr_drives_label_inference_toward_chance_and_reports_its_epsilon(tmp_path, control):
    _, none = control
    summary, rr = _run(tmp_path, [{"kind": "label_rr", "epsilon": 1.0}])
    assert summary["epsilon_label"] == 1.0 and summary["epsilon_by_scope"] == {"feature": None, "label": 1.0}
    gap_none, gap_rr = none.value - none.baseline, rr.value - rr.baseline
    assert gap_rr < gap_none / 3, (none.value, rr.value, rr.baseline)
    assert rr.details["cosine"] < none.details["cosine"] - 0.3  # direction clusters no longer the classes


def test_label_rr_composes_with_pbm_and_the_report_shows_both_epsilons(tmp_path, capsys):
    summary, rr = _run(tmp_path, [{"kind": "label_rr", "epsilon": 1.0}], strategy="pbm", b=16, beta=0.25)
    by = summary["epsilon_by_scope"]
    assert by["label"] == 1.0 and by["feature"] == summary["epsilon"] and summary["epsilon"] > 0
    capsys.readouterr()
    assert main(["report", str(tmp_path), "--attacks", "label_inference"]) == 0
    out = capsys.readouterr().out.splitlines()  # off a terminal: one line per attack, then the JSON line
    assert re.fullmatch(r"attack 1/1 label_inference \d+\.\ds", out[0]), out[0]
    printed = json.loads(out[1])
    assert printed["epsilon_label"] == 1.0 and "label_inference" in printed["attacks"]
    rep = json.loads((tmp_path / "report.json").read_text())
    assert rep["epsilon_label"] == 1.0 and rep["epsilon_by_scope"]["label"] == 1.0
    assert "label ε" in (tmp_path / "report.md").read_text()


def test_grad_noise_weakens_label_inference(tmp_path, control):
    _, none = control
    _, noisy = _run(tmp_path, [{"kind": "grad_noise", "scale": 0.05}])
    assert noisy.value - noisy.baseline < (none.value - none.baseline) / 3


def test_grad_topk_weakens_the_direction_attacks_but_not_the_norm_attack(tmp_path, control):
    """Honest reading (VFLAIR's GS row): sparsification blurs gradient directions; norms still leak."""
    _, none = control
    _, topk = _run(tmp_path, [{"kind": "grad_topk", "keep": 0.1}])
    assert topk.details["cosine"] < none.details["cosine"] - 0.1
    assert topk.details["norm"] > topk.baseline + 0.1


def test_marvell_weakens_label_inference_on_binary_labels_and_keeps_accuracy(tmp_path):
    def binary(out, defenses):
        cfg = resolve_config({"name": "mv", "dataset": "breast-cancer", "num_parties": 4, "strategy": "npq",
                              "transport": {"kind": "inprocess"},
                              "model": {"embed_dim": 8, "bottom_hidden": [16], "head": "mlp", "head_hidden": [16]},
                              "train": {"epochs": 4, "batch_size": 50, "lr": 0.05, "momentum": 0.9},
                              "privacy": {"record_views": True}, "defenses": defenses})
        summary = execute(cfg, out_dir=out, progress=False).summary
        return summary, RUN_ATTACKS.get("label_inference")(load_run(out))[0]

    s_none, none = binary(tmp_path / "none", [])  # control: the gradient gives the labels away
    s_mv, mv = binary(tmp_path / "marvell", [{"kind": "marvell", "strength": 4.0}])
    assert none.value > 0.95
    assert mv.value - mv.baseline < (none.value - none.baseline) / 2, (none.value, mv.value, mv.baseline)
    assert s_mv["final_test_acc"] > s_none["final_test_acc"] - 0.05 and "epsilon_label" not in s_mv


def test_dcor_weakens_the_servers_feature_reconstruction(tmp_path, undefended):
    def mse(out):
        return RUN_ATTACKS.get("feature_reconstruction")(load_run(out))[0]

    none = mse(undefended[0])  # control: the decoder inverts the plain embeddings
    _run(tmp_path / "dcor", [{"kind": "dcor", "alpha": 0.5}])
    nopeek = mse(tmp_path / "dcor")
    assert none.value < 0.5 * none.baseline
    assert nopeek.value > 1.15 * none.value, (none.value, nopeek.value, none.baseline)


def test_a_resumed_label_rr_run_keeps_its_one_draw_of_the_labels(tmp_path):
    """A resume rebuilds the server with a fresh crypto source: without the checkpointed draw it would
    randomize every label again (a second release; the control is the fresh node of test_defense_nodes)."""
    from vfl.runtime.node import state_from_bytes

    base = ["--transport", "inprocess", "--no-progress", "--set", "train.epochs=1",
            "--set", "defenses=[{kind: label_rr, epsilon: 1.0}]", "--set", "model.head_hidden=[8]"]
    assert main(["run", "demo", *base, "--out", str(tmp_path)]) == 0
    assert main(["run", "--resume", str(tmp_path), "--set", "train.epochs=2", "--no-progress"]) == 0

    def drawn(epoch: int):
        return state_from_bytes((tmp_path / "checkpoints" / f"epoch_{epoch:05d}" / "node_0.pt").read_bytes())["y_used"]

    assert drawn(0).equal(drawn(1))
    assert json.loads((tmp_path / "summary.json").read_text())["epsilon_label"] == 1.0


def test_label_rr_prior_weakens_label_inference_and_reports_its_epsilon(tmp_path, control):
    _, none = control
    summary, rr = _run(tmp_path, [{"kind": "label_rr_prior", "epsilon": 1.0, "stage_epoch": 1}])
    assert summary["epsilon_label"] == 1.0 and summary["epsilon_by_scope"]["label"] == 1.0
    assert rr.value - rr.baseline < (none.value - none.baseline) / 2, (none.value, rr.value, rr.baseline)


def test_label_gp_weakens_label_inference_and_reports_an_epsilon_delta(tmp_path, control):
    _, none = control
    summary, gp = _run(tmp_path, [{"kind": "label_gp", "noise_multiplier": 1.0, "max_norm": 1.0}])
    assert 0 < summary["epsilon_label"] < 50 and summary["delta_label"] == 1e-5
    assert summary["epsilon_by_scope"]["label"] == summary["epsilon_label"]
    assert gp.value - gp.baseline < (none.value - none.baseline) / 2, (none.value, gp.value, gp.baseline)


def test_mid_weakens_label_inference(tmp_path, control):
    _, none = control
    _, mid = _run(tmp_path, [{"kind": "mid", "lam": 0.1}])
    assert mid.value - mid.baseline < (none.value - none.baseline) / 2, (none.value, mid.value, mid.baseline)


def _idlg_of(out):
    (res,) = [r for r in RUN_ATTACKS.get("gradient_inversion")(load_run(out), samples=48) if r.name == "idlg_label"]
    return res


def _idlg(out, defenses):
    summary, _ = _run(out, defenses)
    return summary, _idlg_of(out)


@pytest.fixture(scope="module")
def control_idlg(undefended):
    """No defense: iDLG reads the label off each gradient row well above chance."""
    none = _idlg_of(undefended[0])
    assert none.value > none.baseline + 0.15, (none.value, none.baseline)
    return none


@pytest.mark.parametrize("kind", ["cae", "dcae"])
def test_cae_defeats_gradient_label_recovery(tmp_path, kind, control_idlg):
    """The attack CAE is built against: recovering each sample's label from its gradient (iDLG, white-box
    head). Control: the same run without the defense recovers labels well above chance; with the
    confused labels the recovered class is the confused one. The clustering attacks are not its target
    (a fixed soft label per class still clusters by class; docs/attacks.md)."""
    none = control_idlg
    summary, cae = _idlg(tmp_path, [{"kind": kind, "lam": 0.01}])
    assert cae.value < none.baseline, (cae.value, none.value, none.baseline)
    assert summary["final_test_acc"] > 0.3 and "epsilon_label" not in summary  # decoded predictions still learn
