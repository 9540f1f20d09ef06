"""``train.optimizer`` by name, one definition for every node: ``adam`` is torch Adam, ``adamw`` torch
AdamW (decoupled weight decay), ``sgd`` SGD with momentum; and ``train.lr_schedule`` (constant or
linear decay, after an optional linear warmup) attached to an optimizer by step hooks."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import torch

from vfl.config.run_config import LR_SCHEDULES, OPTIMIZERS
from vfl.core.errors import ConfigError
from vfl.runtime.accel import skip_dynamo_import


def make_optimizer(params: Iterable[torch.nn.Parameter] | Any, *, name: str, lr: float, momentum: float,
                   weight_decay: float) -> torch.optim.Optimizer:
    """The optimizer ``name`` over ``params`` (ConfigError naming ``train.optimizer`` otherwise)."""
    skip_dynamo_import()  # torch's Optimizer would import torch._dynamo (~1 s CPU) for nothing (vfl/runtime/accel.py)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    raise ConfigError("train.optimizer", f"got {name!r}; allowed: {', '.join(map(repr, OPTIMIZERS))}")




def warmup_count(*, total: int, steps: int = 0, ratio: float = 0.0) -> int:
    """Warmup optimizer steps: ``train.warmup_steps``, or ``ceil(train.warmup_ratio · total)``."""
    return int(steps) if steps else math.ceil(float(ratio) * total)


def lr_factor(step: int, *, schedule: str, warmup: int, total: int) -> float:
    """lr / train.lr at optimizer step ``step`` (0-based), as transformers' ``get_linear_schedule_with_warmup``
    (``linear``: 0 → 1 over ``warmup`` steps, then linear decay to 0 at ``total``) and
    ``get_constant_schedule_with_warmup`` (``constant``: 1 after the warmup)."""
    if schedule not in LR_SCHEDULES:
        raise ConfigError("train.lr_schedule", f"got {schedule!r}; allowed: {', '.join(LR_SCHEDULES)}")
    if step < warmup:
        return step / max(1, warmup)
    if schedule == "constant":
        return 1.0
    return max(0.0, (total - step) / max(1, total - warmup))


def attach_schedule(opt: torch.optim.Optimizer, *, schedule: str, warmup: int, total: int) -> torch.optim.Optimizer:
    """Set every group's lr to ``base_lr · lr_factor(k)`` before its k-th step. The step count and base
    lr live in the param groups (``sched_step``, ``base_lr``), so ``state_dict()`` checkpoints them and a
    resumed run continues the schedule where it stopped."""
    if schedule == "constant" and warmup == 0:
        return opt
    for group in opt.param_groups:
        group.setdefault("base_lr", group["lr"])
        group.setdefault("sched_step", 0)

    def before(o: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group in o.param_groups:
            group["lr"] = group["base_lr"] * lr_factor(int(group["sched_step"]), schedule=schedule, warmup=warmup,
                                                       total=total)

    def after(o: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group in o.param_groups:
            group["sched_step"] = int(group["sched_step"]) + 1

    opt.register_step_pre_hook(before)
    opt.register_step_post_hook(after)
    return opt
