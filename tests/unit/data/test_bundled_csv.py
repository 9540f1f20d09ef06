"""The bundled scikit-learn datasets read straight from their CSVs equal scikit-learn's own loaders."""

from __future__ import annotations

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


