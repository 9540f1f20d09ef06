"""One face for extension authors: what docs/writing-a-strategy.md imports comes from ``vfl``: the tests in subprocesses or through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys


def test_import_vfl_loads_no_torch_until_an_export_is_used():
    code = ("import sys, json, vfl; before = 'torch' in sys.modules; vfl.Strategy; "
            "print(json.dumps([before, 'torch' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True]
