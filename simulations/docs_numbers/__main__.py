"""``python -m simulations.docs_numbers [--check]``: see the package's docstring."""

from __future__ import annotations

import argparse
import sys

from simulations.docs_numbers.blocks import check, regenerate


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulations.docs_numbers",
                                 description="Generate the docs' measured numbers from docs/measurements/*.json.")
    ap.add_argument("--check", action="store_true", help="change nothing; list the blocks that differ (exit 1)")
    args = ap.parse_args(argv)
    if args.check:
        bad = check()
        for m in bad:
            print(f"{m.doc}: {m.name}: the doc has {m.found!r}, the JSON gives {m.expected!r}")
        return 1 if bad else 0
    for doc, n in regenerate().items():
        print(f"{doc}: {n} generated block(s) rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
