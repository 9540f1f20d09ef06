"""``vfl verify`` on real run directories (issue 47, item 6): an honest run of every strategy that prints an ε
verifies; a restarted and resumed run verifies (its failed attempt charged); each tampering is detected with a
line naming what differs. Each run is made once (module fixtures) and the tampering is done on its files in
memory, so a case costs one verification (milliseconds), not a run."""

from __future__ import annotations

import copy
import json
import os

import pytest

from simulations.cli.verify import read_run
from tests.support.helpers import BlobSource
from tests.support.release_runs import tiny_cfg
from tests.support.verify_runs import make_run, verify, verify_dir
from vfl.engine.schema import load_run_config
from vfl.runtime import faults

SOURCE = BlobSource(num_parties=3, num_train=96, num_test=24)
DP = {"noise_multiplier": 2.0, "max_grad_norm": 1.0}


def _vertical(name: str):
    two = {"epochs": 2}
    if name == "pbm":  # PBM + SecAgg, DP-SGD bottoms, label DP on the gradients: epsilon, epsilon_label, the party's
        return tiny_cfg("pbm", params={"secagg": True}, train=two, privacy={"bottom_dp": DP},
                        defenses=[{"kind": "label_gp", "noise_multiplier": 1.5}])
    if name == "ldp":
        return tiny_cfg("ldp", train=two, defenses=[{"kind": "label_rr", "epsilon": 2.0}])
    if name == "secureboost":  # trees' label DP: the ledger's own label events, epsilon_label = epsilon
        return load_run_config({"strategy": "secureboost", "num_parties": 3, "seed": 1, "params": {
            "n_estimators": 2, "max_depth": 3, "objective": "multi:softprob", "he": "none", "allow_insecure": True,
            "label_dp": {"noise_multiplier": 2.5, "clip": 1.0}}})
    return tiny_cfg("npq", train=two, defenses=[{"kind": "label_gp"}])  # label DP only: releases without events


def _llm(name: str, model_dir: str):
    extra = {"alpha": 0.0, "servers": 2, "m": 2, "n_adapters": 2} if name == "p3eft" else {}
    params = {"max_len": 16, "leak_window": 16, "model_dir": model_dir,
              **({} if name == "head-only" else {"lora_rank": 2}), **extra}
    return load_run_config({"strategy": name, "num_parties": 1, "seed": 3,
                            "train": {"epochs": 1, "batch_size": 8, "optimizer": "sgd", "lr": 0.5},
                            "privacy": {"bottom_dp": {"noise_multiplier": 1.0, "max_grad_norm": 0.1}},
                            "params": params})


VERTICAL = ["pbm", "ldp", "npq", "secureboost"]
LLM = ["split-lora", "head-only", "p3eft"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, request):
    """Every strategy's honest run, made on first use."""
    made: dict[str, object] = {}

    def get(name: str):
        if name not in made:
            path = tmp_path_factory.mktemp("verify") / name
            if name in VERTICAL:
                make_run(path, _vertical(name), SOURCE)
            else:
                from tests.engine.llm.test_sap_nodes import ToySentiment

                llama = request.getfixturevalue("llama")
                make_run(path, _llm(name, llama), ToySentiment(num_train=8, num_test=4))
            made[name] = path
        return made[name]

    return get


@pytest.mark.parametrize("name", VERTICAL + LLM)
def test_an_honest_run_of_every_strategy_with_an_epsilon_verifies(runs, name):
    path = runs(name)
    verdict = verify_dir(path)
    assert verdict.ok, (verdict.problems, [r for r in verdict.rows if not r.ok])
    keys = {r.key for r in verdict.rows}
    summary = json.loads((path / "summary.json").read_text())
    printed = {k for k in ("epsilon", "epsilon_label", "party_epsilon_worst_case") if summary.get(k) is not None}
    assert printed and printed <= keys  # every ε the run printed has its row
    rows = [json.loads(x) for x in (path / "metrics.jsonl").read_text().splitlines()]
    assert {f"metrics[{r['epoch']}].{k}" for r in rows for k in ("epsilon", "epsilon_label") if k in r} <= keys
    assert {"config digest", "hash chain head"} <= keys and any(k.startswith("checkpoint ") for k in keys)


def test_a_restarted_and_resumed_run_verifies(tmp_path, monkeypatch):
    """Crypto noise, a party dies in epoch 0 (restart to the state after set-up: the failed attempt charged, the
    randomized labels drawn again), then a resume to 3 epochs: the verifier's rule on the ledger gives every ε."""
    monkeypatch.setenv(faults.FAULT_ENV, "party1@0:1")
    real = faults._die

    def once(fault, replies, *, in_driver):
        os.environ.pop(faults.FAULT_ENV, None)
        real(fault, replies, in_driver=in_driver)

    monkeypatch.setattr(faults, "_die", once)
    train = {"epochs": 2, "on_failure": "restart", "max_restarts": 1}
    cfg = tiny_cfg("pbm", train=train, defenses=[{"kind": "label_rr", "epsilon": 1.0}])
    summary = make_run(tmp_path / "run", cfg, SOURCE)
    assert len(summary["restarts"]) == 1 and summary["restarts"][0]["releases_charged"] == 1
    longer = tiny_cfg("pbm", train={**train, "epochs": 3}, defenses=[{"kind": "label_rr", "epsilon": 1.0}])
    summary = make_run(tmp_path / "run", longer, SOURCE, resume=True)
    assert len(summary["resumes"]) == 1 and summary["label_draws_charged"] == 2
    verdict = verify_dir(tmp_path / "run")
    assert verdict.ok, (verdict.problems, [r for r in verdict.rows if not r.ok])
    assert {"metrics[2].epsilon", "epsilon_label"} <= {r.key for r in verdict.rows}


