"""Generate ``tiny-instruct``: a small instruction set in the ``instruct-jsonl`` format, no download.

Each line is ``{"prompt": ..., "response": ...}`` from one of five short templates (opposites,
capitals, sums, colours, plurals), so the answers follow learnable patterns and a tiny model's
greedy answers can be scored with ROUGE-L. Seeded and deterministic: the files shipped in
``simulations/data/tiny_instruct/`` are this script's output for the default seed (a test
regenerates and compares them).
CLI: ``python -m simulations.data.gen_instruct OUT_DIR [--seed N] [--train N] [--test N]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulations.data.gen_pairs import cli, dumps

SIZES = (320, 64)  # train, test
SEED = 41
OPPOSITES = [("hot", "cold"), ("big", "small"), ("fast", "slow"), ("happy", "sad"), ("up", "down"), ("old", "new"),
             ("light", "dark"), ("early", "late"), ("full", "empty"), ("hard", "soft")]
CAPITALS = [("France", "Paris"), ("Italy", "Rome"), ("Spain", "Madrid"), ("Japan", "Tokyo"), ("Egypt", "Cairo"),
            ("Peru", "Lima"), ("Kenya", "Nairobi"), ("Norway", "Oslo")]
COLOURS = [("grass", "green"), ("the sky", "blue"), ("snow", "white"), ("coal", "black"), ("a lemon", "yellow"),
           ("a cherry", "red")]
PLURALS = [("cat", "cats"), ("box", "boxes"), ("city", "cities"), ("mouse", "mice"), ("child", "children"),
           ("leaf", "leaves"), ("dog", "dogs"), ("foot", "feet")]


def _line(rng: np.random.Generator) -> dict[str, str]:
    kind = int(rng.integers(5))
    if kind == 0:
        a, b = OPPOSITES[int(rng.integers(len(OPPOSITES)))]
        return {"prompt": f"Give the opposite of {a}.", "response": f"The opposite of {a} is {b}."}
    if kind == 1:
        c, cap = CAPITALS[int(rng.integers(len(CAPITALS)))]
        return {"prompt": f"What is the capital of {c}?", "response": f"The capital of {c} is {cap}."}
    if kind == 2:
        x, y = (int(v) for v in rng.integers(1, 10, size=2))
        return {"prompt": f"Add {x} and {y}.", "response": f"{x} plus {y} is {x + y}."}
    if kind == 3:
        thing, col = COLOURS[int(rng.integers(len(COLOURS)))]
        return {"prompt": f"What colour is {thing}?", "response": f"{thing.capitalize()} is {col}."}
    one, many = PLURALS[int(rng.integers(len(PLURALS)))]
    return {"prompt": f"Plural of {one}?", "response": f"The plural of {one} is {many}."}


def generate(*, seed: int = SEED, sizes: tuple[int, int] = SIZES) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """Train and test lines (independent draws from one seeded generator)."""
    rng = np.random.default_rng(seed)
    return [_line(rng) for _ in range(sizes[0])], [_line(rng) for _ in range(sizes[1])]


def write(out: Path, *, seed: int = SEED, sizes: tuple[int, int] = SIZES) -> tuple[Path, Path]:
    """``out/train.jsonl`` and ``out/test.jsonl``; returns their paths."""
    out.mkdir(parents=True, exist_ok=True)
    train, test = generate(seed=seed, sizes=sizes)
    paths = out / "train.jsonl", out / "test.jsonl"
    for path, lines in zip(paths, (train, test), strict=True):
        path.write_text(dumps(lines), encoding="utf-8")  # type: ignore[arg-type]
    return paths


def main(argv: list[str] | None = None) -> None:
    cli(argv, description="write the tiny-instruct instruction set (instruct-jsonl format)", write=write, seed=SEED,
        sizes=SIZES)


if __name__ == "__main__":
    main()
