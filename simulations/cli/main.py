"""The ``vfl`` command line: run experiments, list strategies/datasets, account privacy.

Bad input (config keys, values, files, busy run directories) exits with status 2 and one line
naming the key or file; a failed run exits with status 1 and one line naming the party, the
round and the last checkpoint; SIGINT/SIGTERM exit 130/143 naming the run directory
(docs/failures.md).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulations.cli import failures, signals
from simulations.cli.generate import add_parser as add_generate_parser
from simulations.cli.generate import cmd_generate
from simulations.cli.notices import notify_once
from simulations.cli.sweep import add_sweep_parser, cmd_sweep
from simulations.cli.tiny_lm import add_tiny_lm_parser, cmd_tiny_lm
from simulations.cli.verify import add_verify_parser, cmd_verify
from vfl import __version__
from vfl.core.errors import ConfigError
from vfl.core.logs import LEVELS, get_logger, level_from_flags, setup_logging
from vfl.engine.trust import trusting

log = get_logger(__name__)
EXIT_BAD_INPUT, EXIT_FAILED, EXIT_NONFINITE = failures.EXIT_BAD_INPUT, failures.EXIT_FAILED, failures.EXIT_NONFINITE
FINAL_KEYS = ("strategy", "dataset", "num_parties", "transport", "epochs", "final_test_acc", "final_test_acc_epoch",
              "best_test_acc", "best_test_acc_epoch", "total_bytes_up",
              "total_bytes_down", "epsilon", "epsilon_scope", "epsilon_assumption", "epsilon_is_guarantee",
              "psi_intersection_size", "psi_bytes", "signature_bytes")  # `vfl run`'s final line, every run


class _Parser(argparse.ArgumentParser):
    """argparse that reads ``-1e-5`` as a value, not an option, so validation can name the key."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf$")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="vfl",
        description="Privacy-preserving vertical federated learning and split fine-tuning "
                    "(Ray actors, Flower messages, every byte counted).",
    )
    p.add_argument("--version", action="version", version=f"vfl {__version__}")
    p.add_argument("--log-level", choices=LEVELS, help="diagnostics shown on stderr (default: warning)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more diagnostics (-v info, -vv debug)")
    p.add_argument("-q", "--quiet", action="count", default=0, help="fewer diagnostics (-q errors only)")
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
    r.add_argument("--dry-run", action="store_true", help="validate, print the resolved config, write nothing")
    r.add_argument("--trust-code", action="store_true", help="import the code a run directory's config names even if you did not create that directory here (vfl.engine.trust)")
    add_sweep_parser(sub)
    add_tiny_lm_parser(sub)

    sub.add_parser("strategies", help="list registered strategies")
    sub.add_parser("defenses", help="list registered defenses (the `defenses:` config list)")
    sub.add_parser("datasets", help="list registered datasets")
    c = sub.add_parser("config-help", help="every config key with its default and allowed values")
    c.add_argument("--strategy", help="also list this strategy's params")
    c.add_argument("--json", action="store_true", help="print the config's JSON Schema (editor completion: every "
                   "key with its type, range, default and help; params per strategy, options per defense)")

    a = sub.add_parser("account", help="privacy accounting of a mechanism (prints JSON)")
    a.add_argument("--mechanism", choices=("pbm", "ldp"), required=True)
    a.add_argument("--b", type=int, required=True, help="PBM trials b")
    a.add_argument("--beta", type=float, help="PBM beta in (0, 1/4] (not with --target-epsilon)")
    a.add_argument("--parties", type=int, required=True, help="number of parties M")
    a.add_argument("--alpha", type=float, help="Renyi order alpha > 1 of the per-release RDP (default: the order "
                   "minimizing epsilon, with --epochs --dim --delta; not with --target-epsilon)")
    a.add_argument("--target-epsilon", type=float, help="calibrate: print the beta (pbm, at fixed b) or sigma "
                   "(ldp) reaching this epsilon over --epochs (needs --dim, --delta)")
    a.add_argument("--epochs", type=int, help="releases per sample (one per epoch) composed into epsilon")
    a.add_argument("--batch", type=int, help="with --c0 only: batch size B of the paper's T = epochs*N/B")
    a.add_argument("--dataset-size", type=int, help="with --c0 only: training samples N of the paper's T")
    a.add_argument("--dim", type=int, help="embedding dimension P")
    a.add_argument("--delta", type=float)
    a.add_argument("--c", type=float, default=1.0, help="embedding range C")
    a.add_argument("--c0", type=float, help="constant C_0 of the paper's Theorem 6.1/6.2 formulas")
    rep = sub.add_parser("report", help="one-page privacy report of a run: report.md, report.json, figures (PNG + PDF)")
    rep.add_argument("run_dir", metavar="RUN_DIR")
    rep.add_argument("--trust-code", action="store_true", help="import the code a run directory's config names even if you did not create that directory here (vfl.engine.trust)")
    rep.add_argument("--attacks", help="comma-separated attacks to run (default: every one that applies)")
    rep.add_argument("--no-progress", action="store_true", help="no bar: one line per attack (as off a terminal)")
    at = sub.add_parser("attack", help="run one attack post hoc on a run directory (prints JSON)")
    at.add_argument("name", metavar="NAME", help="label_inference, feature_reconstruction, gradient_inversion, "
                    "membership, extraction, backdoor, audit, llm_leak")
    at.add_argument("run_dir", metavar="RUN_DIR")
    at.add_argument("--trust-code", action="store_true", help="import the code a run directory's config names even if you did not create that directory here (vfl.engine.trust)")
    add_generate_parser(sub)
    add_verify_parser(sub)
    return p


