"""Defenses: each mechanism against its formula (bounds that can fail), the registry and the config."""

from __future__ import annotations

import math

import numpy as np
import pytest

import strategies  # noqa: F401  (registers strategies and the built-in defenses)
from simulations.cli.main import main
from vfl.core.errors import ConfigError
from vfl.core.rng import NoiseSource
from vfl.engine.schema import load_run_config
from vfl.privacy.defenses import (
    DEFENSES,
    Defense,
    check_defenses,
    label_privacy,
    make_defenses,
    register,
)
from vfl.privacy.mechanisms.label_dp import (
    keep_probability,
    noisy_gradient,
    randomized_response,
    topk_count,
    topk_rows,
)

N = 40_000


def _z_bound(p: float, n: int, z: float = 5.0) -> float:
    """|k/n − p| of a Binomial(n, p) count exceeds this with probability < 1e-6 (z = 5)."""
    return z * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(("epsilon", "k"), [(1.0, 10), (0.5, 2), (3.0, 4)])
def test_rr_keeps_labels_at_the_rate_of_the_formula_and_flips_uniformly(epsilon, k):
    y = np.arange(N) % k
    out = randomized_response(y, num_classes=k, epsilon=epsilon, noise=NoiseSource.fresh())
    p = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    assert keep_probability(epsilon=epsilon, num_classes=k) == pytest.approx(p, rel=1e-12)
    kept = float(np.mean(out == y))
    assert abs(kept - p) < _z_bound(p, N)
    if k > 2:  # the binary formula e^eps/(1+e^eps) would be refused by the same bound
        assert abs(kept - math.exp(epsilon) / (1 + math.exp(epsilon))) > _z_bound(p, N)
    flipped = (out - y) % k  # 1..K-1 for a flip: each shift equally likely
    q = (1 - p) / (k - 1)
    for s in range(1, k):
        assert abs(float(np.mean(flipped == s)) - q) < _z_bound(q, N)
    assert out.min() >= 0 and out.max() < k


def test_rr_is_epsilon_label_dp_empirically():
    """P[o | y] / P[o | y'] ≤ e^ε for every output o (the ratio is exactly e^ε at o = y)."""
    eps, k = 1.0, 3
    a = randomized_response(np.zeros(N, int), num_classes=k, epsilon=eps, noise=NoiseSource.fresh())
    b = randomized_response(np.ones(N, int), num_classes=k, epsilon=eps, noise=NoiseSource.fresh())
    ratio = np.mean(a == 0) / np.mean(b == 0)
    assert abs(ratio - math.exp(eps)) < 0.15


def test_rr_draws_from_the_noise_it_is_given():
    y = np.arange(1000) % 5
    s1 = randomized_response(y, num_classes=5, epsilon=1.0, noise=NoiseSource.seeded("t", 1))
    s2 = randomized_response(y, num_classes=5, epsilon=1.0, noise=NoiseSource.seeded("t", 1))
    c1 = randomized_response(y, num_classes=5, epsilon=1.0, noise=NoiseSource.fresh())
    c2 = randomized_response(y, num_classes=5, epsilon=1.0, noise=NoiseSource.fresh())
    assert np.array_equal(s1, s2) and not np.array_equal(c1, c2)


@pytest.mark.parametrize("mechanism", ["gaussian", "laplace"])
def test_grad_noise_has_the_configured_scale(mechanism):
    g = np.full((400, 100), 0.25, dtype=np.float32)
    scale = 0.03
    z = noisy_gradient(g, mechanism=mechanism, scale=scale, noise=NoiseSource.fresh()).astype(np.float64) - g
    n = z.size
    var = scale**2 if mechanism == "gaussian" else 2 * scale**2
    assert abs(z.mean()) < 5 * math.sqrt(var / n)
    # sample variance of n i.i.d. draws: relative error ~ sqrt((kurtosis - 1)/n) (3 for Gaussian, 6 for Laplace)
    kurt = 3.0 if mechanism == "gaussian" else 6.0
    assert abs(z.var() / var - 1) < 5 * math.sqrt((kurt - 1) / n)
    if mechanism == "laplace":  # E|Z| = b for Laplace(b), sqrt(2/pi)·σ for a Gaussian of the same variance
        assert abs(np.abs(z).mean() / scale - 1) < 0.02


def test_grad_noise_clips_rows_before_the_noise():
    g = np.random.default_rng(0).normal(size=(50, 8)).astype(np.float32) * 10
    out = noisy_gradient(g, mechanism="gaussian", scale=1e-9, noise=NoiseSource.fresh(), max_norm=0.5)
    assert np.linalg.norm(out, axis=1).max() <= 0.5 + 1e-5
    cos = (out * g).sum(1) / np.linalg.norm(out, axis=1) / np.linalg.norm(g, axis=1)
    assert cos.min() > 0.9999  # only rescaled


@pytest.mark.parametrize("keep", [0.1, 0.25, 0.5, 1.0])
def test_topk_keeps_exactly_k_largest_entries_per_row(keep):
    rng = np.random.default_rng(1)
    g = rng.normal(size=(64, 16)).astype(np.float32)
    out = topk_rows(g, keep=keep)
    k = topk_count(dim=16, keep=keep)
    assert k == max(1, round(keep * 16))
    assert ((out != 0).sum(1) == k).all()
    kept = out != 0
    assert np.array_equal(out[kept], g[kept])  # values unchanged
    smallest_kept = np.where(kept, np.abs(g), np.inf).min(1)
    largest_dropped = np.where(kept, -np.inf, np.abs(g)).max(1)
    assert (smallest_kept >= largest_dropped).all()


