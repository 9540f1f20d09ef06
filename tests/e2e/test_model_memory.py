"""A model too big for this machine is refused before any weight is allocated: ONE line naming the
model keys and the sizes (was a 14 GB allocation traceback inside a host)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from torch import nn

from parties.vertical.model_size import (
    available_bytes,
    check_model_memory,
    count_params,
    training_bytes,
)
from simulations.cli.main import main
from vfl.core.errors import ConfigError

DRY = ["run", "demo", "--dry-run", "--transport", "inprocess", "--no-progress"]


def _sets(*overrides: str) -> list[str]:
    return [x for o in overrides for x in ("--set", o)]


@pytest.mark.parametrize("overrides,needle", [
    (["model.head_hidden=[200000, 20000]"], "model.head_hidden/model.embed_dim: the models need 4,003,"),
    (["model.embed_dim=65536", "model.head_hidden=[65536]"], "model.head_hidden/model.embed_dim: the models need"),
    (["model.bottom_hidden=[300000000]"], "model.bottom_hidden/model.embed_dim: the models need"),
    (["strategy=npq", "params={}", "model.fusion=concat", "num_parties=64", "model.embed_dim=4096", "model.head_hidden=[20000]"],
     "the largest, the head (mlp, input 262144)"),
    (["model.bottom=tests.support.nonfinite_models:nan_bottom", "model.embed_dim=60000", "model.head_hidden=[80000]"],
     "model.head_hidden/model.embed_dim: the models need"),  # a user factory is counted too
])
def test_a_model_too_big_is_one_line_before_allocating(overrides, needle, capsys):
    free = available_bytes()
    if free is None:
        pytest.skip("no /proc/meminfo here")
    assert main([*DRY, *_sets(*overrides)]) == 2
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("vfl: error: ") and needle in err and "GB available" in err, err


def test_control_the_demo_fits(capsys):
    assert main(DRY) == 0
    assert "config OK" in capsys.readouterr().err


def test_the_bound_is_weights_gradients_and_optimizer_state():
    build = lambda: nn.Linear(1000, 1000)  # noqa: E731
    n = count_params(build)
    assert n == 1000 * 1000 + 1000
    sgd = SimpleNamespace(optimizer="sgd", momentum=0.9)
    need = training_bytes(n, optimizer="sgd", momentum=0.9)
    assert need == n * 4 * 3 and training_bytes(n, optimizer="adam", momentum=0.0) == n * 4 * 4
    models = [("model.head_hidden", "the head", build)]
    assert check_model_memory(models, train=sgd, available=need) == {"the head": n}  # fits exactly
    with pytest.raises(ConfigError, match=r"model\.head_hidden: the models need 1,001,000 parameters"):
        check_model_memory(models, train=sgd, available=need - 1)


def test_a_factory_that_needs_real_storage_is_not_refused():
    def numpy_init() -> nn.Module:
        m = nn.Linear(4, 4)
        m.weight.data.numpy()  # meta tensors have no data
        return m

    assert count_params(numpy_init) is None
    assert check_model_memory([("k", "x", numpy_init)], train=SimpleNamespace(optimizer="sgd", momentum=0),
                              available=1) == {}
