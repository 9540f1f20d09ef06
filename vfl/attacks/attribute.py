"""Attribute inference attack (AIA, SAP §5.1): predict a private attribute from representations.

Probes: ``attribute_inference`` (linear, pooled vectors only: the old, weak reading),
``mlp_attribute_inference`` (an MLP over pooled vectors plus ``length_features``: the token counts
the attacker sees on the wire) and ``transformer_attribute_inference`` (the paper's attacker: a
transformer fine-tuned on the token representations); ``bootstrap_ci`` gives an interval for any
attack success rate.

The attacker holds the attribute for a labelled fraction of the samples it saw, fits a classifier
on their (mean-pooled) representations and predicts the rest. Success = accuracy on the rest;
empirical privacy EP = 1 − accuracy (compare with the majority-class rate: a blind guess).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vfl.core.errors import DataError


def pooled_features(reps: list[np.ndarray]) -> np.ndarray:
    """(N, d): the mean over tokens of each sample's (L_i, d) representation."""
    return np.stack([np.asarray(r, dtype=np.float32).mean(0) for r in reps])


def split_labeled(*, n: int, fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into the attacker's labelled ids and the ids it must guess."""
    if not 0 < fraction < 1:
        raise DataError(f"labelled fraction must be in (0, 1), got {fraction}")
    perm = rng.permutation(n)
    k = min(max(1, round(fraction * n)), n - 1)
    return np.sort(perm[:k]), np.sort(perm[k:])


def attribute_inference(*, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, seed: int,
                        max_iter: int = 1000) -> np.ndarray:
    """Fit a standardized logistic regression on the labelled features; predict ``test_x``."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = np.unique(train_y)
    if len(classes) < 2:  # nothing to learn: the attacker can only repeat the one value it knows
        return np.full(len(test_x), classes[0] if len(classes) else 0)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, random_state=seed))
    clf.fit(train_x, train_y)
    return clf.predict(test_x)  # type: ignore[no-any-return]


def majority_rate(y: np.ndarray) -> float:
    """Accuracy of always guessing the most common value (the no-information baseline)."""
    _, counts = np.unique(y, return_counts=True)
    return float(counts.max() / counts.sum()) if len(y) else float("nan")


def length_features(lengths: np.ndarray) -> np.ndarray:
    """(N, 2) what the token counts on the wire tell: log(1 + L) and 1/L (the attacker sees every L)."""
    n = np.asarray(lengths, dtype=np.float64)
    return np.stack([np.log1p(n), 1.0 / np.maximum(n, 1.0)], axis=1).astype(np.float32)


def mlp_attribute_inference(*, train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray, seed: int,
                            hidden: int = 64, l2: float = 1.0, max_iter: int = 600) -> np.ndarray:
    """The stronger probe: standardized features -> one hidden ReLU layer (scikit-learn MLP, Adam,
    L2 ``l2``); it can use nonlinear cues (lengths, norms) a linear probe on pooled vectors misses."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    classes = np.unique(train_y)
    if len(classes) < 2:
        return np.full(len(test_x), classes[0] if len(classes) else 0)
    clf = make_pipeline(StandardScaler(), MLPClassifier(hidden_layer_sizes=(hidden,), alpha=l2, max_iter=max_iter,
                                                        random_state=seed))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf.fit(train_x, train_y)
    return clf.predict(test_x)  # type: ignore[no-any-return]


def bootstrap_ci(hits: np.ndarray, totals: np.ndarray | None = None, *, rng: np.random.Generator,
                 resamples: int = 1000, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of ``sum(hits) / sum(totals)`` over units drawn with replacement
    (an attack's success: per-sample correct/1 for AIA, recovered/real tokens per sample for EIA)."""
    h = np.asarray(hits, dtype=np.float64)
    t = np.ones_like(h) if totals is None else np.asarray(totals, dtype=np.float64)
    if len(h) == 0:
        return float("nan"), float("nan")
    idx = rng.integers(0, len(h), size=(resamples, len(h)))
    num, den = h[idx].sum(1), t[idx].sum(1)
    stats = np.divide(num, den, out=np.full(resamples, np.nan), where=den > 0)
    a = (1.0 - level) / 2
    return float(np.nanquantile(stats, a)), float(np.nanquantile(stats, 1.0 - a))


PROBES = ("mlp", "linear", "length", "linear_length", "transformer")  # what the attacker may fit; indices are stable


def transformer_attribute_inference(*, reps: Sequence[np.ndarray], train: np.ndarray, train_y: np.ndarray,
                                    test: np.ndarray, make_model: Callable[[int], Any], epochs: int, lr: float,
                                    seed: int, batch_size: int = 16, device: str = "cpu") -> np.ndarray:
    """The paper's attacker (SAP §5.1): fine-tune a transformer on the (L_i, d) token representations it
    received for its labelled samples ``train``, predict ``test``. ``make_model(num_classes)`` returns a
    module ``(padded (B, L, d), mask (B, L)) -> logits`` whose trainable parameters are what gets tuned
    (the vendor: a copy of its own top with LoRA and a fresh head). Init and sample order are seeded:
    this is an evaluation, not a release."""
    import torch

    classes, y = np.unique(train_y, return_inverse=True)
    if len(classes) < 2:
        return np.full(len(test), classes[0] if len(classes) else 0)
    cuda = str(device).startswith("cuda")
    with torch.random.fork_rng(devices=None if cuda else []):  # init and dropout seeded, the caller's RNG untouched
        torch.manual_seed(seed)
        return classes[_finetune(reps=reps, train=train, y=y, test=test, model=make_model(len(classes)),
                                 epochs=epochs, lr=lr, seed=seed, batch_size=batch_size, device=device)]


def _finetune(*, reps: Sequence[np.ndarray], train: np.ndarray, y: np.ndarray, test: np.ndarray, model: Any,
              epochs: int, lr: float, seed: int, batch_size: int, device: str) -> np.ndarray:
    """AdamW on the model's trainable parameters, seeded order, cross-entropy; argmax class indices of ``test``."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    order = np.random.default_rng(seed)

    def batch(rows: np.ndarray) -> tuple[Any, Any]:
        seqs = [torch.tensor(np.asarray(reps[int(i)]), dtype=torch.float32) for i in rows]  # a copy: wire buffers are read-only
        lens = torch.tensor([len(r) for r in seqs])
        padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True).to(device)
        mask = (torch.arange(padded.shape[1]).unsqueeze(0) < lens.unsqueeze(1)).to(device=device, dtype=torch.long)
        return padded, mask

    model.train()
    target = torch.as_tensor(y, dtype=torch.long, device=device)
    for _ in range(epochs):
        perm = order.permutation(len(train))
        for b in range(0, len(perm), batch_size):
            pick = perm[b : b + batch_size]
            logits = model(*batch(train[pick]))
            loss = torch.nn.functional.cross_entropy(logits.float(), target[torch.as_tensor(pick, device=device)])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    model.eval()
    out = []
    with torch.no_grad():
        for b in range(0, len(test), batch_size):
            out.append(model(*batch(test[b : b + batch_size])).argmax(-1).cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0, np.int64)


Probe = Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]  # (train rows, their values, test rows) -> guesses


def attacker_inference(*, pooled: np.ndarray, lengths: np.ndarray, known: np.ndarray, known_y: np.ndarray,
                       targets: np.ndarray, seed: int, folds: int = 3, finetune: Probe | None = None
                       ) -> tuple[np.ndarray, dict[str, np.ndarray], str]:
    """The attribute attacker with everything it holds: pooled noisy vectors, the token counts on the
    wire and (``finetune``, rows of the same sample order) a transformer fine-tuned on the token
    representations. It fits every probe of ``PROBES`` (MLP on vectors + lengths; linear on vectors
    only, the old reading; linear on lengths only; linear on both; the transformer when given) and
    answers with the one whose ``folds``-fold cross-validated accuracy on its own labelled samples is
    best (ties: the earlier in ``PROBES``); the targets are never seen before the final prediction.
    Returns (its predictions for ``targets``, every fitted probe's predictions, the chosen probe)."""
    from sklearn.model_selection import StratifiedKFold

    lens = length_features(lengths)
    feats = {"mlp": np.concatenate([pooled, lens], axis=1), "linear": pooled, "length": lens,
             "linear_length": np.concatenate([pooled, lens], axis=1)}
    fit = {"mlp": mlp_attribute_inference, "linear": attribute_inference, "length": attribute_inference,
           "linear_length": attribute_inference}

    def on_features(name: str) -> Probe:
        def probe(tr: np.ndarray, ty: np.ndarray, te: np.ndarray) -> np.ndarray:
            return np.asarray(fit[name](train_x=feats[name][tr], train_y=ty, test_x=feats[name][te], seed=seed))
        return probe

    probes: dict[str, Probe] = {p: on_features(p) for p in fit}
    if finetune is not None:
        probes["transformer"] = finetune
    names = [p for p in PROBES if p in probes]
    preds = {p: np.asarray(probes[p](known, known_y, targets)) for p in names}
    _, counts = np.unique(known_y, return_counts=True)
    k = min(folds, int(counts.min())) if len(counts) > 1 else 0
    if k < 2:  # too few labelled samples per value to validate: the strongest probe by design
        best = "transformer" if finetune is not None else "mlp"
        return preds[best], preds, best
    score = dict.fromkeys(names, 0.0)
    for tr, va in StratifiedKFold(n_splits=k, shuffle=True, random_state=seed).split(known, known_y):
        for p in names:
            got = probes[p](known[tr], known_y[tr], known[va])
            score[p] += float((np.asarray(got) == known_y[va]).mean()) / k
    best = max(names, key=lambda p: (score[p], -PROBES.index(p)))
    return preds[best], preds, best
