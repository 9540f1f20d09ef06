"""Bottoms map their intended party input to (B, P) inside [-C, C]; heads take sum or concat widths."""

from __future__ import annotations

import pytest
import torch

from parties.vertical.models import BOTTOMS, HEADS, ScaledTanh
from vfl.core.errors import ConfigError

CASES = [
    ("mlp", (112,)), ("linear", (30,)),
    ("cnn", (3, 16, 16)),       # CIFAR quadrant
    ("cnn", (1, 14, 14)),       # MNIST quadrant
    ("cnn", (1, 28, 1)),        # a one-pixel-wide strip
    ("cnn", (2, 1, 32, 32)),    # 2 ModelNet views per party
    ("resnet18", (3, 16, 16)),  # the paper's CIFAR quadrant bottom
]


@pytest.mark.parametrize("name,shape", CASES)
def test_bottom_output_shape_and_range(name, shape):
    torch.manual_seed(0)
    c = 0.5
    net = BOTTOMS.get(name)(input_shape=shape, embed_dim=16, tanh_c=c, hidden=(32,))
    out = net(torch.randn(3, *shape) * 10)
    assert out.shape == (3, 16)
    assert float(out.detach().abs().max()) <= c and isinstance(list(net.modules())[-1], ScaledTanh)
    out.sum().backward()  # trainable end to end
    assert all(p.grad is not None for p in net.parameters())


def test_resnet18_is_adapted_to_small_inputs():
    net = BOTTOMS.get("resnet18")(input_shape=(3, 16, 16), embed_dim=8, tanh_c=1.0)
    conv1 = net[0].conv1
    assert conv1.kernel_size == (3, 3) and conv1.stride == (1, 1)
    assert isinstance(net[0].maxpool, torch.nn.Identity)


def test_multiview_pooling_modes():
    x = torch.randn(2, 6, 1, 16, 16)
    for pool in ("mean", "max", "concat"):
        net = BOTTOMS.get("cnn")(input_shape=(6, 1, 16, 16), embed_dim=4, tanh_c=1.0, view_pool=pool)
        assert net(x).shape == (2, 4)
    mean = BOTTOMS.get("cnn")(input_shape=(6, 1, 16, 16), embed_dim=4, tanh_c=1.0)
    perm = mean(x[:, torch.randperm(6)])
    torch.testing.assert_close(perm, mean(x), rtol=1e-5, atol=1e-6)  # mean pooling ignores view order
    with pytest.raises(ConfigError, match="view_pool"):
        BOTTOMS.get("cnn")(input_shape=(6, 1, 16, 16), embed_dim=4, tanh_c=1.0, view_pool="sum")


def test_image_bottoms_reject_flat_input():
    with pytest.raises(ConfigError, match="model.bottom"):
        BOTTOMS.get("cnn")(input_shape=(112,), embed_dim=4, tanh_c=1.0)


@pytest.mark.parametrize("head", ["mlp", "linear"])
@pytest.mark.parametrize("fusion_width", [16, 4 * 16])  # sum: P; concat: M * P
def test_heads_take_sum_and_concat_widths(head, fusion_width):
    net = HEADS.get(head)(in_dim=fusion_width, num_classes=10, hidden=(32,))
    assert net(torch.randn(5, fusion_width)).shape == (5, 10)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name,shape", [("cnn", (3, 16, 16)), ("resnet18", (3, 16, 16)), ("cnn", (6, 1, 32, 32))])
def test_bottom_on_cuda(name, shape):
    net = BOTTOMS.get(name)(input_shape=shape, embed_dim=16, tanh_c=1.0).cuda()
    out = net(torch.randn(8, *shape, device="cuda"))
    assert out.device.type == "cuda" and out.shape == (8, 16) and float(out.detach().abs().max()) <= 1.0
    out.sum().backward()
