"""Play the actively lying server (vfl.attacks.secagg.lying) against real clients with real X25519 and
Ed25519 keys: each attack opens inputs on the old rules / semi-honest mode (the controls) and opens
nothing in the malicious mode, where an honest party raises a typed error naming the round."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import strategies  # noqa: F401  (registers pbm, npq+secagg)
import vfl.secagg.client as client_mod
from vfl.attacks.secagg import lying
from vfl.attacks.secagg.curious import unmasked
from vfl.core.errors import ConfigError, ProtocolError, RevealRefused
from vfl.engine.schema import load_run_config
from vfl.secagg import InconsistentSurvivors, KeySwapDetected
from vfl.secagg.consistency import quorum
from vfl.secagg.rules import View

M, T = 4, 2  # the demo: 4 parties, t = ceil(2(M-1)/3) = 2


def legacy_check_view(*, me: int, rnd: str, live: frozenset[int], gone: frozenset[int], active: frozenset[int],
                      threshold: int, colluders: int, previous: View | None) -> None:
    """The client rules before this fix: well-formed views; a repeat may move survivors to dropped."""
    if live & gone or live | gone != active:
        raise ProtocolError(f"round {rnd}: malformed view")
    if previous is not None and not (live <= previous[0] and gone >= previous[1]):
        raise RevealRefused(f"round {rnd}: only moves of survivors to dropped are allowed")


@pytest.fixture
def old_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_mod, "check_view", legacy_check_view)


def test_malicious_mode_opens_nothing_under_every_attack() -> None:
    # the default stays semi-honest: malicious costs +15-73 % step time at demo settings (docs/secagg.md)
    assert load_run_config({"strategy": "pbm", "num_parties": M}).params.secagg_mode == "semi-honest"
    for attack in lying.ATTACKS:
        assert lying.RUN[attack](num=M, threshold=T, mode="malicious") == (0, True), attack


def test_key_swap_opens_every_input_with_unsigned_keys_and_is_detected_with_identity_keys() -> None:
    assert lying.key_swap(num=M, threshold=T, mode="semi-honest", signed=False) == (M, False)  # control (auth off)
    assert lying.key_swap(num=M, threshold=T, mode="semi-honest") == (0, True)  # auth on: keys are signed
    assert lying.key_swap(num=M, threshold=T, mode="malicious") == (0, True)


def test_single_survivor_opened_all_inputs_on_the_old_rules(old_rules: None) -> None:
    assert lying.single_survivor(num=M, threshold=T, mode="semi-honest") == (M, False)  # control


def test_redeclared_dropout_opened_the_victim_on_the_old_rules(old_rules: None) -> None:
    assert lying.redeclared_dropout(num=M, threshold=T, mode="semi-honest", release="key") == (1, False)  # control


@pytest.mark.parametrize("mode", ["semi-honest", "malicious"])
def test_the_new_client_rules_refuse_both_in_either_mode(mode: str) -> None:
    assert lying.single_survivor(num=M, threshold=T, mode=mode) == (0, True)
    assert lying.redeclared_dropout(num=M, threshold=T, mode=mode) == (0, True)


def test_late_survivor_opened_the_victim_with_self_keys_and_opens_nothing_with_view_bound_releases() -> None:
    # control: the protocol before view-bound releases (raw self keys) opened the victim in semi-honest mode
    assert lying.late_survivor(num=M, threshold=T, mode="semi-honest", release="key") == (1, False)
    for signed in (True, False):  # the default mode, with and without auth: the victim's release stays masked
        assert lying.late_survivor(num=M, threshold=T, mode="semi-honest", signed=signed) == (0, False)
    assert lying.late_survivor(num=M, threshold=T, mode="malicious") == (0, True)


def test_detections_are_typed_errors_naming_round_and_party() -> None:
    clients, _ = lying._clients(M, T, "malicious")
    keys = {i: c.public_key() for i, c in clients.items()}
    sigs = {i: c.key_signature() for i, c in clients.items()}
    swapped = {**keys, 2: keys[3]}  # party 2's slot holds party 3's (validly signed) key
    with pytest.raises(KeySwapDetected) as info:
        clients[0].receive_public_keys(swapped, sigs)
    assert (info.value.round, info.value.party) == ("setup", 0) and "party 2" in str(info.value)
    lying.honest_setup(clients)
    for c in clients.values():
        c.mask([1, 2], round_id="train:0:5", name="emb", k=8)
    sig = clients[0].sign_survivors(round_id="train:0:5", survivors=range(M))
    with pytest.raises(InconsistentSurvivors) as info:  # one signature (its own) < quorum
        clients[0].unmask(round_id="train:0:5", survivors=range(M), dropped=(), signatures={0: sig})
    assert info.value.round == "train:0:5" and "round train:0:5" in str(info.value)
    with pytest.raises(InconsistentSurvivors, match="after signing"):
        clients[0].sign_survivors(round_id="train:0:5", survivors=[0, 1, 2])
    forged = {p: clients[0].identity.sign(b"not the statement") for p in range(M)}
    with pytest.raises(InconsistentSurvivors, match="0 valid signatures"):
        clients[1].sign_survivors(round_id="train:0:5", survivors=range(M))
        clients[1].unmask(round_id="train:0:5", survivors=range(M), dropped=(), signatures=forged)


def test_an_honest_malicious_mode_round_sums_exactly() -> None:
    clients, _ = lying._clients(M, T, "malicious")
    lying.honest_setup(clients)
    view, detected = lying._view(clients, T, 16), [False]
    xs = lying._mask(clients, view, 16, seed=3)
    lying._ask(clients, view, {p: (clients, []) for p in clients}, detected)
    assert not detected[0] and len(view.releases) == M  # every survivor released its self mask
    assert not any(unmasked(view, p, lying.ROUND, xs[p]) for p in clients)


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 6), st.data())
def test_no_assignment_of_survivor_views_opens_an_input_in_malicious_mode(num: int, data: st.DataObject) -> None:
    """Whatever (survivors, dropped) the server tells each party, in up to two requests, and with
    every signature it got forwarded, no single input opens in malicious mode."""
    threshold = data.draw(st.integers(1, num - 1))
    clients, _ = lying._clients(num, threshold, "malicious")
    lying.honest_setup(clients)
    view, detected = lying._view(clients, threshold, 12), [False]
    xs = lying._mask(clients, view, 12, seed=num)
    parties = sorted(clients)
    for _ in range(data.draw(st.integers(1, 2))):
        views = {}
        for p in parties:
            live = set(data.draw(st.lists(st.sampled_from(parties), unique=True))) | {p}
            views[p] = (live, set(parties) - live)
        lying._ask(clients, view, views, detected)
    assert not any(unmasked(view, p, lying.ROUND, xs[p]) for p in parties)
    assert quorum(threshold, clients[0].colluders) >= 2


def test_config_key_is_validated() -> None:
    with pytest.raises(ConfigError, match="secagg_mode"):
        load_run_config({"strategy": "pbm", "params": {"secagg_mode": "paranoid"}})
    with pytest.raises(ConfigError, match="params.secagg_mode.*auth"):
        load_run_config({"strategy": "npq+secagg", "auth": False, "params": {"secagg_mode": "malicious"}})
    assert load_run_config({"strategy": "pbm", "auth": False,
                            "params": {"secagg_mode": "semi-honest"}}).params.secagg_mode == "semi-honest"
