"""The verifier's own pieces (``vfl/privacy/verify/``): its PBM formula against the training side's, its
mechanism registry, its charging rule against what the engine's accountant charges, and a ledger from
before the hash chain (one line)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vfl.privacy import Accountant, GaussianEvent, PBMEvent
from vfl.privacy.accounting.accountant import DEFAULT_ORDERS
from vfl.privacy.accounting.events import DPSGDEvent, event_to_dict
from vfl.privacy.accounting.pbm_rdp import pbm_rdp as training_pbm_rdp
from vfl.privacy.accounting.pbm_rdp import pbm_rdp_bruteforce
from vfl.privacy.accounting.wal import LEDGER_FILE, ReleaseLedger, restore_accountant
from vfl.privacy.verify import mechanisms
from vfl.privacy.verify.check import Expected, verify_files
from vfl.privacy.verify.ledger import read_ledger
from vfl.privacy.verify.pbm import pbm_rdp

ORDERS = np.asarray(DEFAULT_ORDERS)


@pytest.mark.parametrize(("b", "beta", "m"), [(16, 0.25, 4), (8, 0.1, 3), (4, 0.2, 10), (1, 0.25, 2), (16, 0.25, 1)])
def test_the_verifiers_pbm_formula_agrees_with_the_training_sides(b, beta, m):
    mine = pbm_rdp(b=b, beta=beta, parties=m, orders=ORDERS)
    theirs = training_pbm_rdp(b=b, beta=beta, num_parties=m, orders=ORDERS)
    assert np.allclose(mine, theirs, rtol=1e-9, atol=0)


def test_the_verifiers_pbm_formula_agrees_with_brute_force():
    a = np.asarray([1.5, 2.0, 8.0, 64.0])
    brute = pbm_rdp_bruteforce(b=3, beta=0.2, num_parties=3, orders=a)
    pure = 3 * np.log(0.7 / 0.3)
    assert np.allclose(pbm_rdp(b=3, beta=0.2, parties=3, orders=a), np.minimum(brute, np.minimum(pure, a * pure**2 / 2)),
                       rtol=1e-9)


def test_composition_agrees_with_the_accountant_on_every_built_in_kind():
    events = [PBMEvent(b=16, beta=0.25, num_parties=4, dim=16, count=3), GaussianEvent(sigma=2.0, sensitivity=8.0, count=2),
              DPSGDEvent(noise_multiplier=1.0, max_grad_norm=1.0, count=3)]
    acc = Accountant()
    for e in events:
        acc.record(e)
    got = mechanisms.epsilon([event_to_dict(e) for e in events], orders=ORDERS, delta=1e-5)
    assert got == pytest.approx(acc.epsilon(1e-5)[0], rel=1e-9)


def test_a_new_mechanism_plugs_in_by_its_event_kind(monkeypatch):
    """E.g. a strategy recording Gaussian events of its own kind: one registration, keyed by the event's kind."""
    monkeypatch.setattr(mechanisms, "MECHANISMS", dict(mechanisms.MECHANISMS))
    tree = {"kind": "gaussian-new", "sigma": 3.0, "sensitivity": 1.0, "count": 5}
    with pytest.raises(KeyError, match="no verifier for privacy events of kind 'gaussian-new'"):
        mechanisms.epsilon([tree], orders=ORDERS, delta=1e-5)
    mechanisms.register_dp_event("gaussian-new", lambda e: mechanisms.gaussian(e["sigma"] / e["sensitivity"],
                                                                                e["count"]))
    with pytest.raises(ValueError, match="already registered"):
        mechanisms.register_dp_event("gaussian-new", lambda e: None)
    acc = Accountant()
    acc.record(GaussianEvent(sigma=3.0, sensitivity=1.0, count=5))
    assert mechanisms.epsilon([tree], orders=ORDERS, delta=1e-5) == pytest.approx(acc.epsilon(1e-5)[0], rel=1e-9)


EV = PBMEvent(b=8, beta=0.25, num_parties=3, dim=4)
EV2 = PBMEvent(b=8, beta=0.25, num_parties=2, dim=4)  # a dropout: two binomials summed


