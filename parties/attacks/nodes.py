"""Adversarial and audit nodes planted by ``attack.*`` config keys (evaluation only).

- ``planted_mods``: the audit canaries at ``attack.canary_party`` (see ``parties.attacks.canary``).
- ``arm_backdoor``: turns the party at ``attack.backdoor_party`` into a gradient-replacement
  backdoor attacker (Liu, Yi & Chen, arXiv 2007.03608, 2020; see ``vfl.attacks.backdoor``). It
  keeps speaking the protocol — its embeddings still go through its mods (PBM, noise, masking).
- ``arm_active_completion``: turns the party at ``attack.amc_party`` into Fu et al.'s active model
  completion attacker (USENIX Security 2022): its bottom moves ``attack.amc_scale`` times each step
  its honest optimizer takes (see ``vfl.attacks.model_completion.scale_update``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from parties.attacks.canary import canary_mod
from parties.vertical.party import PassiveParty
from vfl.attacks.audit import canary_design
from vfl.attacks.backdoor import backdoor_design, pair_targets, replace_gradients, stamp_trigger
from vfl.attacks.model_completion import scale_update
from vfl.data.dataset import LabelShard
from vfl.data.sampling import Schedule
from vfl.runtime.mods import Mod


def planted_mods(cfg: Any, index: int, schedule: Schedule) -> list[Mod]:
    """The audit's canary mod for the canary party (empty for every other party or without an audit)."""
    a = cfg.attack
    if not a.canaries or index != a.canary_party:
        return []
    ids, bits = canary_design(num_train=schedule.num_train, m=a.canaries, seed=cfg.seed)
    return [canary_mod(ids=ids, bits=bits, c=cfg.model.tanh_c, schedule=schedule)]


class GradientReplacement:
    """Mixin over a passive party class: swap target embeddings, replace poison gradients."""

    bd_pairs: dict[int, int]
    bd_saved: dict[int, np.ndarray]
    bd_gamma: float

    def _send(self: Any, request: Any, emb: torch.Tensor, phase: str, epoch: int, step: int) -> Any:
        if phase == "train":
            batch = self.schedule.train_ids(epoch, step)
            rows = [r for r, sid in enumerate(batch) if int(sid) in self.bd_pairs]
            if rows:
                poison = np.array([self.bd_pairs[int(batch[r])] for r in rows])
                emb = emb.detach().clone()
                with torch.no_grad():
                    emb[rows] = self.bottom(self._inputs(self.shard.x_train, poison))
        return super()._send(request, emb, phase, epoch, step)  # type: ignore[misc]

    def apply_gradient(self: Any, grad: np.ndarray, epoch: int, step: int) -> None:
        batch = self.schedule.train_ids(epoch, step)
        grad = replace_gradients(grad, batch, pairs=self.bd_pairs, saved=self.bd_saved, gamma=self.bd_gamma)
        super().apply_gradient(grad, epoch, step)  # type: ignore[misc]


_VARIANTS: dict[type, type] = {}


def arm_backdoor(node: PassiveParty, cfg: Any, labels: LabelShard) -> PassiveParty:
    """Make ``node`` the backdoor attacker (stamped poison features, known targets from ``labels``:
    the declared auxiliary knowledge of a few target-class samples)."""
    a = cfg.attack
    known, poison = backdoor_design(y_train=labels.y_train, target=a.backdoor_target, known=a.backdoor_known,
                                    poison=a.backdoor_poison, seed=cfg.seed)
    x = np.array(node.shard.x_train, copy=True)
    x[poison] = stamp_trigger(x[poison], size=a.backdoor_trigger_size, value=a.backdoor_trigger)
    node.shard = dataclasses.replace(node.shard, x_train=x)
    cls = type(node)
    variant = _VARIANTS.setdefault(cls, type(f"Backdoor{cls.__name__}", (GradientReplacement, cls), {}))
    node.__class__ = variant
    node.bd_pairs = pair_targets(known, poison)  # type: ignore[attr-defined]
    node.bd_saved = {}  # type: ignore[attr-defined]
    node.bd_gamma = float(a.backdoor_amplify)  # type: ignore[attr-defined]
    return node


class ScaledUpdates:
    """Mixin over a passive party class: Fu et al.'s malicious local optimizer (every own update × amc_scale)."""

    amc_scale: float

    def apply_gradient(self: Any, grad: np.ndarray, epoch: int, step: int) -> None:
        params = list(self.bottom.parameters())
        before = [p.detach().clone() for p in params]
        super().apply_gradient(grad, epoch, step)  # type: ignore[misc]
        scale_update(before=before, params=params, scale=self.amc_scale)


_AMC_VARIANTS: dict[type, type] = {}


def arm_active_completion(node: PassiveParty, cfg: Any) -> PassiveParty:
    """Make ``node`` the active model completion attacker: same protocol, its bottom updates scaled up.
    (The party's class then overrides ``apply_gradient``, so its host steps it on its own, not fused.)"""
    cls = type(node)
    variant = _AMC_VARIANTS.setdefault(cls, type(f"ActiveCompletion{cls.__name__}", (ScaledUpdates, cls), {}))
    node.__class__ = variant
    node.amc_scale = float(cfg.attack.amc_scale)  # type: ignore[attr-defined]
    return node
