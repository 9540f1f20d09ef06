"""``vfl verify RUN_DIR``: a reader checks every ε a run printed, from its privacy ledger and config alone.

Recomputes ``epsilon``, ``epsilon_label``, ``party_epsilon_worst_case`` and each metrics row's ε by the
verifier's own path (``vfl/privacy/verify/``: dp_accounting's events, the PBM RDP formula written again),
checks the ledger's hash chain, the config's digest and the checkpoints' digests, prints one row per
number (printed, recomputed) and exits 0 only when all agree (1 otherwise; 2: not a run directory or
bundle). ``--bundle OUT.zip`` packs what a reader needs (config, ledger, summary, metrics, checkpoint
manifests and engine.json: no data, no weights); ``vfl verify OUT.zip`` checks it elsewhere.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import zipfile
from pathlib import Path
from typing import Any

from vfl.core.errors import ConfigError

SMALL = ("config.resolved.yaml", "privacy_ledger.jsonl", "summary.json", "metrics.jsonl")
BUNDLED_CKPT = ("manifest.json", "engine.json")  # per checkpoint: digests and the engine's record, no weights
MAX_MEMBER = 256 << 20  # a bundle member larger than this is not one vfl wrote


def add_verify_parser(sub: Any) -> None:
    v = sub.add_parser("verify", help="check a run: recompute every printed epsilon from its privacy ledger and "
                       "config, its hash chain and digests (exit 0 only when all agree)",
                       description="Recompute every epsilon RUN_DIR printed from its privacy ledger and resolved "
                       "config by a path separate from training, and check the ledger's hash chain, the config's "
                       "digest and the checkpoints' digests.")
    v.add_argument("run", metavar="RUN_DIR", help="a run directory, or a bundle written by --bundle")
    v.add_argument("--bundle", metavar="OUT.zip", help="also write what a reader needs to verify elsewhere "
                   "(config, ledger, summary, metrics, checkpoint manifests; no data, no weights)")
    v.add_argument("--trust-code", action="store_true", help="import the code a run directory's config names even "
                   "if you did not create that directory here (vfl.engine.trust)")


def _digest_file(path: Path) -> Any:
    from vfl.privacy.verify.check import Digest

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return Digest(path.stat().st_size, h.hexdigest())


def read_run(source: str | Path) -> dict[str, Any]:
    """The files ``vfl verify`` reads, by their path in the run directory, from a directory or a bundle."""
    p = Path(source)
    if p.is_file() and zipfile.is_zipfile(p):
        return _read_bundle(p)
    if not p.is_dir():
        raise ConfigError("RUN_DIR", f"{p} is neither a run directory nor a bundle written by `vfl verify --bundle`")
    if not (p / "config.resolved.yaml").is_file():
        raise ConfigError("RUN_DIR", f"{p} is not a run directory (no config.resolved.yaml)")
    files: dict[str, Any] = {n: (p / n).read_bytes() for n in SMALL if (p / n).is_file()}
    for folder in sorted((p / "checkpoints").glob("epoch_*")):
        for f in sorted(folder.iterdir()):
            if f.is_file():
                key = f"checkpoints/{folder.name}/{f.name}"
                files[key] = f.read_bytes() if f.name in BUNDLED_CKPT else _digest_file(f)
    return files


def _read_bundle(path: Path) -> dict[str, Any]:
    files: dict[str, Any] = {}
    with zipfile.ZipFile(path) as z:
        for info in z.infolist():
            name = info.filename
            parts = name.split("/")
            known = name in SMALL or (len(parts) == 3 and parts[0] == "checkpoints" and parts[1].startswith("epoch_")
                                      and parts[2] in BUNDLED_CKPT)
            if not known:
                continue
            if info.file_size > MAX_MEMBER:
                raise ConfigError("RUN_DIR", f"{path}: {name} is {info.file_size} bytes; not a bundle vfl wrote")
            files[name] = z.read(info)
    if "config.resolved.yaml" not in files:
        raise ConfigError("RUN_DIR", f"{path} is a zip without config.resolved.yaml; not a bundle vfl wrote")
    return files


def write_bundle(files: dict[str, Any], out: Path) -> list[str]:
    """Pack the small files and each checkpoint's manifest and engine.json into ``out`` (written whole)."""
    names = [n for n in files if n in SMALL or (n.startswith("checkpoints/") and n.split("/")[-1] in BUNDLED_CKPT)]
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
            for name in sorted(names):
                z.writestr(name, files[name])
        tmp.replace(out)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError("--bundle", f"cannot write {out}: {exc.strerror or exc}") from None
    return names


