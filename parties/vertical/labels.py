"""The label holder's labels under the ``labels``-site defenses: what its head trains on, drawn once per run,
what the head's loss compares with and what its predictions stand for.

``label_rr`` (and ``label_rr_prior``'s stage 1) randomize the training labels at first use, after PSI
alignment; ``label_rr_prior``'s stage 2 draws every label stage 1 left ``UNDRAWN`` in epoch
``stage_epoch - 1``, with the head's prediction on that example's fused embedding as its prior, and
keeps the draw pending until epoch ``stage_epoch``. Both the used and the pending labels go into the
server's ``state()`` (keys ``y_used``, ``y_pending``), so a crash, a restart or a resume never draws a
label a second time: a second draw would be a second release. ``cae`` trains the head on soft targets in
a confused label space and decodes its predictions back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from vfl.core.rng import NodeNoise
from vfl.privacy.defenses import UNDRAWN, Defense
from vfl.runtime.accel import set_mode


class ServerLabels:
    """One server's label defenses: the labels its head trains on (drawn once), the staged ones not used yet."""

    def __init__(self, defenses: Sequence[Defense], *, noise: Callable[[], NodeNoise]) -> None:
        self.defenses = list(defenses)
        self.relabel = [d for d in defenses if d.site == "labels"]
        self.staged = [(d, s) for d in defenses if (s := d.stage_epoch()) is not None]
        self._noise = noise  # the server's noise key, asked for only when a label is drawn
        self.used: np.ndarray | None = None  # the randomized training labels, drawn once per run
        self.pending: np.ndarray | None = None  # staged labels drawn, used from their stage on (label_rr_prior)

    def train_labels(self, y_train: np.ndarray, *, num_classes: int) -> np.ndarray:
        """The labels the head trains on: ``y_train``, or its one-time randomization by the label defenses."""
        if not self.relabel:
            return y_train
        if self.used is None:
            y = np.asarray(y_train, dtype=np.int64)
            for d in self.relabel:
                y = d.relabel(y, num_classes=num_classes,
                              noise=self._noise().round(type(d).__name__, phase="setup", epoch=0, step=0))
            self.used = y
        return self.used

    def batch(self, y_train: np.ndarray, *, num_classes: int, ids: np.ndarray, epoch: int, step: int,
              head: nn.Module, fused: torch.Tensor) -> np.ndarray | None:
        """The batch ``ids``' training labels after the staged defenses' bookkeeping (None: none is staged).

        From epoch ``stage_epoch`` the pending draws become training labels; in epoch ``stage_epoch - 1``
        each example of the batch still UNDRAWN gets its label once, the prior being ``head``'s softmax on
        its row of ``fused`` (a function of the features and of other examples' draws only)."""
        if not self.staged:
            return None
        used = self.train_labels(y_train, num_classes=num_classes)
        if self.pending is None:
            self.pending = np.full_like(used, UNDRAWN)
        for d, start in self.staged:
            if epoch >= start and (ready := self.pending != UNDRAWN).any():
                used[ready] = self.pending[ready]
                self.pending[ready] = UNDRAWN
            elif epoch == start - 1 and (todo := (used[ids] == UNDRAWN) & (self.pending[ids] == UNDRAWN)).any():
                set_mode(head, training=False)
                with torch.no_grad():
                    prior = torch.softmax(head(fused.detach()[torch.as_tensor(todo)]), 1).double().cpu().numpy()
                noise = self._noise().round(type(d).__name__, phase="train", epoch=epoch, step=step)
                self.pending[ids[todo]] = d.draw_staged(np.asarray(y_train)[ids[todo]], prior=prior, noise=noise)
        return used[ids]

    def targets(self, y: torch.Tensor, *, num_classes: int) -> torch.Tensor:
        """What the head's loss compares with: ``y``, or a label defense's soft targets (cae: confused labels)."""
        for d in self.defenses:
            if (soft := d.soft_targets(y, num_classes=num_classes)) is not None:
                return soft
        return y

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Class probabilities of the head's ``logits`` (cae: decoded from the confused label space)."""
        probs = torch.softmax(logits, 1)
        for d in self.defenses:
            probs = d.decode(probs)
        return probs

    def state(self) -> dict[str, Any]:
        """The drawn labels as tensors (checkpoints load with ``torch.load(weights_only=True)``)."""
        drawn = {"y_used": self.used, "y_pending": self.pending}
        return {k: torch.from_numpy(v.copy()) for k, v in drawn.items() if v is not None}

    def load_state(self, state: dict[str, Any]) -> None:
        """Take back the draws a ``state()`` holds (a checkpoint without them leaves these undrawn)."""
        if state.get("y_used") is not None:
            self.used = torch.as_tensor(state["y_used"]).numpy().astype(np.int64)
        if state.get("y_pending") is not None:
            self.pending = torch.as_tensor(state["y_pending"]).numpy().astype(np.int64)
