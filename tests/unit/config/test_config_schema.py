"""``vfl config-help --json``: the JSON Schema of the run config agrees with the loader (bundled
configs pass both; what the loader refuses, the schema refuses) and carries every key's help."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

import strategies  # noqa: F401  (registers the built-in strategies)
import vfl.engine.api
from simulations.cli.main import main
from vfl.config.fields import help_table
from vfl.core.errors import ConfigError
from vfl.engine.config_schema import registered_schema
from vfl.engine.schema import RunConfig

jsonschema = pytest.importorskip("jsonschema")
CONFIGS = sorted((Path(__file__).parents[3] / "simulations" / "configs").glob("*.yaml"))
SCHEMA = registered_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def test_the_schema_is_valid_json_schema_and_printed_by_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert main(["config-help", "--json"]) == 0
    # what is registered now (another test may have registered a strategy since SCHEMA was built)
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(registered_schema()))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_bundled_config_passes(path: Path) -> None:
    assert not [e.message for e in VALIDATOR.iter_errors(yaml.safe_load(path.read_text()))]


def _node(key: str) -> dict:
    node = SCHEMA
    for part in key.split("."):
        node = node["properties"][part]
    return node


def test_every_key_has_its_type_default_range_and_help() -> None:
    for key, _default, allowed, help_ in help_table(RunConfig):
        node = _node(key)
        assert "default" in node, key
        if help_:
            assert node["description"] == help_, key
        if allowed.startswith("one of"):
            assert "enum" in json.dumps(node), key
        if allowed.startswith(("[", "(")) and key != "params":
            assert any(b in json.dumps(node) for b in ("minimum", "maximum")), key
    pbm = next(b["then"]["properties"]["params"] for b in SCHEMA["allOf"]
               if b["if"]["properties"]["strategy"]["const"] == "pbm")
    assert {"b", "beta"} <= set(pbm["properties"]) and pbm["properties"]["b"]["type"] == "integer"


@pytest.mark.parametrize("bad", [
    {"train": {"lr": -1.0}},                         # below the range
    {"train": {"epochs": 0}},
    {"train": {"optimiser": "sgd"}},                  # an unknown (misspelled) key
    {"transport": {"kind": "grpc"}},                  # not one of the choices
    {"strategy": "pbm", "params": {"b": "many"}},     # a strategy param of the wrong type
    {"strategy": "pbm", "params": {"bb": 16}},        # a key the strategy does not have
    {"defenses": [{"kind": "label_rr", "epsilonn": 1.0}]},
    {"tracking": ["csv", "neptune"]},
])
def test_what_the_loader_refuses_the_schema_refuses(bad: dict) -> None:
    with pytest.raises(ConfigError):
        vfl.engine.api.validate({"dataset": "digits", **bad})
    assert list(VALIDATOR.iter_errors(bad))



def _leaves(node: dict, path: str = "") -> list[tuple[str, dict]]:
    """(key, schema) of every config key: nested sections, per-strategy params (``if``/``then``)
    and per-kind defense options (``items.allOf``)."""
    out = []
    for name, sub in node.get("properties", {}).items():
        key = f"{path}.{name}" if path else name
        out += _leaves(sub, key) if "properties" in sub else [(key, sub)]
        for branch in sub.get("items", {}).get("allOf", []):  # defenses[kind=NAME].option
            kind = branch["if"]["properties"]["kind"]["const"]
            out += [(k, v) for k, v in _leaves(branch["then"], f"{key}[kind={kind}]") if not k.endswith(".kind")]
    for branch in node.get("allOf", []):  # params of strategy NAME
        name = branch["if"]["properties"]["strategy"]["const"]
        out += _leaves(branch["then"]["properties"]["params"], f"params[{name}]")
    return out


def test_every_key_of_every_strategy_and_defense_has_help() -> None:
    leaves = dict(_leaves(SCHEMA))
    assert "params[pbm].b" in leaves and "defenses[kind=label_rr].epsilon" in leaves and "train.lr" in leaves
    assert [k for k, s in leaves.items() if not s.get("description")] == []
