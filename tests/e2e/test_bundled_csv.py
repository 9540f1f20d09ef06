"""The bundled scikit-learn datasets read straight from their CSVs equal scikit-learn's own loaders: the tests in subprocesses or through the CLI."""

from __future__ import annotations

import subprocess
import sys


def test_loading_digits_does_not_import_sklearn() -> None:
    """A host actor that loads digits skips scikit-learn's ~1.5 s import (the start-up win)."""
    code = ("import sys; from simulations.data.registry import load_dataset; import simulations.data.packaged; "
            "d = load_dataset('digits', data_dir=None, seed=0); print(d.x_train.shape, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False"), out
