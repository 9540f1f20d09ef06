"""A note ``vfl`` prints once about its environment: the ``psi`` extra's protobuf pin (docs/install.md,
"The psi extra and protobuf").

openmined-psi 2.0.6 (the ``psi`` extra) requires ``protobuf==6.30.2``; pip then holds protobuf there
instead of the newest release flwr accepts, and takes the older ``grpcio-health-checking`` (a dependency
of flwr) that accepts 6.30. Nothing in vfl needs the newer ones; a user who saw pip downgrade them is told
once, on a terminal (stderr), that this is expected. "Once" is kept by a marker named after the versions
in ``$VFL_CACHE_DIR`` (default ``~/.cache/vfl``) under ``notices/``: a new pin or protobuf tells again.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path
from typing import TextIO

PSI = "openmined-psi"


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def psi_protobuf_pin() -> dict[str, str] | None:
    """{psi, protobuf, grpcio_health_checking} when the installed protobuf is the one the psi extra pins
    (the state pip leaves after ``pip install '.[psi]'``); None otherwise (no psi, or protobuf elsewhere)."""
    psi = _version(PSI)
    if psi is None:
        return None
    pins = [r.split(";")[0].replace(" ", "") for r in metadata.requires(PSI) or []]
    pinned = next((r.split("==", 1)[1] for r in pins if r.startswith("protobuf==")), None)
    protobuf = _version("protobuf")
    if pinned is None or protobuf != pinned:
        return None
    return {"psi": psi, "protobuf": protobuf, "grpcio_health_checking": _version("grpcio-health-checking") or "none"}


def psi_protobuf_text(state: dict[str, str]) -> str:
    return (f"vfl: note: the psi extra (openmined-psi {state['psi']}) pins protobuf=={state['protobuf']}, so pip "
            f"keeps protobuf at {state['protobuf']} and flwr's grpcio-health-checking at "
            f"{state['grpcio_health_checking']} (the newest that accepts it) instead of newer releases. Expected; vfl "
            "needs neither newer one (docs/install.md, 'The psi extra and protobuf'). Shown once.")


def _marker(state: dict[str, str]) -> Path:
    base = os.environ.get("VFL_CACHE_DIR") or str(Path.home() / ".cache" / "vfl")
    return Path(base) / "notices" / f"psi-protobuf-{state['psi']}-{state['protobuf']}-{state['grpcio_health_checking']}"


def notify_once(stream: TextIO | None = None) -> bool:
    """Print the psi/protobuf note to ``stream`` (stderr) if it is a terminal, the state holds and this
    environment was not told yet; True when printed."""
    out = stream if stream is not None else sys.stderr
    if not getattr(out, "isatty", lambda: False)():
        return False
    state = psi_protobuf_pin()
    if state is None:
        return False
    marker = _marker(state)
    if marker.exists():
        return False
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(psi_protobuf_text(state) + "\n")
    except OSError:
        pass  # a read-only home: told on every terminal command rather than never
    print(psi_protobuf_text(state), file=out)
    return True
