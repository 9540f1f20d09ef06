"""``vfl generate RUN_DIR --prompt TEXT``: greedy answers of a trained ``ushape-lora`` run (prints JSON)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    g = sub.add_parser("generate", help="greedy answers from a trained ushape-lora or ushape-p3eft run's checkpoint "
                       "(prints JSON)")
    g.add_argument("run_dir", metavar="RUN_DIR")
    g.add_argument("--prompt", action="append", required=True, help="a prompt (repeat for several)")
    g.add_argument("--max-new-tokens", type=int, default=None, help="default: the run's params.max_new_tokens")
    g.add_argument("--trust-code", action="store_true", help="import the code a run directory's config names even "
                   "if you did not create that directory here (vfl.engine.trust)")


MAX_NEW = 4096  # ushape's params.max_new_tokens allows [1, 4096]


def cmd_generate(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simulations.cli.epoch_log import quiet_library_bars
    from vfl.core.errors import ConfigError

    if args.max_new_tokens is not None and not 1 <= args.max_new_tokens <= MAX_NEW:
        raise ConfigError("--max-new-tokens", f"got {args.max_new_tokens}; allowed: an integer in [1, {MAX_NEW}]")
    if not Path(args.run_dir).is_dir():
        raise ConfigError("RUN_DIR", f"{args.run_dir} is not a directory; give a ushape-lora or ushape-p3eft run "
                          "directory")
    quiet_library_bars()  # stdout is the JSON; Hugging Face's loading bars would print around it
    import strategies  # noqa: F401  (registers ushape-lora)
    from strategies.ushape import generate_from_run

    answers = generate_from_run(args.run_dir, list(args.prompt), max_new=args.max_new_tokens)
    print(json.dumps([{"prompt": q, "generation": a} for q, a in zip(args.prompt, answers, strict=True)], indent=1))
    return 0
