"""A user's own folder: ``my_pkg/models.py`` beside where ``vfl`` runs, nothing on ``PYTHONPATH`` for it.

``vfl`` is started as its console script is (a script in another folder: ``sys.path[0]`` is that
folder, not the working directory), so only the CLI's own handling puts the working directory on
the path; ``python -m`` or ``python -c`` would add it themselves and prove nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MODELS = '''
from math import prod

from torch import nn


def MyBottom(*, input_shape, embed_dim):
    return nn.Sequential(nn.Flatten(), nn.Linear(prod(input_shape), 8), nn.ReLU(), nn.Linear(8, embed_dim))
'''
LAUNCHER = "import sys\nfrom simulations.cli.main import main\nsys.exit(main())\n"  # what pip's console script does


def own_folder(tmp: Path) -> tuple[Path, Path]:
    """(the user's folder holding ``my_pkg/models.py``, a ``vfl`` launcher script in another folder)."""
    work, bin_dir = tmp / "work", tmp / "bin"
    (work / "my_pkg").mkdir(parents=True)
    (work / "my_pkg" / "__init__.py").write_text("")
    (work / "my_pkg" / "models.py").write_text(MODELS)
    bin_dir.mkdir()
    (bin_dir / "vfl").write_text(LAUNCHER)
    return work, bin_dir / "vfl"


def run_vfl(launcher: Path, *args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``vfl ARGS`` in ``cwd`` with only the repository on ``PYTHONPATH`` (no ``.``)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    env.update(PYTHONPATH=str(ROOT), RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")
    return subprocess.run([sys.executable, str(launcher), *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)
