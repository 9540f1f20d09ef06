"""First try works: switching strategy keeps only the options the new one accepts, overrides as a
dict, and the lazily imported API listed by ``dir(vfl)``."""

from __future__ import annotations

import pytest

import vfl
from vfl.core.errors import ConfigError


def test_switching_strategy_drops_the_files_options_the_new_one_lacks():
    assert vfl.resolve("demo").params.b == 16  # the demo is pbm with b, beta, secagg
    npq = vfl.resolve("demo", overrides=["strategy=npq"])
    assert npq.strategy == "npq" and npq.to_dict()["params"] == {}
    ldp = vfl.resolve("demo", overrides=["strategy=ldp"])
    assert (ldp.params.b, ldp.params.beta) == (16, 0.25)  # kept: ldp accepts them


def test_an_option_given_as_an_override_is_never_dropped():
    with pytest.raises(ConfigError) as err:
        vfl.resolve("demo", overrides=["strategy=npq", "params.b=8"])  # the user asked for it: say so
    assert err.value.key == "params.b"


def test_a_config_file_with_foreign_options_still_fails(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("strategy: npq\nparams: {b: 8}\n")  # no switch: a typo in the file stays an error
    with pytest.raises(ConfigError):
        vfl.resolve(path)


def test_overrides_as_a_dict_equal_the_strings():
    as_dict = vfl.resolve("demo", overrides={"train.lr": 0.2, "model.bottom_hidden": [8, 4], "params": {},
                                             "strategy": "npq", "name": "x y"})
    as_list = vfl.resolve("demo", overrides=["train.lr=0.2", "model.bottom_hidden=[8,4]", "params={}",
                                             "strategy=npq", "name=x y"])
    assert as_dict == as_list and as_dict.model.bottom_hidden == (8, 4) and as_dict.name == "x y"


def test_the_api_is_in_dir_of_vfl():
    names = dir(vfl)
    for name in ("run", "resume_run", "resolve", "validate", "account", "RunResult", "__version__"):
        assert name in names
    assert names == sorted(vfl.__all__)  # only the public names: no importlib, warnings, Any, _API


def test_the_schema_defaults_are_the_demos():
    from simulations.cli.runner import read_config_file

    demo, defaults = read_config_file("demo"), vfl.resolve({}).to_dict()
    checked = []
    for section, keys in (("train", ("batch_size", "optimizer", "lr", "momentum")),
                          ("model", ("bottom", "bottom_hidden", "embed_dim", "tanh_c", "fusion", "head", "head_hidden"))):
        for key in keys:
            assert defaults[section][key] == demo[section][key], f"{section}.{key}"
            checked.append(f"{section}.{key}")
    assert len(checked) == 11  # every key above was compared


def test_the_config_split_parties_writes_starts_from_the_defaults(tmp_path):
    import yaml

    from simulations.data.split_parties import main as split_parties

    assert split_parties(["digits", str(tmp_path / "p"), "--parties", "2"]) == 0
    ready = yaml.safe_load((tmp_path / "p" / "config.yaml").read_text())
    assert ready["train"]["lr"] == 0.05 and ready["train"]["momentum"] == 0.9
    assert vfl.resolve(tmp_path / "p" / "config.yaml").model.bottom_hidden == (32,)


def old_style_bottom(in_features, out_features):  # positional names the framework does not pass
    raise AssertionError("never called: the signature is checked first")


def kwargs_bottom(**kwargs):  # accepts anything: passes the check
    from torch import nn

    return nn.Flatten()


@pytest.mark.parametrize(("key", "target"), [("model.bottom", "tests.unit.config.test_first_try:old_style_bottom"),
                                             ("model.head", "tests.unit.config.test_first_try:old_style_bottom")])
def test_a_factory_with_the_wrong_signature_is_one_line_before_the_run(key, target, tmp_path):
    cfg = vfl.resolve("demo", overrides={key: target, "transport.kind": "inprocess"})
    with pytest.raises(ConfigError) as err:
        vfl.validate(cfg)
    assert err.value.key == key and "cannot be called as factory(" in str(err.value)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError):
        vfl.run(cfg, out_dir=tmp_path / "r", transport=None)
    assert not (tmp_path / "r").exists()  # nothing written


def test_a_factory_taking_any_keywords_passes_the_check():
    vfl.validate(vfl.resolve("demo", overrides={"model.bottom": "tests.unit.config.test_first_try:kwargs_bottom",
                                                "transport.kind": "inprocess"}))


def test_account_picks_the_order_when_alpha_is_left_out():
    kw = dict(mechanism="pbm", b=16, beta=0.25, parties=4, epochs=20, dim=16, delta=1e-5)
    picked = vfl.account(**kw)
    assert picked["params"]["alpha"] == picked["order"] and picked["params"]["alpha_source"].startswith("accountant")
    given = vfl.account(**kw, alpha=3.0)
    assert given["epsilon"] == picked["epsilon"] and given["params"]["alpha_source"] == "given"
    with pytest.raises(ConfigError) as err:
        vfl.account(mechanism="pbm", b=16, beta=0.25, parties=4)  # no order and nothing to pick it by
    assert err.value.key == "--alpha"


def test_account_warns_when_the_best_order_is_at_the_edge_of_the_grid(capsys):
    from simulations.cli.main import main
    from vfl.privacy.accounting.accountant import DEFAULT_ORDERS

    weak = vfl.account(mechanism="pbm", b=16, beta=0.25, parties=4, epochs=2000, dim=64, delta=1e-5)
    assert weak["order"] == min(DEFAULT_ORDERS) and "smallest" in weak["warnings"][0]
    strong = vfl.account(mechanism="ldp", b=16, beta=0.001, parties=4, epochs=1, dim=1, delta=1e-5)
    assert strong["order"] == max(DEFAULT_ORDERS) and "largest" in strong["warnings"][0]
    inside = vfl.account(mechanism="pbm", b=16, beta=0.25, parties=4, epochs=20, dim=16, delta=1e-5)
    assert min(DEFAULT_ORDERS) < inside["order"] < max(DEFAULT_ORDERS) and "warnings" not in inside
    assert main(["account", "--mechanism", "pbm", "--b", "16", "--beta", "0.25", "--parties", "4", "--epochs", "2000",
                 "--dim", "64", "--delta", "1e-5"]) == 0
    assert "best Renyi order 1.02 is the smallest" in capsys.readouterr().err
