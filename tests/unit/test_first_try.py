"""First try works: switching strategy keeps only the options the new one accepts, overrides as a
dict, and the lazily imported API listed by ``dir(vfl)``."""

from __future__ import annotations

import pytest

import vfl
from vfl.errors import ConfigError


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
