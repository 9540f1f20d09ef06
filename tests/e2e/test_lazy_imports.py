"""What a host actor imports to build vertical nodes: no scipy or dp_accounting (accounting and audits
run in the driver). Each costs ~70 MiB resident and seconds of start-up in every actor process."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("scipy", "dp_accounting", "transformers", "peft", "opacus", "matplotlib")


def test_host_actor_imports_skip_heavy_packages():
    code = ("import sys, json, vfl.runtime.host, strategies, parties.vertical.party, simulations.data.source; "
            f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
