"""Membership inference on a trained model: was this sample in the training set?

Threat model: black-box query access to the trained fusion model (all parties' bottoms + the
server's head, as it would be served) and candidate samples with their labels.

- Loss threshold — Yeom, Giacomelli, Fredrikson & Jha, "Privacy Risk in Machine Learning:
  Analyzing the Connection to Overfitting" (CSF 2018): members have lower loss; score = −loss.
- Label-only — Choquette-Choo, Tramèr, Carlini & Papernot, "Label-Only Membership Inference
  Attacks" (ICML 2021), the data-augmentation/noise-robustness attack: the attacker sees only the
  predicted label; members stay correctly classified under more perturbations; score = share of
  ``queries`` noisy copies (Gaussian, std ``noise_std``) still classified correctly.

Scores: ROC AUC and TPR at 1 % FPR of members (training samples) against non-members (held-out
samples). The control runs the same attack with "members" that the model never saw either (two
halves of the held-out set): its AUC must be ≈ 0.5, the chance baseline.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from vfl.core.errors import DataError

Predict = Callable[[torch.Tensor], torch.Tensor]  # inputs -> logits


def roc_metrics(member_scores: np.ndarray, nonmember_scores: np.ndarray, *, fpr: float = 0.01) -> dict[str, float]:
    """ROC AUC of ``member > non-member`` and the best TPR at false-positive rate <= ``fpr``."""
    from sklearn.metrics import roc_auc_score, roc_curve

    m, n = np.asarray(member_scores, np.float64), np.asarray(nonmember_scores, np.float64)
    if len(m) == 0 or len(n) == 0:
        raise DataError(f"membership scores need members and non-members; got {len(m)} and {len(n)}")
    y = np.r_[np.ones(len(m)), np.zeros(len(n))]
    s = np.r_[m, n]
    f, t, _ = roc_curve(y, s)
    return {"auc": float(roc_auc_score(y, s)), "tpr_at_1pct_fpr": float(t[f <= fpr].max(initial=0.0))}


def loss_scores(predict: Predict, x: torch.Tensor, y: torch.Tensor) -> np.ndarray:
    """Yeom et al.: −(cross-entropy loss) per sample (higher = more likely a member)."""
    with torch.no_grad():
        loss = torch.nn.functional.cross_entropy(predict(x).double(), y, reduction="none")  # float64: no ties at 0
    return (-loss).double().numpy()  # type: ignore[no-any-return]


def label_only_scores(predict: Predict, x: torch.Tensor, y: torch.Tensor, *, noise_std: float, queries: int,
                      generator: torch.Generator) -> np.ndarray:
    """Choquette-Choo et al.: share of ``queries`` Gaussian-perturbed copies whose predicted LABEL is y."""
    if queries < 1 or noise_std < 0:
        raise DataError(f"label-only attack needs queries >= 1 and noise_std >= 0; got {queries}, {noise_std}")
    hits = torch.zeros(len(x), dtype=torch.float64)
    with torch.no_grad():
        hits += (predict(x).argmax(1) == y).double()
        for _ in range(queries - 1):
            noisy = x + noise_std * torch.randn(x.shape, generator=generator, dtype=x.dtype)
            hits += (predict(noisy).argmax(1) == y).double()
    return (hits / queries).numpy()  # type: ignore[no-any-return]


def control_split(n: int, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Two disjoint halves of ``range(n)`` (pseudo-members, non-members) for the never-seen control."""
    perm = rng.permutation(n)
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])
