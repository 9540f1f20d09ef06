"""``vfl account --target-epsilon``: the β (pbm, fixed b) or σ (ldp) that reaches a target ε."""

from __future__ import annotations

import argparse
import math
from typing import Any

from vfl.errors import ConfigError
from vfl.privacy.calibrate import calibrate_ldp_sigma, calibrate_pbm_beta


def target_report(args: argparse.Namespace) -> dict[str, Any]:
    """JSON-able calibration result for the CLI arguments (epochs, dim and delta are required)."""
    for flag in ("epochs", "dim", "delta"):
        if getattr(args, flag) is None:
            raise ConfigError(f"--{flag}", "required with --target-epsilon (epsilon composes epochs releases "
                              "of dim coordinates and is reported at delta)")
    if args.beta is not None and args.mechanism == "pbm":
        raise ConfigError("--beta", "--target-epsilon chooses beta; do not give both")
    out: dict[str, Any] = {"mechanism": args.mechanism, "target_epsilon": args.target_epsilon, "delta": args.delta,
                           "epochs": args.epochs, "dim": args.dim, "parties": args.parties, "b": args.b, "c": args.c}
    if args.mechanism == "pbm":
        beta, eps = calibrate_pbm_beta(target_epsilon=args.target_epsilon, delta=args.delta, b=args.b,
                                       num_parties=args.parties, dim=args.dim, epochs=args.epochs,
                                       key="--target-epsilon")
        out.update(beta=beta, epsilon=eps, note="largest beta in (0, 1/4] at this b whose epsilon <= target "
                                                "(SecAgg sum over the parties)")
    else:
        sens = 2.0 * args.c * math.sqrt(args.dim)
        sigma, eps = calibrate_ldp_sigma(target_epsilon=args.target_epsilon, delta=args.delta, sensitivity=sens,
                                         epochs=args.epochs, key="--target-epsilon")
        out.update(sigma=sigma, epsilon=eps, sensitivity=sens,
                   note="smallest sigma (per coordinate, per party) whose epsilon <= target")
    return out
