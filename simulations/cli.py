"""The ``vfl`` command line: run experiments, list strategies/datasets, account privacy.

Bad input (config keys, values, missing data) exits with status 2 and one line naming the key;
a failed party exits with status 1 naming the party, the round and the last checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from vfl.errors import ConfigError, DataError, PartyFailure, PrivacyBudgetExceeded, VFLError

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="vfl",
        description="Privacy-preserving vertical federated learning and split fine-tuning "
                    "(Ray actors, Flower messages, every byte counted).",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    r = sub.add_parser("run", help="run an experiment from a YAML config (or resume one)",
                       description="Run CONFIG (a YAML path or a bundled name such as `demo`).")
    r.add_argument("config", nargs="?", help="YAML config file or bundled config name")
    r.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set train.epochs=3 (repeatable)")
    r.add_argument("--out", help="run directory (default runs/<name>-<timestamp>/)")
    r.add_argument("--transport", choices=("ray", "inprocess"), help="override transport.kind")
    r.add_argument("--address", metavar="HOST:PORT", help="join an existing Ray cluster (implies ray)")
    r.add_argument("--resume", metavar="DIR", help="continue the run in DIR from its last checkpoint")
    r.add_argument("--no-progress", action="store_true", help="no progress bars")

    sub.add_parser("strategies", help="list registered strategies")
    sub.add_parser("datasets", help="list registered datasets")
    c = sub.add_parser("config-help", help="every config key with its default and allowed values")
    c.add_argument("--strategy", help="also list this strategy's params")

    a = sub.add_parser("account", help="privacy accounting of a mechanism (prints JSON)")
    a.add_argument("--mechanism", choices=("pbm", "ldp"), required=True)
    a.add_argument("--b", type=int, required=True, help="PBM trials b")
    a.add_argument("--beta", type=float, required=True, help="PBM beta in (0, 1/4]")
    a.add_argument("--parties", type=int, required=True, help="number of parties M")
    a.add_argument("--alpha", type=float, required=True, help="Renyi order alpha > 1")
    a.add_argument("--epochs", type=int)
    a.add_argument("--batch", type=int)
    a.add_argument("--dataset-size", type=int)
    a.add_argument("--dim", type=int, help="embedding dimension P")
    a.add_argument("--delta", type=float)
    a.add_argument("--c", type=float, default=1.0, help="embedding range C")
    a.add_argument("--c0", type=float, help="constant C_0 of the paper's Theorem 6.1/6.2 formulas")
    return p


def _cmd_run(args: argparse.Namespace) -> int:
    from simulations.runner import default_out_dir, execute, resolve_config, resume_run

    progress = False if args.no_progress else None
    if args.resume:
        if args.config:
            raise ConfigError("--resume", "give either CONFIG or --resume DIR, not both")
        result = resume_run(args.resume, progress=progress, overrides=args.overrides)
        out = Path(args.resume)
    else:
        if not args.config:
            raise ConfigError("CONFIG", "missing; e.g. `vfl run demo` or `vfl run path/to/config.yaml`")
        cfg = resolve_config(args.config, args.overrides, transport=args.transport, address=args.address)
        out = Path(args.out) if args.out else default_out_dir(cfg)
        args.out = str(out)  # named by the failure handler
        result = execute(cfg, out_dir=out, progress=progress)
    s = result.summary
    keys = ("strategy", "dataset", "num_parties", "transport", "epochs", "final_test_acc", "total_bytes_up",
            "total_bytes_down", "epsilon", "psi_intersection_size", "psi_bytes", "signature_bytes")
    print(json.dumps({k: s[k] for k in keys if k in s}))
    print(f"run directory: {out}")
    return 0


def _cmd_strategies() -> int:
    import strategies  # noqa: F401
    from vfl.strategy import STRATEGIES

    width = max(len(n) for n in STRATEGIES.names())
    for name in STRATEGIES.names():
        print(f"{name:<{width}}  {STRATEGIES.help(name)}")
    return 0


def _cmd_datasets() -> int:
    from simulations.data.registry import DATASETS

    width = max(len(n) for n in DATASETS.names())
    for name in DATASETS.names():
        print(f"{name:<{width}}  {DATASETS.help(name)}")
    return 0


def _cmd_config_help(args: argparse.Namespace) -> int:
    import strategies  # noqa: F401
    from vfl.config import help_table
    from vfl.schema import RunConfig
    from vfl.strategy import STRATEGIES

    rows = [r for r in help_table(RunConfig) if r[0] != "params"]
    if args.strategy:
        rows += help_table(STRATEGIES.get(args.strategy, "--strategy").Params, "params")
    for key, default, allowed, help_ in rows:
        print(f"{key:<28} {default:<14} {allowed:<34} {help_}")
    return 0


def _cmd_account(args: argparse.Namespace) -> int:
    from vfl.privacy.report import account_report

    report = account_report(mechanism=args.mechanism, b=args.b, beta=args.beta, parties=args.parties,
                            alpha=args.alpha, epochs=args.epochs, batch=args.batch, dataset_size=args.dataset_size,
                            dim=args.dim, delta=args.delta, c=args.c, c0=args.c0)
    print(json.dumps(report, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return _cmd_run(args)
        if args.command == "strategies":
            return _cmd_strategies()
        if args.command == "datasets":
            return _cmd_datasets()
        if args.command == "config-help":
            return _cmd_config_help(args)
        if args.command == "account":
            return _cmd_account(args)
        parser.print_help()
        return EXIT_BAD_INPUT
    except (ConfigError, DataError) as exc:
        print(f"vfl: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (PartyFailure, PrivacyBudgetExceeded) as exc:
        print(f"vfl: run failed: {exc}", file=sys.stderr)
        run = getattr(args, "resume", None) or getattr(args, "out", None)
        if run:
            latest = Path(run) / "checkpoints" / "latest"
            ckpt = latest.read_text().strip() if latest.exists() else "none (failed before the first epoch ended)"
            print(f"vfl: last checkpoint: {ckpt}; resume with: vfl run --resume {run}", file=sys.stderr)
        return EXIT_FAILED
    except VFLError as exc:
        print(f"vfl: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. `vfl config-help | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("vfl: interrupted; resume with `vfl run --resume DIR`", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
