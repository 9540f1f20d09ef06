"""``vfl tiny-lm FAMILY DIR [--dtype bf16]``: save a tiny random language model of a supported family,
built from its config offline (``parties/llm/common/tiny.py``), for ``params.model_dir``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError


def add_tiny_lm_parser(sub: Any) -> None:
    t = sub.add_parser("tiny-lm", help="save a tiny random language model of a family (offline, from its config)",
                       description="Save a tiny random model (width 32, 3 blocks) of FAMILY and a byte-level "
                                   "tokenizer to DIR, for params.model_dir of the split-LLM strategies.")
    t.add_argument("family", metavar="FAMILY", help="llama, gemma3, granite, eurobert, gpt2, bert, t5, ... "
                   "(docs/llm.md; a name not supported is answered with the list)")
    t.add_argument("dir", metavar="DIR", help="directory to write (must not hold a model already)")
    t.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"), help="dtype of the saved weights")


def cmd_tiny_lm(args: argparse.Namespace) -> int:
    from parties.llm.common.tiny import tiny_lm_dir

    out = Path(args.dir)
    if (out / "config.json").exists():
        raise ConfigError("DIR", f"{out} already holds a model (config.json); give a new directory")
    print(tiny_lm_dir(out, args.family, dtype=args.dtype))
    return 0
