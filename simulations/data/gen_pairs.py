"""Generate ``tiny-pairs``: a small MRPC-style paraphrase task in the ``text-jsonl`` format, no download.

Each line is ``{"text": ..., "text_pair": ..., "label": 0|1, "topic": ...}``. ``text`` is a news-like sentence built
from a subject, an action and a time; ``text_pair`` (label 1) says the same with synonyms and the
time moved to the front, or (label 0) says it with one of subject/action/time swapped for another,
also reworded, so word overlap alone does not give the label away. ``topic`` (``government`` or
``business``: who the subject of ``text`` is) is a private attribute for SAP's attribute-inference
attack, independent of the label and about the content, not the length. Seeded and deterministic: the
files shipped in ``simulations/data/tiny_pairs/`` are this script's output for the default seed
(a test regenerates and compares them).
CLI: ``python -m simulations.data.gen_pairs OUT_DIR [--seed N] [--train N] [--test N]``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

SIZES = (240, 80)  # train, test
SEED = 26
# (wording in text, wording in text_pair): the pair always rewords, so overlap is no label
SUBJECTS = [("the committee", "the panel"), ("the company", "the firm"), ("the senator", "the lawmaker"),
            ("the city council", "the municipal council"), ("the bank", "the lender"), ("the union", "the labor group"),
            ("the court", "the judges"), ("the airline", "the carrier")]
TOPICS = ("government", "business", "government", "government", "business", "business", "government", "business")
ACTIONS = [("approved the budget", "backed the spending plan"), ("rejected the proposal", "turned down the plan"),
           ("raised its forecast", "lifted its outlook"), ("cut hundreds of jobs", "eliminated hundreds of positions"),
           ("delayed the vote", "postponed the ballot"), ("signed the agreement", "inked the deal"),
           ("opened an inquiry", "launched an investigation"), ("lowered interest rates", "reduced borrowing costs")]
TIMES = [("on monday", "on monday"), ("last week", "a week ago"), ("in march", "in march"),
         ("on friday evening", "late on friday"), ("this year", "during this year"), ("after the election",
                                                                                    "once the election was over")]


def _line(rng: np.random.Generator) -> dict[str, object]:
    s, a, t = (int(rng.integers(len(x))) for x in (SUBJECTS, ACTIONS, TIMES))
    text = f"{SUBJECTS[s][0].capitalize()} {ACTIONS[a][0]} {TIMES[t][0]}."
    label = int(rng.integers(2))
    s2, a2, t2 = s, a, t
    if not label:  # change one part of the meaning
        part = int(rng.integers(3))
        pools = (len(SUBJECTS), len(ACTIONS), len(TIMES))
        new = (int(rng.integers(pools[part] - 1)) + 1 + (s, a, t)[part]) % pools[part]
        s2, a2, t2 = (new if part == 0 else s), (new if part == 1 else a), (new if part == 2 else t)
    if rng.random() < 0.5:
        pair = f"{TIMES[t2][1].capitalize()}, {SUBJECTS[s2][1]} {ACTIONS[a2][1]}."
    else:
        pair = f"{SUBJECTS[s2][1].capitalize()} {ACTIONS[a2][1]} {TIMES[t2][1]}."
    return {"text": text, "text_pair": pair, "label": label, "topic": TOPICS[s]}


def generate(*, seed: int = SEED, sizes: tuple[int, int] = SIZES) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """Train and test lines (independent draws from one seeded generator)."""
    rng = np.random.default_rng(seed)
    return [_line(rng) for _ in range(sizes[0])], [_line(rng) for _ in range(sizes[1])]


def dumps(lines: list[dict[str, object]]) -> str:
    """The JSONL text of ``lines`` (one JSON object per line, key order kept)."""
    return "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)


def write(out: Path, *, seed: int = SEED, sizes: tuple[int, int] = SIZES) -> tuple[Path, Path]:
    """``out/train.jsonl`` and ``out/test.jsonl``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    train, test = generate(seed=seed, sizes=sizes)
    paths = out / "train.jsonl", out / "test.jsonl"
    for path, lines in zip(paths, (train, test), strict=True):
        path.write_text(dumps(lines), encoding="utf-8")
    return paths


def cli(argv: list[str] | None, *, description: str, write: Callable[..., tuple[Path, Path]], seed: int,
        sizes: tuple[int, int]) -> None:
    """``python -m simulations.data.gen_<set> OUT [--seed] [--train] [--test]``: a shipped set's generator."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("out", type=Path)
    ap.add_argument("--seed", type=int, default=seed)
    ap.add_argument("--train", type=int, default=sizes[0])
    ap.add_argument("--test", type=int, default=sizes[1])
    a = ap.parse_args(argv)
    for p in write(a.out, seed=a.seed, sizes=(a.train, a.test)):
        print(p)


def main(argv: list[str] | None = None) -> None:
    cli(argv, description="write the tiny-pairs sentence-pair dataset (text-jsonl format)", write=write, seed=SEED,
        sizes=SIZES)


if __name__ == "__main__":
    main()
