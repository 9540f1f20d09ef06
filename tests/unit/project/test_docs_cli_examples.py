"""Every ``vfl`` command in the fenced shell blocks of README.md and docs/*.md (issue 48) parses with the real
command line, and the bundled configs it runs resolve with its ``--set`` values (each point of a sweep's grid;
a YAML path is a file the page has the reader write first): a renamed flag or config key in the code fails
here before a reader meets it. The Python examples run in
tests/engine/engine/test_docs_examples.py."""

from __future__ import annotations

import itertools
import re

import pytest

import vfl
from simulations.cli.main import _parser
from simulations.cli.sweep import parse_grid, parse_seeds
from tests.support.doc_examples import python_blocks, vfl_commands


def _doc_strategies() -> set[str]:
    """Strategies the docs' own examples define (docs/writing-a-strategy.md's ``half``): registered by running
    that example (tests/e2e/test_writing_a_strategy.py), not here."""
    return {n for b in python_blocks() if "@register" in b.code for n in re.findall(r'name = "([\w+-]+)"', b.code)}


def test_every_vfl_command_in_the_docs_parses_and_resolves():
    commands = vfl_commands()
    assert len(commands) >= 20  # README's quick start, attacks.md, llm.md ...
    resolved, own = 0, _doc_strategies()
    assert own == {"half"}
    for block, argv in commands:
        try:
            args = _parser().parse_args(argv)
        except SystemExit:
            pytest.fail(f"{block.where}: `vfl {' '.join(argv)}` does not parse")
        bundled = args.command in ("run", "sweep") and args.config and not args.config.endswith((".yaml", ".yml"))
        if any(f"strategy={name}" in " ".join(argv) for name in own):
            continue
        if args.command == "run" and bundled:
            vfl.resolve(args.config, overrides=args.overrides, transport=args.transport)
            resolved += 1
        elif args.command == "sweep" and bundled:
            grid = parse_grid(args.grid)
            assert parse_seeds(args.seeds), block.where
            for combo in itertools.product(*(values for _, values in grid)):
                vfl.resolve(args.config, overrides=[f"{k}={v}" for (k, _), v in zip(grid, combo, strict=True)],
                            transport=args.transport)
                resolved += 1
    assert resolved >= 10
