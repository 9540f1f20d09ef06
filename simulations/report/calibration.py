"""``vfl account --target-epsilon``: the β (pbm, fixed b) or σ (ldp) that reaches a target ε."""

from __future__ import annotations

import argparse
from typing import Any

from vfl.privacy.accounting.account import account


def target_report(args: argparse.Namespace) -> dict[str, Any]:
    """JSON-able calibration result for the CLI arguments (epochs, dim and delta are required)."""
    return account(mechanism=args.mechanism, b=args.b, parties=args.parties, beta=args.beta,
                   target_epsilon=args.target_epsilon, epochs=args.epochs, dim=args.dim, delta=args.delta,
                   c=args.c)
