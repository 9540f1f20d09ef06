"""Headline keys: each strategy and defense names the summary keys of its privacy result, and `vfl run`'s
final line and epoch lines show them (a label_rr run shows ``epsilon_label``, P3EFT ``leak``, SAP ``ep_eia``)."""

from __future__ import annotations

import io

import strategies  # noqa: F401  (registers the built-in strategies and defenses)
import vfl
from simulations.cli.epoch_log import EpochLog, epoch_line, headline_keys
from vfl.engine.strategy import STRATEGIES
from vfl.privacy.defenses import DEFENSES

ROW = {"epoch": 0, "train_loss": 0.5, "test_acc": 0.75, "epsilon": 94.8, "epsilon_label": 1.0, "leak": 0.52,
       "bytes_up": 1000, "bytes_down": 1000, "epoch_s": 1.0}


def test_every_registered_class_declares_a_tuple_of_keys() -> None:
    heads = {(reg.kind, name): reg.get(name).headline for reg in (STRATEGIES, DEFENSES) for name in reg.names()}
    assert len(heads) >= 20 and all(isinstance(h, tuple) and all(isinstance(k, str) and k for k in h)
                                    for h in heads.values()), heads


def test_the_issues_three_cases() -> None:
    rr = vfl.resolve("demo", overrides=["defenses=[{kind: label_rr, epsilon: 1.0}]"])
    assert headline_keys(rr) == ("epsilon", "epsilon_label")  # pbm's, then the defense's
    assert headline_keys(vfl.resolve("demo")) == ("epsilon",)
    assert "leak" in STRATEGIES.get("p3eft").headline and "ep_eia" in STRATEGIES.get("sap").headline
    assert STRATEGIES.get("npq").headline == () and DEFENSES.get("label_gp").headline == ("epsilon_label",)


def test_epoch_line_shows_the_headline_keys_present_once() -> None:
    line = epoch_line(ROW, total=2, headline=("epsilon", "epsilon_label", "ep_eia"))
    assert line == "epoch 1/2 loss 0.5000 acc 0.7500 ε 94.8 epsilon_label 1 MB 0.002 1.0s"  # no ep_eia: absent
    assert "leak" not in epoch_line(ROW, total=2)  # only what the run's classes name


def test_epoch_log_takes_the_keys_from_the_engines_config() -> None:
    class Engine:
        cfg = vfl.resolve("demo", overrides=["defenses=[{kind: label_rr, epsilon: 1.0}]"])

    out = io.StringIO()
    EpochLog(stream=out)(0, ROW, Engine())
    assert "ε 94.8 epsilon_label 1 MB" in out.getvalue()
