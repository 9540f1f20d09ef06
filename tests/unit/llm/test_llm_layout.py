"""Structure of the split-LLM half: one LoRA spec, one optimizer mapping, wire names in one place."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from parties.llm.p3eft import wire as p3eft_wire
from parties.llm.sap import wire as sap_wire
from strategies.base.llm import optimizer_factory
from vfl.config.fields import build
from vfl.core.errors import ConfigError
from vfl.engine.schema import TrainConfig

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("vfl", "parties", "strategies", "simulations")


def _sources(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py"))


def test_exactly_one_lora_spec_class():
    found = [p.relative_to(ROOT).as_posix() for p in _sources(*PACKAGES)
             for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.ClassDef) and node.name == "LoraSpec"]
    assert found == ["parties/llm/common/lora.py"]


@pytest.mark.parametrize(("name", "cls"), [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW),
                                           ("sgd", torch.optim.SGD)])
def test_optimizer_names_mean_one_torch_optimizer(name, cls):
    t = build(TrainConfig, {"optimizer": name, "lr": 0.05, "weight_decay": 0.01}, prefix="train")
    opt = optimizer_factory(t)([torch.nn.Parameter(torch.zeros(3))])
    assert type(opt) is cls  # exact type: AdamW subclasses Adam in torch, "adam" must not be AdamW
    assert opt.param_groups[0]["lr"] == 0.05 and opt.param_groups[0]["weight_decay"] == 0.01


def test_unknown_optimizer_is_refused_by_name():
    with pytest.raises(ConfigError, match="train.optimizer"):
        build(TrainConfig, {"optimizer": "lbfgs"}, prefix="train")


def _kinds(*modules: object) -> set[str]:
    """Every message kind a protocol's ``Kind`` names (its own and the shared ones it inherits)."""
    return {getattr(m.Kind, k) for m in modules for k in dir(m.Kind) if k.isupper()}  # type: ignore[attr-defined]


def test_llm_nodes_and_drivers_take_message_kinds_from_their_wire_module():
    kinds = _kinds(p3eft_wire, sap_wire)
    assert {"train.step", "train.backprop", "query.log", "train.reps", "query.eia"} <= kinds
    users = [p for p in _sources("parties/llm", "strategies") if p.name != "wire.py"
             and p.relative_to(ROOT).as_posix().startswith(("parties/llm/", "strategies/sap", "strategies/split_llm",
                                                            "strategies/p3eft", "strategies/llm_"))]
    literals = [(p.relative_to(ROOT).as_posix(), n.value) for p in users for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.Constant) and n.value in kinds]
    assert literals == []


def test_one_package_per_algorithm_and_no_old_modules():
    llm = ROOT / "parties" / "llm"
    assert sorted(p.name for p in llm.iterdir() if p.suffix == ".py") == ["__init__.py"]
    assert {p.name for p in llm.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == {"common", "p3eft", "sap", "ushape"}


def _declared(name: str) -> list[str]:
    """Strategy modules whose class bodies declare a field ``name`` (an annotated assignment)."""
    return sorted({p.relative_to(ROOT).as_posix() for p in _sources("strategies") for node in ast.walk(ast.parse(p.read_text()))
                   if isinstance(node, ast.ClassDef) for stmt in node.body
                   if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name})


def test_the_model_and_lora_parameters_are_declared_once():
    """sap, ushape and the P3EFT family share one declaration (the U-shape narrows the help of two keys)."""
    for key in ("allow_download", "dtype", "lora_rank", "lora_alpha", "lora_targets"):
        assert _declared(key) == ["strategies/base/llm_params.py"], key
    for key in ("model_dir", "max_len"):
        assert _declared(key) == ["strategies/base/llm_params.py", "strategies/ushape.py"], key


def test_one_packed_rows_codec_and_one_message_builder():
    defs = [(p.relative_to(ROOT).as_posix(), n.name) for p in _sources("parties/llm", "strategies")
            for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.FunctionDef) and n.name in ("pack", "unpack")]
    assert sorted(defs) == [("parties/llm/common/wire.py", "pack"), ("parties/llm/common/wire.py", "unpack")]
    builders = sorted({p.relative_to(ROOT).as_posix() for p in _sources("parties/llm") for n in ast.walk(ast.parse(p.read_text()))
                       if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "records"
                       and isinstance(n.func.value, ast.Name) and n.func.value.id == "wire"})
    assert "parties/llm/common/wire.py" in builders and not {"parties/llm/sap/wire.py", "parties/llm/ushape/wire.py"} & set(builders)
