"""vfl/runtime/fast/torch_step.py: one fused optimizer step over several torch optimizers leaves every
parameter and every state tensor bit-identical to each optimizer's own ``step()``, and steps aside
(returns False, changes nothing) whenever it could not guarantee that."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

from vfl.runtime.fast.torch_step import fused_step, module_hook, set_mode, step_all, zero_grads

Make = Callable[[Any], torch.optim.Optimizer]


def _nets(k: int = 3) -> list[nn.Module]:
    torch.manual_seed(0)
    return [nn.Sequential(nn.Linear(7, 9), nn.ReLU(), nn.Linear(9, 4)) for _ in range(k)]


def _grads(nets: list[nn.Module], step: int, *, skip_last: bool = False) -> None:
    g = torch.Generator().manual_seed(step)
    for net in nets:
        params = list(net.parameters())
        for i, p in enumerate(params):
            p.grad = None if skip_last and i == len(params) - 1 else torch.randn(p.shape, generator=g)


def _same(a: list[torch.optim.Optimizer], b: list[torch.optim.Optimizer], na: list[nn.Module], nb: list[nn.Module]) -> None:
    for x, y in zip(na, nb, strict=True):
        for p, q in zip(x.parameters(), y.parameters(), strict=True):
            assert torch.equal(p, q)
    for oa, ob in zip(a, b, strict=True):
        sa, sb = oa.state_dict(), ob.state_dict()
        assert sa["param_groups"] == sb["param_groups"]
        assert sa["state"].keys() == sb["state"].keys()
        for k in sa["state"]:
            assert sa["state"][k].keys() == sb["state"][k].keys()
            for name, t in sa["state"][k].items():
                assert torch.equal(t, sb["state"][k][name]), (k, name)


MAKERS: dict[str, Make] = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.05),
    "sgd-momentum-wd": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, weight_decay=1e-3),
    "sgd-nesterov-dampening": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, weight_decay=1e-2),
    "sgd-dampening-maximize": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.5, dampening=0.3, maximize=True),
    "adam": lambda p: torch.optim.Adam(p, lr=0.01),
    "adam-wd-amsgrad": lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=1e-2, amsgrad=True, betas=(0.8, 0.99)),
    "adamw": lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    "sgd-foreach-false": lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, foreach=False),
    "adam-foreach-true": lambda p: torch.optim.Adam(p, lr=0.01, foreach=True),
}


@pytest.mark.parametrize("kind", sorted(MAKERS))
def test_fused_step_is_bit_identical_to_each_optimizer_step(kind):
    ref_nets, nets = _nets(), _nets()
    ref = [MAKERS[kind](n.parameters()) for n in ref_nets]
    opts = [MAKERS[kind](n.parameters()) for n in nets]
    for step in range(6):  # first step creates the state lazily; later ones update it
        for group in (ref_nets, nets):
            _grads(group, step, skip_last=step == 2)  # a parameter without a gradient is skipped by both
        for o in ref:
            o.step()
        assert fused_step(opts) is True
        _same(ref, opts, ref_nets, nets)
    moved = [p for p, q in zip(nets[0].parameters(), _nets()[0].parameters(), strict=True) if not torch.equal(p, q)]
    assert moved  # the steps did something (the comparison is not between two untouched models)


class _MySGD(torch.optim.SGD):
    pass


def _hooked(p: Any) -> torch.optim.Optimizer:
    opt = torch.optim.SGD(p, lr=0.05)
    opt.register_step_post_hook(lambda *_: None)
    return opt


def _scheduled(p: Any) -> torch.optim.Optimizer:
    opt = torch.optim.SGD(p, lr=0.05)
    opt.scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1)  # type: ignore[attr-defined]
    return opt  # the scheduler wraps this instance's step() to see it called


def _two_groups(p: Any) -> torch.optim.Optimizer:
    params = list(p)
    return torch.optim.SGD([{"params": params[:2]}, {"params": params[2:], "lr": 0.1}], lr=0.05)


@pytest.mark.parametrize("second", [
    lambda p: torch.optim.SGD(p, lr=0.01),  # another learning rate
    lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),  # another momentum
    lambda p: torch.optim.Adam(p, lr=0.05),  # another class
    lambda p: _MySGD(p, lr=0.05),  # a subclass may change how a step is taken
    _hooked,  # step hooks must run
    _scheduled,  # an instance-level step() wrapper must run
    _two_groups,  # several parameter groups
    lambda p: torch.optim.SGD(p, lr=torch.tensor(0.05)),  # tensor learning rate
], ids=["lr", "momentum", "class", "subclass", "hook", "scheduler", "groups", "tensor-lr"])
def test_fused_step_steps_aside_when_it_cannot_prove_equality(second):
    nets = _nets(2)
    opts = [torch.optim.SGD(nets[0].parameters(), lr=0.05), second(nets[1].parameters())]
    ref_nets = copy.deepcopy(nets)
    ref = [torch.optim.SGD(ref_nets[0].parameters(), lr=0.05), second(ref_nets[1].parameters())]
    _grads(nets, 0)
    _grads(ref_nets, 0)
    before = [p.clone() for n in nets for p in n.parameters()]
    assert fused_step(opts) is False
    assert all(torch.equal(a, b) for a, b in zip(before, [p for n in nets for p in n.parameters()], strict=True))
    step_all(opts)  # the fallback: each optimizer's own step
    for o in ref:
        o.step()
    _same(ref, opts, ref_nets, nets)


def test_zero_grads_and_set_mode():
    nets = _nets(2)
    opts = [torch.optim.SGD(n.parameters(), lr=0.1) for n in nets]
    _grads(nets, 0)
    zero_grads(opts)
    assert all(p.grad is None for n in nets for p in n.parameters())
    own = _MySGD(nets[0].parameters(), lr=0.1)  # not a plain torch optimizer: its own zero_grad runs
    own.zero_grad = lambda set_to_none=True: calls.append(set_to_none)  # type: ignore[method-assign]
    calls: list[bool] = []
    zero_grads([own])
    assert calls == [True]
    net = nets[0]
    set_mode(net, training=False)
    assert not any(m.training for m in net.modules())
    set_mode(net, training=True)
    assert all(m.training for m in net.modules())
    calls.clear()
    net.train = lambda mode=True: calls.append(mode) or net  # type: ignore[method-assign]
    set_mode(net, training=True)  # already training: no recursive walk
    assert calls == []


class _Hooked(nn.Module):
    """A head with every kind of attribute ``module_hook`` must find as ``getattr`` does."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(2, 2)
        self.scale = nn.Parameter(torch.ones(1))
        self.register_buffer("offset", torch.zeros(1))
        self.plain = 3

    def arm(self, noise: Any) -> None:  # a method of the class
        self.armed = noise

    @property
    def penalty(self) -> int:  # a property of the class
        return 7


def test_module_hook_is_getattr_with_none():
    m = _Hooked()
    for name in ("arm", "penalty", "lin", "scale", "offset", "plain", "training", "missing", "arm_", "forward"):
        assert module_hook(m, name) == getattr(m, name, None) or module_hook(m, name) is getattr(m, name, None), name
    assert module_hook(m, "missing") is None and module_hook(nn.Linear(1, 1), "penalty") is None
    m.penalty_set_later = 1  # an instance attribute added after construction
    assert module_hook(m, "penalty_set_later") == 1
