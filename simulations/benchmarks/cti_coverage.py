"""Why SAP's contributing-token identification (CTI) can or cannot raise utility: what it selects.

    python -m simulations.benchmarks.cti_coverage --out DIR [--train 600] [--fractions 0.01 0.05 0.2]

CTI (SAP, arXiv 2312.15603, §4.4) lowers the dχ noise on the class-skewed tokens chosen on the
customer's training set. It can only help if those tokens (a) occur at test time and (b) carry the
label there. For the benchmark's subsample (``--train``, the same seeded ``subsample`` the
``sap_curve`` benchmark uses) and for the full training set, this prints per ``cti_fraction``:
how many tokens are chosen, their share of the test set's token positions, and how often a
chosen token's test occurrence falls in the class it was skewed to on the training set (0.5 =
no label signal on a balanced binary task). Writes ``DIR/cti_coverage.json`` (``rows``). No
training: seconds on CPU.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

import simulations.data.text  # noqa: F401  (registers the text datasets)
from parties.llm.common.backbone import load_tokenizer
from parties.llm.sap.cti import class_token_counts, contributing_tokens, utility_importance
from simulations.data.registry import DATASETS
from simulations.data.source import subsample


def _ids(tok: Any, texts: Sequence[Any] | np.ndarray, max_len: int) -> list[np.ndarray]:
    return [np.asarray(tok(str(t), truncation=True, max_length=max_len)["input_ids"]) for t in texts]


def coverage_rows(*, train_ids: list[np.ndarray], y_train: np.ndarray, test_ids: list[np.ndarray],
                  y_test: np.ndarray, vocab: int, ignore: Sequence[int], fractions: Sequence[float],
                  label: str, tok: Any) -> list[dict[str, Any]]:
    """One row per fraction: chosen tokens, test coverage and test class agreement."""
    classes = int(max(y_train.max(), y_test.max())) + 1
    counts = class_token_counts(sequences=train_ids, labels=y_train, num_classes=classes, vocab_size=vocab,
                                ignore=ignore)
    test = class_token_counts(sequences=test_ids, labels=y_test, num_classes=classes, vocab_size=vocab,
                              ignore=ignore)
    ui = utility_importance(counts)
    rows = []
    for frac in fractions:
        ct = contributing_tokens(ui=ui, counts=counts, fraction=frac)
        skew = counts[:, ct].argmax(0)  # the class each chosen token leans to on the training set
        hits = int(test[skew, ct].sum()) if len(ct) else 0
        occ = int(test[:, ct].sum()) if len(ct) else 0
        top = ct[np.argsort(-counts.sum(0)[ct])][:8] if len(ct) else np.zeros(0, dtype=np.int64)
        rows.append({"train": label, "train_samples": len(train_ids), "cti_fraction": frac, "tokens": len(ct),
                     "train_coverage": float(counts[:, ct].sum() / counts.sum()),
                     "test_coverage": float(occ / max(test.sum(), 1)),
                     "test_class_agreement": float(hits / occ) if occ else None,
                     "most_frequent": [tok.convert_ids_to_tokens(int(t)) for t in top]})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="bench-out")
    p.add_argument("--dataset", default="rt-polarity")
    p.add_argument("--train", type=int, default=600, help="the sap_curve subsample size")
    p.add_argument("--test", type=int, default=300)
    p.add_argument("--fractions", type=float, nargs="+", default=[0.01, 0.05, 0.2])
    p.add_argument("--max-len", type=int, default=48)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    tok = load_tokenizer(None)
    full = DATASETS.get(args.dataset)(seed=args.seed)
    small = subsample(full, train=args.train, test=args.test, seed=args.seed)
    test_ids = _ids(tok, full.x_test, args.max_len)
    rows: list[dict[str, Any]] = []
    for label, ds in ((f"subsample {args.train}", small), ("full", full)):
        rows += coverage_rows(train_ids=_ids(tok, ds.x_train, args.max_len), y_train=np.asarray(ds.y_train),
                              test_ids=test_ids, y_test=np.asarray(full.y_test), vocab=tok.vocab_size,
                              ignore=tok.all_special_ids, fractions=args.fractions, label=label, tok=tok)
    print(f"{'train':>16} {'n':>6} {'fraction':>8} {'tokens':>6} {'test cov':>8} {'agree':>6}  most frequent")
    for r in rows:
        agree = "-" if r["test_class_agreement"] is None else f"{r['test_class_agreement']:.2f}"
        print(f"{r['train']:>16} {r['train_samples']:>6} {r['cti_fraction']:>8g} {r['tokens']:>6} "
              f"{r['test_coverage']:>8.4f} {agree:>6}  {' '.join(r['most_frequent'])}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "cti_coverage.json").write_text(json.dumps({"dataset": args.dataset, "rows": rows}, indent=2))
    print(f"wrote {out / 'cti_coverage.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