def _engine_story(led: ReleaseLedger, *, fresh: bool) -> list[float]:
    """What the engine does, step by step, with its accountant: epoch 0 commits; epoch 1 fails twice (one a
    dropout, amended), is restored to the checkpoint and commits; the process dies in epoch 2 after committing
    it but before its checkpoint was kept; a resume from epoch 1's checkpoint redoes epoch 2. Returns the ε the
    engine printed after each commit (the metrics rows; the last is summary.json's)."""
    acc, printed, ckpt = Accountant(), [], None

    def commit(seq):
        nonlocal ckpt
        for e in led.releases()[seq - 1].events:
            acc.record(e)
        printed.append(acc.epsilon(1e-5)[0])
        return acc.to_json(), seq

    led.begin(epoch=0, events=[EV], fresh=fresh)
    ckpt = commit(1)
    s = led.begin(epoch=1, events=[EV], fresh=fresh)
    led.amend(s, [EV2])  # a dropout mid-attempt: now fresh
    led.begin(epoch=1, events=[EV], fresh=fresh)
    acc, charged = restore_accountant(saved=ckpt[0], covered=ckpt[1], ledger=led)
    led.note_restore(reason="restart", checkpoint_epoch=0, charged=charged)
    s = led.begin(epoch=1, events=[EV], fresh=fresh)
    ckpt = commit(s)
    s = led.begin(epoch=2, events=[EV], fresh=fresh)
    commit(s)  # its checkpoint is then lost: the resume takes epoch 1's
    acc, charged = restore_accountant(saved=ckpt[0], covered=ckpt[1], ledger=led)
    led.note_restore(reason="resume", checkpoint_epoch=1, charged=charged)
    printed = printed[:2]  # metrics.jsonl is rewritten to the checkpointed epochs
    s = led.begin(epoch=2, events=[EV], fresh=fresh)
    commit(s)
    return printed


@pytest.mark.parametrize("fresh", [True, False], ids=["crypto", "seeded"])
def test_the_verifiers_rule_charges_what_the_engines_accountant_charged(tmp_path, fresh):
    led = ReleaseLedger(tmp_path / LEDGER_FILE, repair=True)
    printed = _engine_story(led, fresh=fresh)
    ledger = read_ledger((tmp_path / LEDGER_FILE).read_bytes())
    assert ledger.chained and not ledger.problems and ledger.head == led.head
    newest = [ledger.newest_of(e).seq for e in range(3)]
    got = [mechanisms.epsilon([e for r in ledger.charged(s) for e in r.events], orders=np.asarray(ledger.orders),
                              delta=1e-5) for s in newest]
    assert got == pytest.approx(printed, rel=1e-9)
    charged = [r.seq for r in ledger.charged(newest[-1])]
    assert charged == ([1, 2, 3, 4, 5, 6] if fresh else [1, 2, 4, 6])  # seeded: the amended (fresh) one is charged


def test_a_ledger_from_before_the_chain_is_one_line():
    old = json.dumps({"record": "release", "seq": 1, "epoch": 0, "time": "t", "fresh": True,
                      "events": [event_to_dict(EV)]}).encode() + b"\n"
    files = {"config.resolved.yaml": b"strategy: pbm\n", "privacy_ledger.jsonl": old, "summary.json": b"{}"}
    verdict = verify_files(files, expected=Expected(why_not="not needed"))
    assert not verdict.ok and verdict.legacy is not None and "\n" not in verdict.legacy
    assert "has no hash chain" in verdict.legacy


def test_the_verifier_imports_nothing_of_the_training_sides_accountant():
    """The separate path the issue asks for: no module of ``vfl/privacy/verify/`` imports the accountant, its PBM
    curve, its events or the write-ahead ledger (the ledger is read from its bytes)."""
    import ast
    from pathlib import Path

    import vfl.privacy.verify as pkg

    training = ("vfl.privacy.accounting", "vfl.privacy.defenses", "vfl.engine")
    found: dict[str, list[str]] = {}
    modules = sorted(Path(pkg.__file__).parent.glob("*.py"))
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad = [n for n in names if n.startswith(training)]
            if bad:
                found[path.name] = bad
    assert len(modules) >= 5 and found == {}


def test_a_run_that_released_nothing_accounted_has_no_ledger_and_verifies(tmp_path):
    from vfl.engine.rundir import RunDir

    RunDir(tmp_path).write_config({"strategy": "npq", "train": {"epochs": 1}})
    files = {"config.resolved.yaml": (tmp_path / "config.resolved.yaml").read_bytes(), "summary.json": b'{"epochs": 1}',
             "metrics.jsonl": b'{"epoch": 0}\n'}
    verdict = verify_files(files, expected=Expected(why_not="not needed"))
    assert verdict.ok and any("no privacy_ledger.jsonl" in n for n in verdict.notes)
    files["summary.json"] = b'{"epochs": 1, "epsilon": 3.0}'  # an ε printed without its ledger
    verdict = verify_files(files, expected=Expected(why_not="not needed"))
    assert not verdict.ok and verdict.problems == ["privacy_ledger.jsonl is missing but summary.json prints epsilon"]
