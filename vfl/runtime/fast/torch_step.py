"""Per-step shortcuts for the training hot path, each with bit-identical results.

- :func:`module_hook` is ``getattr(module, name, None)`` without the AttributeError that
  ``nn.Module.__getattr__`` builds and raises on every miss (~2 µs), for optional hooks read per step.
- :func:`set_mode` skips ``Module.train()``/``eval()`` (a recursive walk with one ``__setattr__``
  per submodule) when the module is already in that mode. The nodes only change modes through the
  top-level module, so its flag speaks for every submodule.
- :func:`fused_step` takes the optimizer step of several plain torch optimizers (the parties sharing
  a host) in ONE multi-tensor call of torch's own functional ``sgd``/``adam`` over the union of their
  parameters, gradients and per-parameter state. Every update is elementwise and per parameter, so
  each parameter and state tensor gets exactly the ops (and bits) of its own ``optimizer.step()``; on
  CPU torch's foreach ops run the same per-tensor kernels in a C++ loop, saving the per-optimizer
  wrapper (hooks, profiler records, grad-mode switches) and the Python loop over parameters.
  Anything it cannot prove equal (another optimizer class or subclass, different hyperparameters,
  several parameter groups, hooks, tensor learning rates, fused/capturable/differentiable modes)
  returns False and the caller steps each optimizer itself. A group that asks for
  ``foreach=False`` gets the per-tensor loop (the same code path as its own step, just once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.optim.adam import adam
from torch.optim.optimizer import _global_optimizer_post_hooks, _global_optimizer_pre_hooks
from torch.optim.sgd import sgd

Optimizers = Sequence[torch.optim.Optimizer]


def set_mode(module: nn.Module, *, training: bool) -> None:
    """``module.train(training)`` unless the module is already in that mode."""
    if module.training is not training:
        module.train(training)


def module_hook(module: nn.Module, name: str) -> Any:
    """``getattr(module, name, None)``, looked up only where it can be: the module's class, its own attributes,
    parameters, buffers and submodules (a miss costs no exception)."""
    own = module.__dict__
    if (name in own or hasattr(type(module), name) or name in own["_parameters"] or name in own["_buffers"]
            or name in own["_modules"]):
        return getattr(module, name, None)
    return None


def zero_grads(optimizers: Optimizers) -> None:
    """``zero_grad(set_to_none=True)`` of every optimizer: inline for plain torch ones (that is all their
    ``zero_grad`` does, without its profiler record), their own method for others (e.g. Opacus' clears more)."""
    for opt in optimizers:
        if type(opt) not in _STEPS:
            opt.zero_grad(set_to_none=True)
            continue
        for group in opt.param_groups:
            for p in group["params"]:
                p.grad = None


def step_all(optimizers: Optimizers) -> None:
    """Step every optimizer: one fused step when possible, else each its own ``step()``."""
    if not fused_step(optimizers):
        for opt in optimizers:
            opt.step()


def fused_step(optimizers: Optimizers) -> bool:
    """One multi-tensor step for all ``optimizers``; False (nothing stepped) when they cannot share one."""
    group = _shared_group(optimizers)
    if group is None:
        return False
    with torch.no_grad():
        _STEPS[type(optimizers[0])](optimizers, group)
    return True


def _shared_group(optimizers: Optimizers) -> dict[str, Any] | None:
    """The one parameter group every optimizer has, if the fused step reproduces their steps."""
    kind = type(optimizers[0]) if optimizers else None
    if kind not in _STEPS or _global_optimizer_pre_hooks or _global_optimizer_post_hooks:
        return None
    first = optimizers[0].param_groups[0]
    if first.get("fused") or first.get("capturable") or first.get("differentiable"):
        return None
    for opt in optimizers:
        if (type(opt) is not kind or len(opt.param_groups) != 1 or "step" in vars(opt)
                or opt._optimizer_step_pre_hooks or opt._optimizer_step_post_hooks
                or getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None):
            return None
        group = opt.param_groups[0]
        if group.keys() != first.keys():
            return None
        for k, v in group.items():  # same plain-number hyperparameters (a tensor lr == a float lr: refuse)
            if k != "params" and (isinstance(v, torch.Tensor) or v != first[k]
                                  or (type(v) is tuple and any(isinstance(x, torch.Tensor) for x in v))):
                return None
    return first


def _sgd(optimizers: Optimizers, g: dict[str, Any]) -> None:
    params: list[torch.Tensor] = []
    grads: list[torch.Tensor] = []
    bufs: list[torch.Tensor | None] = []
    sparse = False
    for opt in optimizers:
        sparse |= opt._init_group(opt.param_groups[0], params, grads, bufs)  # type: ignore[attr-defined]
    sgd(params, grads, bufs, has_sparse_grad=sparse, foreach=g["foreach"] is not False, fused=False, weight_decay=g["weight_decay"],
        momentum=g["momentum"], lr=g["lr"], dampening=g["dampening"], nesterov=g["nesterov"], maximize=g["maximize"])
    if g["momentum"] != 0:  # SGD.step writes the (possibly new) buffers back into the state
        it = iter(bufs)
        for opt in optimizers:
            for p in opt.param_groups[0]["params"]:
                if p.grad is not None:
                    opt.state[p]["momentum_buffer"] = next(it)


def _adam(optimizers: Optimizers, g: dict[str, Any]) -> None:
    params: list[torch.Tensor] = []
    grads: list[torch.Tensor] = []
    m: list[torch.Tensor] = []
    v: list[torch.Tensor] = []
    v_max: list[torch.Tensor] = []
    steps: list[torch.Tensor] = []
    complex_ = False
    for opt in optimizers:
        complex_ |= opt._init_group(opt.param_groups[0], params, grads, m, v, v_max, steps)  # type: ignore[attr-defined]
    beta1, beta2 = g["betas"]
    adam(params, grads, m, v, v_max, steps, foreach=g["foreach"] is not False, fused=False, capturable=False, differentiable=False,
         has_complex=complex_, decoupled_weight_decay=g.get("decoupled_weight_decay", False), amsgrad=g["amsgrad"],
         beta1=beta1, beta2=beta2, lr=g["lr"], weight_decay=g["weight_decay"], eps=g["eps"], maximize=g["maximize"])


_STEPS: dict[type, Callable[[Optimizers, dict[str, Any]], None]] = {
    torch.optim.SGD: _sgd, torch.optim.Adam: _adam, torch.optim.AdamW: _adam}