# ---- tampering: each detected, with a line naming what differs ---------------------------------------------
@pytest.fixture(scope="module")
def honest(runs):
    path = runs("pbm")
    return path, read_run(path)


def _lines(files):
    return files["privacy_ledger.jsonl"].splitlines(keepends=True)


def _summary(files, **changes):
    s = json.loads(files["summary.json"])
    s.update(changes)
    files["summary.json"] = json.dumps(s).encode()


def _differs(verdict):
    return [f"{r.key}: {r.printed} vs {r.recomputed}" for r in verdict.rows if not r.ok] + verdict.problems


def test_a_halved_epsilon_in_summary_json_is_detected(honest):
    path, files = honest
    files = copy.copy(files)
    _summary(files, epsilon=json.loads(files["summary.json"])["epsilon"] / 2)
    verdict = verify(files, path)
    assert not verdict.ok and [r.key for r in verdict.rows if not r.ok] == ["epsilon"]


def test_a_changed_metrics_row_epsilon_is_detected(honest):
    path, files = honest
    files = copy.copy(files)
    rows = [json.loads(x) for x in files["metrics.jsonl"].splitlines()]
    rows[0]["epsilon"] *= 0.9
    files["metrics.jsonl"] = "".join(json.dumps(r) + "\n" for r in rows).encode()
    assert [r.key for r in verify(files, path).rows if not r.ok] == ["metrics[0].epsilon"]


@pytest.mark.parametrize("how", ["deleted", "edited", "reordered"])
def test_a_deleted_edited_or_reordered_ledger_record_is_detected(honest, how):
    path, files = honest
    files = copy.copy(files)
    lines = _lines(files)
    assert len(lines) >= 3  # header, two releases
    if how == "deleted":
        del lines[1]
    elif how == "edited":  # the first release charged for fewer coordinates
        lines[1] = lines[1].replace(b'"dim": 4', b'"dim": 2')
    else:
        lines[1], lines[2] = lines[2], lines[1]
    files["privacy_ledger.jsonl"] = b"".join(lines)
    differs = _differs(verify(files, path))
    assert any("does not follow line" in d and "edited, deleted or reordered" in d for d in differs), differs
    if how == "edited":
        assert any("pbm dim is 2 in the ledger but 4 by the config (model.embed_dim)" in d for d in differs), differs


def test_an_edited_last_record_is_caught_by_the_head_in_summary_json(honest):
    path, files = honest
    files = copy.copy(files)
    lines = _lines(files)
    lines[-1] = lines[-1].replace(b'"fresh": true', b'"fresh": false')
    files["privacy_ledger.jsonl"] = b"".join(lines)
    differs = _differs(verify(files, path))
    assert any("privacy_ledger_head" in d and "is not the digest of the ledger's last line" in d for d in differs)


@pytest.mark.parametrize(("old", "new", "named"), [
    (b"beta: 0.25", b"beta: 0.2", "pbm beta is 0.25 in the ledger but 0.2 by the config (params.beta)"),
    (b"  b: 8\n", b"  b: 16\n", "pbm b is 8 in the ledger but 16 by the config (params.b)"),
    (b"noise_multiplier: 2.0", b"noise_multiplier: 3.0",
     "dpsgd noise_multiplier is 2.0 in the ledger but 3.0 by the config (privacy.bottom_dp.noise_multiplier)")])
def test_a_changed_config_key_is_detected_naming_it(honest, old, new, named):
    path, files = honest
    files = copy.copy(files)
    assert files["config.resolved.yaml"].count(old) == 1
    files["config.resolved.yaml"] = files["config.resolved.yaml"].replace(old, new)
    differs = _differs(verify(files, path))
    assert any("differ from the digest it was written with" in d for d in differs), differs
    assert any(named in d for d in differs), differs


def test_a_changed_label_noise_multiplier_is_detected(honest):
    path, files = honest
    files = copy.copy(files)
    files["config.resolved.yaml"] = files["config.resolved.yaml"].replace(b"noise_multiplier: 1.5",
                                                                          b"noise_multiplier: 3.0")
    differs = _differs(verify(files, path))
    assert any(d.startswith("epsilon_label: ") for d in differs), differs


def test_a_damaged_checkpoint_file_is_detected(honest):
    path, files = honest
    files = copy.copy(files)
    (name,) = [n for n in files if n.endswith("epoch_00001/engine.json")]
    files[name] = files[name].replace(b'"epoch": 1', b'"epoch": 7', 1)
    differs = _differs(verify(files, path))
    assert any(f"{name} differs from its manifest" in d for d in differs), differs


def test_a_changed_trees_label_noise_multiplier_is_detected_naming_it(runs):
    path = runs("secureboost")
    files = read_run(path)
    files["config.resolved.yaml"] = files["config.resolved.yaml"].replace(b"noise_multiplier: 2.5",
                                                                          b"noise_multiplier: 5.0")
    differs = _differs(verify(files, path))
    assert any("params.label_dp.noise_multiplier" in d for d in differs), differs
