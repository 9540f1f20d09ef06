"""`vfl strategies`, `defenses`, `datasets` and `config-help` answer without importing torch (they read
simulations/cli/catalog.json): a fresh interpreter runs each and reports the heavy packages it loaded.
The control: building the catalog live (what the listings did before) does import torch."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("torch", "transformers", "numpy", "scipy", "ray", "flwr")
PROBE = """
import contextlib, io, json, sys
from simulations.cli.main import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    code = {call}
print(json.dumps({{"code": code, "lines": len(out.getvalue().splitlines()),
                  "heavy": [m for m in {heavy!r} if m in sys.modules]}}))
"""


def _probe(call: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", PROBE.format(call=call, heavy=HEAVY)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv", [["strategies"], ["defenses"], ["datasets"], ["config-help"],
                                  ["config-help", "--strategy", "pbm"]])
def test_listing_imports_no_torch(argv) -> None:
    got = _probe(f"main({argv!r})")
    assert got["code"] == 0 and got["lines"] >= 10 and got["heavy"] == [], got


def test_control_the_live_registries_import_torch() -> None:
    got = _probe("(__import__('simulations.cli.catalog').cli.catalog.build(), 0)[1]")
    assert "torch" in got["heavy"], got