def _cmd_report(args: argparse.Namespace) -> int:
    import torch

    from simulations.report.render import attack_json, build_report

    torch.set_num_threads(1)  # many tiny models: threads only add contention on a shared machine
    if args.command == "attack":
        print(json.dumps(attack_json(args.name, args.run_dir), indent=2, default=str))
        return 0
    from simulations.cli.epoch_log import AttackLog, wants_epoch_lines

    names = tuple(n.strip() for n in args.attacks.split(",") if n.strip()) if args.attacks else None
    progress = AttackLog(lines=wants_epoch_lines(no_progress=args.no_progress))  # a line per attack, or a bar
    try:
        rep = build_report(args.run_dir, names=names, on_attack=progress)
    finally:
        progress.close()
    keys = ("epsilon", "audit_epsilon_lower", "final_test_acc")
    label = {k: rep[k] for k in ("epsilon_label",) if k in rep}  # a label defense's epsilon (vfl/privacy/defenses.py)
    print(json.dumps({**{k: rep[k] for k in keys}, **label, "attacks": {a["name"]: a["value"] for a in rep["attacks"]}}))
    print(f"report: {Path(args.run_dir) / 'report.md'}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    from simulations.cli.epoch_log import EpochLog, PhaseLog, quiet_library_bars, wants_epoch_lines
    from simulations.cli.run_facts import count_from_process_start
    from vfl.engine.progress import listening

    count_from_process_start()  # summary.json's wall_s: from this process's start (run_facts.py)
    lines = wants_epoch_lines(no_progress=args.no_progress)  # off a terminal: one line per epoch
    if lines:
        quiet_library_bars()  # transformers' weight-loading bar would interleave with the epoch lines
    with listening(PhaseLog(lines=lines)):  # long phases (nodes starting, leak scoring ...) say what they do
        return _run_and_print(args, progress=False if args.no_progress else None,  # stdout: stderr keeps the
                              log_line=EpochLog() if lines else None)  # one-line error contract


def _run_and_print(args: argparse.Namespace, *, progress: bool | None, log_line: Any) -> int:
    """``vfl run``'s run (or resume) and its final JSON line."""
    import vfl.engine.api
    from simulations.cli.epoch_log import final_keys, headline_keys
    from simulations.cli.runner import default_out_dir
    from vfl.privacy.accounting.noise_report import seeded_noise_warning
    if args.resume:
        if args.config:
            raise ConfigError("--resume", "give either CONFIG or --resume DIR, not both")
        if args.out:
            raise ConfigError("--out", "not with --resume (the run stays in its directory)")
        args.run_dir = args.resume  # named by the failure handlers
        result = vfl.engine.api.resume_run(args.resume, progress=progress, overrides=args.overrides,
                                    transport=args.transport, address=args.address,
                                    on_epoch_end=log_line)
        out = Path(args.resume)
    else:
        if not args.config:
            raise ConfigError("CONFIG", "missing; e.g. `vfl run demo` or `vfl run path/to/config.yaml`")
        cfg = vfl.engine.api.resolve(args.config, overrides=args.overrides, transport=args.transport,
                              address=args.address)
        if args.dry_run:
            return _dry_run(cfg)
        out = Path(args.out) if args.out else default_out_dir(cfg)
        args.run_dir = str(out)
        result = vfl.engine.api.run(cfg, out_dir=out, transport=None, progress=progress,
                             note=f"created by: vfl {shlex.join(args.argv)}",
                             on_epoch_end=log_line)
    s = result.summary
    warning = seeded_noise_warning(s)
    if warning:
        log.warning("%s", warning.removeprefix("vfl: warning: "))
    keys = (*FINAL_KEYS, *headline_keys(result.config), *final_keys(result.config))  # + the strategy's own results
    print(json.dumps({k: s[k] for k in keys if k in s  # no accuracy at all (a causal LM): its headline says it
                      and not (k == "final_test_acc" and s[k] is None and len(keys) > len(FINAL_KEYS))}))
    print(f"run directory: {out}")
    if result.stopped:
        stop = result.stopped
        print(f"vfl: run stopped: {stop['message']}; {out} keeps every epoch up to here (summary.json, plots); "
              "the budget is spent, so this run cannot go on", file=sys.stderr)
        return EXIT_FAILED
    return 0


def _dry_run(cfg: Any) -> int:
    """Validate everything a run checks before writing, print the resolved config, write nothing."""
    import yaml

    import vfl.engine.api

    vfl.engine.api.validate(cfg)
    print(yaml.safe_dump(cfg.to_dict(), sort_keys=False), end="")
    print("config OK (dry run: nothing written)", file=sys.stderr)
    return 0


def _listing(kind: str, mark: Any = None) -> int:
    """One line per registered name and its help (+ ``mark(entry)``), from the catalog (no torch import)."""
    from simulations.cli.catalog import current

    items = current()[kind]
    width = max(len(n) for n in items)
    for name, entry in items.items():
        extra = mark(entry) if mark else ""
        print(f"{name:<{width}}  {entry['help']}{extra}".rstrip())
    return 0


def _shows(entry: dict[str, Any]) -> str:
    return f" [shows: {', '.join(entry['headline'])}]" if entry["headline"] else ""


def _cmd_strategies() -> int:
    return _listing("strategies", _shows)


def _cmd_defenses() -> int:
    return _listing("defenses", _shows)


def _cmd_datasets() -> int:
    _listing("datasets", lambda e: " [bundled]" if e["bundled"] else "")
    print("[bundled]: ships with an installed package and runs offline as is; the others read files you put in "
          "data.data_dir (or $VFL_DATA_DIR): no loader downloads")
    return 0


def _cmd_config_help(args: argparse.Namespace) -> int:
    from simulations.cli.catalog import current
    from vfl.config.fields import help_table
    from vfl.config.run_config import RunConfig

    if args.json:
        import strategies  # noqa: F401
        from vfl.core.plugins import load_plugins
        from vfl.engine.config_schema import registered_schema

        load_plugins()  # plugin strategies and defenses belong in the schema too
        print(json.dumps(registered_schema(), indent=2))
        return 0
    cat = current()
    rows = [tuple(r) for r in help_table(RunConfig) if r[0] != "params"]
    rows += [tuple(r) for r in cat["defense_rows"]]
    if args.strategy:
        if args.strategy not in cat["strategies"]:
            raise ConfigError("--strategy", f"unknown strategy {args.strategy!r}; allowed: "
                              f"{', '.join(sorted(cat['strategies']))}")
        rows = [(k, repr(args.strategy), a, f"{h} (here: --strategy; unset: {d})") if k == "strategy" else (k, d, a, h)
                for k, d, a, h in rows]
        rows += [tuple(r) for r in cat["strategies"][args.strategy]["params"]]
    print(help_columns(rows), end="")
    return 0


def help_columns(rows: Sequence[Sequence[str]], *, widths: Sequence[int] = (28, 14, 34)) -> str:
    """``config-help``'s table: key, default, allowed, help, each column at least as wide as ``widths``
    or its longest cell up to 1.5 times that; a longer cell ends its line and the row goes on below,
    under the next column (so the columns stay aligned)."""
    cols = [max([w] + [len(r[i]) for r in rows if len(r[i]) <= int(w * 1.5)]) for i, w in enumerate(widths)]
    out = []
    for row in rows:
        line = ""
        for i in range(len(cols)):
            start = sum(cols[:i]) + i  # one space between columns
            if len(line) > start:
                out.append(line.rstrip())
                line = ""
            line = line.ljust(start) + row[i]
        start = sum(cols) + len(cols)
        if len(line) > start:
            out.append(line.rstrip())
            line = ""
        out.append((line.ljust(start) + row[-1]).rstrip())
    return "\n".join(out) + "\n"


def _cmd_account(args: argparse.Namespace) -> int:
    import vfl.engine.api

    report = vfl.engine.api.account(mechanism=args.mechanism, b=args.b, beta=args.beta, parties=args.parties,
                             alpha=args.alpha, target_epsilon=args.target_epsilon, epochs=args.epochs,
                             batch=args.batch, dataset_size=args.dataset_size, dim=args.dim, delta=args.delta,
                             c=args.c, c0=args.c0)
    for warning in report.get("warnings", ()):
        log.warning("%s", warning)
    print(json.dumps(report, indent=2))
    return 0


def _dispatch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    if args.command == "run":
        return _cmd_run(args)
    if args.command == "strategies":
        return _cmd_strategies()
    if args.command == "datasets":
        return _cmd_datasets()
    if args.command == "defenses":
        return _cmd_defenses()
    if args.command == "config-help":
        return _cmd_config_help(args)
    if args.command == "account":
        return _cmd_account(args)
    if args.command in ("report", "attack"):
        return _cmd_report(args)
    if args.command == "sweep":
        return cmd_sweep(args)
    if args.command == "generate":
        return cmd_generate(args)
    if args.command == "tiny-lm":
        return cmd_tiny_lm(args)
    if args.command == "verify":
        return cmd_verify(args)
    parser.print_help()
    return EXIT_BAD_INPUT


def cwd_on_path() -> None:
    """The working directory first on ``sys.path``, as ``python -m`` puts it: ``model.bottom:
    my_pkg.models:MyBottom`` imports from the folder the command runs in without ``PYTHONPATH=.``
    (Ray adds the driver's working directory to its actors' path too). ``python -P`` /
    ``PYTHONSAFEPATH`` keep it off."""
    import os

    cwd = os.getcwd()
    if not sys.flags.safe_path and cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def main(argv: Sequence[str] | None = None) -> int:
    cwd_on_path()
    parser = _parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    args.argv = argv
    setup_logging(level_from_flags(log_level=args.log_level, verbose=args.verbose, quiet=args.quiet))
    notify_once()  # the psi extra's protobuf pin, once per environment, on a terminal (docs/install.md)
    with signals.terminate_as_interrupt():
        try:
            with trusting(bool(getattr(args, "trust_code", False))):
                return _dispatch(parser, args)
        except BrokenPipeError:  # e.g. `vfl config-help | head`
            import os

            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
        except BaseException as exc:  # every failure: one `vfl:` line (simulations/cli/failures.py)
            code = failures.report(exc, args)
            if code is None:
                raise
            return code

if __name__ == "__main__":
    sys.exit(main())