def _expected(files: dict[str, Any], source: Path) -> Any:
    """What the resolved config releases, from the strategy it names (the training side's description of its
    mechanism; the ε is computed by the verifier's own path)."""
    from vfl.config.digest import split_config
    from vfl.config.fields import load_yaml
    from vfl.privacy.verify.check import Expected

    try:
        import strategies  # noqa: F401  (registers the built-in strategies)
        from parties.vertical.release_guard import party_release_events, release_cap
        from vfl.core.plugins import load_plugins
        from vfl.engine.resume import pin_calibration
        from vfl.engine.schema import load_run_config
        from vfl.engine.strategy import STRATEGIES
        from vfl.engine.trust import check_code
        from vfl.privacy.accounting.events import event_to_dict

        data = load_yaml(split_config(files["config.resolved.yaml"].decode(errors="replace"))[1])
        check_code(source, data, key="RUN_DIR")  # a bundle is never "created here": code it names needs --trust-code
        load_plugins()
        cfg = load_run_config(pin_calibration(data) or data)  # a calibrated run keeps its params as written
        strategy = STRATEGIES.get(cfg.strategy, "strategy")(cfg)
        terms = strategy.party_terms() if hasattr(strategy, "party_terms") else None
        party = [event_to_dict(e) for e in party_release_events(strategy, terms=terms)]
        return Expected(events=lambda epoch: [event_to_dict(e) for e in strategy.privacy_events(epoch=epoch)],
                        party_events=party or None, party_cap=release_cap(cfg) if party else None)
    except ConfigError as exc:
        if exc.key == "RUN_DIR":  # code named by someone else's config: the user decides (--trust-code)
            raise
        return Expected(why_not=f"config.resolved.yaml does not resolve: {exc}")
    except Exception as exc:  # noqa: BLE001 - any failure to read the config is one line
        return Expected(why_not=f"config.resolved.yaml does not resolve: {type(exc).__name__}: {exc}")


def _cell(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.10g}"
    return "null" if x is None else str(x)


def cmd_verify(args: argparse.Namespace) -> int:
    from vfl.privacy.verify.check import verify_files

    source = Path(args.run)
    files = read_run(source)
    verdict = verify_files(files, expected=_expected(files, source))
    if verdict.legacy is not None:
        print(f"vfl: verify: {source}: {verdict.legacy}", file=sys.stderr)
        return 1
    rows = [("key", "printed", "recomputed", ""), *((r.key, _cell(r.printed), _cell(r.recomputed),
                                                    "ok" if r.ok else "DIFFERS") for r in verdict.rows)]
    widths = [max(len(r[i]) for r in rows) for i in range(3)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r[:3], widths, strict=True)) + "  " + r[3])
    for note in verdict.notes:
        print(f"note: {note}")
    for problem in verdict.problems:
        print(f"DIFFERS: {problem}")
    if args.bundle:
        names = write_bundle(files, Path(args.bundle))
        print(f"bundle: {args.bundle} ({len(names)} files; verify it anywhere with `vfl verify {args.bundle}`)")
    bad = len(verdict.problems) + sum(not r.ok for r in verdict.rows)
    print(f"verified: {source}: every printed epsilon recomputed, the hash chain and the digests agree" if verdict.ok
          else f"NOT verified: {source}: {bad} difference(s)")
    return 0 if verdict.ok else 1
