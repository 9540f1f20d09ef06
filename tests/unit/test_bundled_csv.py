"""The bundled scikit-learn datasets read straight from their CSVs equal scikit-learn's own loaders."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from simulations.data.packaged import BUNDLED, read_bundled


@pytest.mark.parametrize("name,load", [("digits", "load_digits"), ("breast-cancer", "load_breast_cancer"),
                                       ("wine", "load_wine")])
def test_same_arrays_as_sklearn(name: str, load: str) -> None:
    import sklearn.datasets as skd

    x, y, names = read_bundled(name)
    bunch = getattr(skd, load)()
    assert np.array_equal(x, bunch.data) and x.dtype == np.float64
    assert np.array_equal(y, bunch.target)
    assert names == tuple(str(t) for t in bunch.target_names)
    assert name in BUNDLED


def test_loading_digits_does_not_import_sklearn() -> None:
    """A host actor that loads digits skips scikit-learn's ~1.5 s import (the start-up win)."""
    code = ("import sys; from simulations.data.registry import load_dataset; import simulations.data.packaged; "
            "d = load_dataset('digits', data_dir=None, seed=0); print(d.x_train.shape, 'sklearn' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip().endswith("False"), out
