"""Models by import string: factories called with the documented keywords, C*tanh appended to
bottoms, and every way the string can be wrong is one error naming the key."""

from __future__ import annotations

import pytest
import torch

from parties.vertical.custom_models import UserBottom
from parties.vertical.models import BOTTOMS, HEADS
from vfl.core.errors import ConfigError


def test_an_imported_bottom_gets_the_framework_tanh_and_a_head_its_widths():
    torch.manual_seed(0)
    net = BOTTOMS.get("tests.support.byo_models:TinyBottom", "model.bottom")(input_shape=(4, 4), embed_dim=6, tanh_c=0.5,
                                                                      hidden=(99,))
    assert isinstance(net, UserBottom)
    z = net(torch.randn(5, 4, 4) * 100)
    assert z.shape == (5, 6) and z.abs().max() <= 0.5 and z.abs().max() > 0.45  # saturated: tanh applied
    head = HEADS.get("tests.support.byo_models:TinyHead", "model.head")(in_dim=6, num_classes=3, hidden=(7,))
    assert head(z).shape == (5, 3)
    assert BOTTOMS.get("mlp") is not None and "tests.support.byo_models:TinyBottom" not in BOTTOMS  # not registered


@pytest.mark.parametrize("target, key, message", [
    ("no_such_pkg.models:Net", "model.bottom", "cannot import 'no_such_pkg.models:Net' on host .*No module named"),
    ("tests.support.byo_models:Missing", "model.bottom", "has no attribute 'Missing'"),
    ("tests.support.byo_models:NOT_CALLABLE", "model.head", "not a callable model factory"),
    (":Net", "model.bottom", "expected 'package.module:Factory'"),
])
def test_a_bad_import_string_names_the_key(target, key, message):
    reg = BOTTOMS if key == "model.bottom" else HEADS
    with pytest.raises(ConfigError, match=message) as err:
        reg.get(target, key)
    assert err.value.key == key


def test_a_bottom_with_the_wrong_output_width_is_named():
    net = BOTTOMS.get("tests.support.byo_models:wrong_width")(input_shape=(3,), embed_dim=4, tanh_c=1.0)
    with pytest.raises(ConfigError, match=r"model.bottom.*returned \(2, 5\).*embed_dim=4"):
        net(torch.zeros(2, 3))