def _cfg(defenses, strategy="npq", **over):
    return load_run_config({"strategy": strategy, "defenses": defenses, **over})


def test_config_validates_each_entry_with_one_line_errors():
    cfg = _cfg([{"kind": "label_rr", "epsilon": 2}, {"kind": "grad_noise", "scale": 0.01}])
    assert cfg.defenses == ({"kind": "label_rr", "epsilon": 2.0},
                            {"kind": "grad_noise", "scale": 0.01, "mechanism": "gaussian", "max_norm": None})
    cases = [
        ([{"kind": "label_rr", "epsilon": 0}], r"^defenses\[0\]\.epsilon: got 0\.0; allowed: a value in \(0, 50\]$"),
        ([{"kind": "grad_topk", "keep": 1.5}], r"^defenses\[0\]\.keep: got 1\.5; allowed"),
        ([{"kind": "label_rr"}, {"kind": "nope"}], r"^defenses\[1\]\.kind: unknown defense 'nope'; allowed: .*label_rr"),
        ([{"epsilon": 1}], r"^defenses\[0\]\.kind: is required"),
        ([{"kind": "label_rr", "eps": 1}], r"^defenses\[0\]\.eps: unknown key"),
        ([{"kind": "grad_noise", "scale": 0.1, "mechanism": "cauchy"}], r"^defenses\[0\]\.mechanism: got 'cauchy'"),
        ([{"kind": "label_rr"}, {"kind": "label_rr"}], r"^defenses\[1\]\.kind: 'label_rr' is already defenses\[0\]"),
        (["label_rr"], r"^defenses\[0\]: got 'label_rr'; expected a mapping"),
    ]
    for defenses, pattern in cases:
        with pytest.raises(ConfigError, match=pattern) as err:
            _cfg(defenses)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("strategy", ["pbm", "ldp", "npq+secagg"])
def test_defenses_compose_with_every_vertical_strategy(strategy):
    cfg = _cfg([{"kind": "label_rr"}, {"kind": "grad_topk", "keep": 0.5}], strategy=strategy)
    assert [d["kind"] for d in cfg.defenses] == ["label_rr", "grad_topk"]


def test_defenses_are_refused_where_the_strategy_has_no_label_gradient_path():
    with pytest.raises(ConfigError, match=r"^defenses\[0\]\.kind: label_rr acts on the label holder's labels, "
                                          r"which strategy 'p3eft' does not expose") as err:
        _cfg([{"kind": "label_rr"}], strategy="p3eft", num_parties=1, dataset="sst2-tiny")
    assert "\n" not in str(err.value)


def test_label_privacy_reports_the_pure_epsilon_of_the_label_defenses():
    assert label_privacy(()) == {}
    assert label_privacy(({"kind": "grad_topk", "keep": 0.5},)) == {"defenses": ["grad_topk"]}
    out = label_privacy(({"kind": "label_rr", "epsilon": 1.5}, {"kind": "grad_topk", "keep": 0.5}))
    assert out["epsilon_label"] == 1.5 and out["delta_label"] == 0.0 and "label privacy" in out["epsilon_label_scope"]


def test_registry_refuses_duplicates_and_non_defenses():
    with pytest.raises(ValueError, match="already registered"):
        register("label_rr")(type("Again", (Defense,), {"site": "labels"}))
    with pytest.raises(TypeError, match="Defense subclass"):
        register("not_a_defense")(object)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="site must be one of"):
        register("nowhere")(type("Nowhere", (Defense,), {"site": "forward-magic"}))
    assert "nowhere" not in DEFENSES and "not_a_defense" not in DEFENSES


PLUGIN = '''
import numpy as np
from vfl.privacy.defenses import Defense, register

def register_all():
    @register("zero_grad_test")
    class ZeroGrad(Defense):
        """Sends zeros instead of the gradient (test plugin)."""
        site = "gradient"
        def mod(self):
            from parties.defenses import gradient_mod
            return gradient_mod(lambda g, noise: np.zeros_like(g), "zero")
'''


def test_a_third_party_package_registers_a_defense(tmp_path, monkeypatch, capsys):
    from vfl.core import plugins

    (tmp_path / "vfl_defense_plugin.py").write_text(PLUGIN)
    info = tmp_path / "vfl_defense_plugin-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vfl_defense_plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[vfl.plugins]\nvfl_defense_plugin = vfl_defense_plugin:register_all\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        cfg = _cfg([{"kind": "zero_grad_test"}])  # unknown kind: the plugins are loaded, then it validates
        (d,) = make_defenses(cfg.defenses)
        assert d.site == "gradient" and d.label_epsilon() is None
        assert main(["defenses"]) == 0
        assert "zero_grad_test  Sends zeros instead of the gradient (test plugin)." in capsys.readouterr().out
    finally:
        DEFENSES._items.pop("zero_grad_test", None)
        DEFENSES._help.pop("zero_grad_test", None)
        plugins._loaded.pop("vfl_defense_plugin", None)


def test_cli_lists_defenses_and_their_keys(capsys):
    assert main(["defenses"]) == 0
    out = capsys.readouterr().out
    for name in ("label_rr", "grad_noise", "grad_topk"):
        assert any(line.startswith(name) and len(line.split()) > 2 for line in out.splitlines())
    assert main(["config-help"]) == 0
    out = capsys.readouterr().out
    assert "defenses[kind=label_rr].epsilon" in out and "defenses[kind=grad_topk].keep" in out


def test_check_defenses_is_what_load_run_config_runs():
    cfg = _cfg([])
    assert cfg.defenses == () and check_defenses(cfg, type(None)) == ()
