"""What the trees protocol leaks, played as the node that sees it (scored by the experimenter's truth).

``instance_space_labels``: a passive party turns the instance spaces it is sent (which rows reach which node
of every tree) into labels, in the spirit of ID2Graph and the Instance Clustering Attack (arXiv 2307.10318,
2307.10579): rows that share deep nodes across trees are similar (the co-occurrence graph of the leaves),
so it clusters rows by their node memberships (a spectral embedding of that graph, then k-means) and names
each cluster by the few labels it knows; and, since the first tree's leaves are nearly pure, it also names
each first-tree leaf by its known labels. Its accuracy on the rows it did not know is the better of the two.

``feature_order``: the label holder orders the rows of a passive party's column from the splits it chose
(feature, bin) and the rows each owner sent left: every split bounds a row's bin from above or below, and
the midpoint of what is left ranks the row; ``feature_order_from_histograms`` does it from the decrypted
histograms alone: each node's hessian mass per bin is a distribution of its rows' bins, and a row's bin
posterior multiplies those of every node it sat in (Spearman ρ with the true column, either way).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _onehot_nodes(levels: Sequence[np.ndarray]) -> np.ndarray:
    """(N, total nodes) indicator of each row's node in each given membership vector."""
    cols = []
    for pos in levels:
        ids, inv = np.unique(pos, return_inverse=True)
        m = np.zeros((len(pos), len(ids)), dtype=np.float64)
        m[np.arange(len(pos)), inv] = 1.0
        cols.append(m)
    return np.hstack(cols) if cols else np.zeros((0, 0))


def _name_groups(groups: np.ndarray, y: np.ndarray, known: np.ndarray, num_classes: int) -> np.ndarray:
    """Each row's guess: the majority known label of its group (the known labels' majority where none)."""
    fallback = int(np.bincount(y[known], minlength=num_classes).argmax())
    guess = np.full(len(groups), fallback, dtype=np.int64)
    for g in np.unique(groups):
        members = groups == g
        k = members & known
        if k.any():
            guess[members] = int(np.bincount(y[k], minlength=num_classes).argmax())
    return guess


def instance_space_labels(trees: Sequence[Sequence[np.ndarray]], y: np.ndarray, *, num_classes: int,
                          known: np.ndarray, seed: int = 0) -> dict[str, float]:
    """Label accuracy of the attack on the unknown rows.

    Args:
        trees: per tree, the membership vectors the party received (one per level, deepest last).
        y: the true labels (to name clusters from the ``known`` rows and to score the rest).
        known: bool mask of the rows whose labels the attacker knows (its auxiliary knowledge).

    Returns:
        ``cluster`` (co-occurrence clustering), ``first_tree`` (first tree's deepest nodes) and ``value``
        (the better), each the accuracy on ``~known``; ``majority`` (the majority-class rate there).
    """
    from sklearn.cluster import KMeans
    from sklearn.decomposition import TruncatedSVD

    y = np.asarray(y, dtype=np.int64)
    unknown = ~known
    majority = float(np.bincount(y[unknown], minlength=num_classes).max() / max(1, unknown.sum()))
    deepest = [levels[-1] for levels in trees if len(levels)]
    out = {"majority": majority, "cluster": majority, "first_tree": majority, "value": majority}
    if not deepest or not known.any():
        return out
    first = _name_groups(deepest[0], y, known, num_classes)
    out["first_tree"] = float(np.mean(first[unknown] == y[unknown]))
    x = _onehot_nodes(deepest)
    if x.shape[1] > 2:
        dim = int(min(16, x.shape[1] - 1))
        emb = TruncatedSVD(n_components=dim, random_state=seed).fit_transform(x)
        emb /= np.linalg.norm(emb, axis=1, keepdims=True) + 1e-12
        clusters = KMeans(n_clusters=min(4 * num_classes, len(y)), n_init=4, random_state=seed).fit_predict(emb)
        guess = _name_groups(clusters, y, known, num_classes)
        out["cluster"] = float(np.mean(guess[unknown] == y[unknown]))
    out["value"] = max(out["cluster"], out["first_tree"])
    return out


def feature_order(splits: Sequence[tuple[np.ndarray, np.ndarray, int, int]], column: np.ndarray,
                  num_bins: int) -> float | None:
    """Spearman ρ between the rank the label holder infers and a party's true ``column``.

    Args:
        splits: per split on this column: (rows of the node, which of them went left, bin, default_left);
            "left" means value < cut[bin] (missing rows follow ``default_left`` and are not bounded).
        num_bins: the column's bins (from the party's layout).
    """
    from scipy.stats import spearmanr

    lo = np.zeros(len(column), dtype=np.float64)
    hi = np.full(len(column), float(num_bins - 1))
    seen = np.zeros(len(column), dtype=bool)
    for rows, left, b, _ in splits:
        lo_rows, hi_rows = rows[~left], rows[left]
        hi[hi_rows] = np.minimum(hi[hi_rows], b)
        lo[lo_rows] = np.maximum(lo[lo_rows], b + 1)
        seen[rows] = True
    ok = seen & ~np.isnan(column)
    if ok.sum() < 3 or np.unique(column[ok]).size < 2:
        return None
    rho = spearmanr((lo[ok] + hi[ok]) / 2.0, column[ok]).statistic
    return None if not np.isfinite(rho) else float(rho)


def feature_order_from_histograms(nodes: Sequence[tuple[np.ndarray, np.ndarray]], column: np.ndarray,
                                  num_bins: int) -> float | None:
    """Spearman ρ of the rows' expected bins under the histograms' posterior and the true ``column``.

    Args:
        nodes: per node the label holder decrypted a histogram of this column for: (its rows, the hessian
            mass per bin), over every level of every tree.
    """
    from scipy.stats import spearmanr

    logp = np.zeros((len(column), num_bins), dtype=np.float64)
    seen = np.zeros(len(column), dtype=bool)
    for rows, mass in nodes:
        m = np.clip(np.asarray(mass, dtype=np.float64)[:num_bins], 0.0, None)
        if len(rows) == 0 or m.sum() <= 0:
            continue
        logp[rows] += np.log((m + 1e-3 * m.sum() / num_bins) / (m.sum() * (1 + 1e-3)))
        seen[rows] = True
    post = np.exp(logp - logp.max(axis=1, keepdims=True))
    expected = (post / post.sum(axis=1, keepdims=True)) @ np.arange(num_bins)
    ok = seen & ~np.isnan(column)
    if ok.sum() < 3 or np.unique(column[ok]).size < 2 or np.unique(expected[ok]).size < 2:
        return None
    rho = spearmanr(expected[ok], column[ok]).statistic
    return None if not np.isfinite(rho) else float(rho)
