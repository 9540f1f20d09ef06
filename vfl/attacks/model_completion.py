"""Label inference by model completion — Fu et al., "Label Inference Attacks Against Vertical Federated
Learning", USENIX Security 2022 (§4.1 passive, §4.2 active).

Threat model: one passive party. It holds its own features and its own trained bottom model (its
state, not a message) and, as declared auxiliary knowledge, the labels of a handful of training
samples (``per_class`` per class, e.g. 4 × 10 classes = 40). It puts a small classifier on top of
its bottom's outputs, fits it on the known labels and predicts everyone else's label. In the
*active* variant the same party trained its bottom with a malicious local optimizer that scales up
its own updates (``parties.attacks.nodes.arm_active_completion``), so the server's head leans on its
bottom and that bottom carries more of the label.

Fit: plain supervised (a softmax-regression head, full-batch Adam with weight decay on the standardized
outputs, a fixed number of epochs); Fu et al.'s MixMatch semi-supervised fine-tuning of the whole bottom is not implemented.
Scores (experimenter's ground truth only): accuracy on the samples whose labels the party does not
know, beside the same classifier fitted on the party's raw features (what it could infer without
the federation: the leak the trained bottom adds is the gap) and the majority-class rate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from vfl.core.errors import DataError


def known_label_ids(*, y: np.ndarray, per_class: int, rng: np.random.Generator) -> np.ndarray:
    """The attacker's labelled samples: ``per_class`` random ids of every class (fewer if a class is smaller)."""
    y = np.asarray(y)
    if per_class < 1:
        raise DataError(f"model completion: per_class must be >= 1; got {per_class}")
    ids = [rng.choice(np.flatnonzero(y == c), size=min(per_class, int((y == c).sum())), replace=False)
           for c in np.unique(y)]
    return np.sort(np.concatenate(ids)).astype(np.int64)


def _standardize(train: np.ndarray, other: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mu, sd = train.mean(0, keepdims=True), train.std(0, keepdims=True)
    sd = np.where(sd > 1e-8, sd, 1.0)
    return (train - mu) / sd, (other - mu) / sd


def fit_completion(*, x: np.ndarray, y: np.ndarray, num_classes: int, seed: int, hidden: Sequence[int] = (),
                   epochs: int = 200, lr: float = 1e-2, weight_decay: float = 1e-3) -> nn.Module:
    """The completion head ``x -> class logits`` (default linear: softmax regression; ``hidden`` adds ReLU
    layers), fitted by full-batch Adam on the known labels."""
    if len(x) != len(y) or len(x) < 2:
        raise DataError(f"model completion needs >= 2 labelled samples aligned with their inputs; got {len(x)}, {len(y)}")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed & 0x7FFF_FFFF)
        layers: list[nn.Module] = []
        prev = x.shape[1]
        for h in hidden:
            layers += [nn.Linear(prev, h), nn.ReLU()]
            prev = h
        net = nn.Sequential(*layers, nn.Linear(prev, num_classes)).double()
    xt, yt = torch.from_numpy(np.asarray(x, np.float64)), torch.as_tensor(np.asarray(y), dtype=torch.long)
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    for _ in range(epochs):
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(net(xt), yt).backward()
        opt.step()
    return net.eval()


def completion_predictions(*, known_x: np.ndarray, known_y: np.ndarray, eval_x: np.ndarray, num_classes: int,
                           seed: int, epochs: int = 200) -> np.ndarray:
    """Labels a completion head fitted on the known (``known_x``, ``known_y``) gives ``eval_x``."""
    kx = np.asarray(known_x, np.float64).reshape(len(known_x), -1)
    ex = np.asarray(eval_x, np.float64).reshape(len(eval_x), -1)
    kx, ex = _standardize(kx, ex)
    net = fit_completion(x=kx, y=np.asarray(known_y), num_classes=num_classes, seed=seed, epochs=epochs)
    with torch.no_grad():
        return net(torch.from_numpy(ex)).argmax(1).numpy()  # type: ignore[no-any-return]


def completion_accuracy(*, known_x: np.ndarray, known_y: np.ndarray, eval_x: np.ndarray, eval_y: np.ndarray,
                        num_classes: int, seed: int, epochs: int = 200) -> float:
    """Accuracy on (``eval_x``, ``eval_y``) of a completion head fitted on the known (``known_x``, ``known_y``)."""
    pred = completion_predictions(known_x=known_x, known_y=known_y, eval_x=eval_x, num_classes=num_classes,
                                  seed=seed, epochs=epochs)
    return float((pred == np.asarray(eval_y)).mean())


def scale_update(*, before: Sequence[torch.Tensor], params: Sequence[torch.Tensor], scale: float) -> None:
    """Fu et al.'s malicious local optimizer (simplified to a constant factor): each parameter moves
    ``scale`` times the step its honest optimizer just took (``before`` -> ``params``), in place."""
    with torch.no_grad():
        for b, p in zip(before, params, strict=True):
            p.copy_(b + scale * (p - b))
