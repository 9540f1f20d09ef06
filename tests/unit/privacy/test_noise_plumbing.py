"""Privacy-noise plumbing: a node's NodeNoise (crypto: its own OS-keyed stream; seeded: the per-round
recipe), ModContext.noise, the reporting fields, the removed privacy.secure_rng key."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import strategies  # noqa: F401
from vfl.core.errors import ConfigError
from vfl.core.rng import NodeNoise, NoiseSource
from vfl.engine.schema import load_run_config
from vfl.privacy.accounting.noise_report import SEEDED_WARNING, noise_fields, seeded_noise_warning
from vfl.privacy.mechanisms.label_dp import keep_probability, randomized_response
from vfl.runtime.mods import ModContext


def _ctx(noise: NodeNoise, *, step: int = 0) -> ModContext:
    return ModContext(party=0, num_parties=2, phase="train", epoch=1, step=step, seed=7, node_noise=noise)


def test_crypto_node_noise_is_its_own_stream_and_unpredictable():
    a, b = NodeNoise("crypto", seed=7, node=1), NodeNoise("crypto", seed=7, node=1)
    assert a.fresh is not None and not a.fresh.reproducible
    assert a.round("pbm", phase="train", epoch=0, step=0) is a.fresh  # one stream per node, continued
    # same seed, node and round: different noise (nobody holding the seed can rebuild it)
    assert not np.array_equal(_ctx(a).noise("ldp").words(16), _ctx(b).noise("ldp").words(16))
    recipe = NoiseSource.for_round("seeded", seed=7, purpose="ldp", node=1, phase="train", epoch=1, step=0)
    assert not np.array_equal(_ctx(a).noise("ldp").words(16), recipe.words(16))


def test_seeded_node_noise_is_the_per_round_recipe():
    n = NodeNoise("seeded", seed=7, node=1)
    assert n.fresh is None
    recipe = NoiseSource.for_round("seeded", seed=7, purpose="ldp", node=1, phase="train", epoch=1, step=3)
    assert np.array_equal(_ctx(n, step=3).noise("ldp").words(16), recipe.words(16))
    # a fresh object (a resumed run) replays the same round; another round or purpose differs
    again = _ctx(NodeNoise("seeded", seed=7, node=1), step=3).noise("ldp").words(16)
    assert np.array_equal(again, NoiseSource.for_round("seeded", seed=7, purpose="ldp", node=1, phase="train",
                                                       epoch=1, step=3).words(16))
    assert not np.array_equal(_ctx(n, step=4).noise("ldp").words(16), again)
    assert not np.array_equal(_ctx(n, step=3).noise("pbm").words(16), again)


def test_node_noise_refuses_pickling_and_bad_modes():
    with pytest.raises(TypeError, match="secret key"):
        pickle.dumps(NodeNoise("crypto", seed=0, node=1))
    with pytest.raises(TypeError, match="secret key"):
        pickle.dumps(_ctx(NodeNoise("crypto", seed=0, node=1)))  # nor a context carrying it
    with pytest.raises(ConfigError, match="privacy.noise_rng"):
        NodeNoise("os", seed=0, node=1)


def test_randomized_response_draws_its_coins_from_the_source():
    y = np.arange(2000) % 3
    a = randomized_response(y, num_classes=3, epsilon=1.0, noise=NoiseSource.seeded("rr", 1))
    b = randomized_response(y, num_classes=3, epsilon=1.0, noise=NoiseSource.seeded("rr", 1))
    c = randomized_response(y, num_classes=3, epsilon=1.0, noise=NoiseSource.fresh())
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert float((a == y).mean()) == pytest.approx(keep_probability(epsilon=1.0, num_classes=3), abs=0.04)


def test_noise_fields_and_the_warning_line():
    assert noise_fields("crypto", accounted=False) == {"noise_rng": "crypto"}
    alone = "server alone (no party colludes)"
    assert noise_fields("crypto", accounted=True) == {"noise_rng": "crypto", "epsilon_is_guarantee": True,
                                                      "epsilon_assumption": alone}
    assert noise_fields("seeded", accounted=True) == {"noise_rng": "seeded", "epsilon_is_guarantee": False,
                                                      "epsilon_assumption": alone}
    caveat = noise_fields("crypto", accounted=True, caveats=["float noise"], colluders=2)
    assert caveat["epsilon_is_guarantee"] is False and caveat["epsilon_not_exact"] == ["float noise"]
    assert caveat["epsilon_assumption"] == "server + up to 2 colluding parties"
    more = noise_fields("crypto", accounted=True, assumptions=["the server keeps X"])
    assert more["epsilon_assumption"] == f"{alone}; the server keeps X"
    assert seeded_noise_warning({"noise_rng": "seeded", "epsilon": 3.0}) == SEEDED_WARNING
    assert seeded_noise_warning({"noise_rng": "seeded"}) is None  # nothing accounted: nothing to warn about
    assert seeded_noise_warning({"noise_rng": "crypto", "epsilon": 3.0}) is None
    assert "\n" not in SEEDED_WARNING and SEEDED_WARNING.startswith("vfl: warning: privacy.noise_rng=seeded")


def test_noise_rng_config_and_the_removed_secure_rng_key():
    assert load_run_config({}).privacy.noise_rng == "crypto"
    assert load_run_config({"privacy": {"noise_rng": "seeded"}}).privacy.noise_rng == "seeded"
    with pytest.raises(ConfigError) as info:
        load_run_config({"privacy": {"noise_rng": "os"}})
    assert info.value.key == "privacy.noise_rng"
    with pytest.raises(ConfigError) as info:
        load_run_config({"privacy": {"secure_rng": True}})
    assert info.value.key == "privacy.secure_rng"
    assert "unknown key" in str(info.value) and "privacy.noise_rng" in str(info.value)


def test_gaussian_mod_noise_depends_on_the_mode():
    """The LDP mod: crypto parties never repeat their noise; seeded ones repeat per round."""
    from parties.mods import gaussian_mod
    from vfl.runtime import message as wire

    def send(noise: NodeNoise) -> np.ndarray:
        m = wire.make("train.forward", src=1, dst=0, round=wire.round_tag(1, 0),
                      content=wire.records(emb=wire.arrays(e=np.zeros((4, 3), np.float32))))
        return wire.get_array(gaussian_mod(sigma=1.0)(m, _ctx(noise)), "emb", "e")

    assert np.array_equal(send(NodeNoise("seeded", seed=7, node=1)), send(NodeNoise("seeded", seed=7, node=1)))
    assert not np.array_equal(send(NodeNoise("crypto", seed=7, node=1)), send(NodeNoise("crypto", seed=7, node=1)))


def test_semi_honest_secagg_says_what_its_epsilon_assumes_of_the_server():
    """The default SecAgg mode answers split survivor views (0 inputs open) but does not detect them: a lying
    server can learn sums of fewer parties than the accountant counted, so the printed ε says it assumes the
    survivor protocol is kept; every SecAgg mode says how many colluders it tolerates (privacy.colluders, else
    t - 1); no SecAgg adds nothing."""
    from vfl.engine.schema import load_run_config
    from vfl.engine.strategy import STRATEGIES

    def assumptions(**params):
        cfg = load_run_config({"num_parties": 4, "strategy": "pbm", "params": {"b": 8, **params}})
        return STRATEGIES.get("pbm")(cfg).epsilon_assumptions()

    line, held = assumptions()  # M = 4, t = 2: undeclared colluders are t - 1 = 1, so sets of >= 3 parties
    assert "semi-honest" in line and ">= 3 parties, at least 2 of them honest" in line
    assert held == ("SecAgg opens no single input to the server with up to 1 colluding party (privacy.colluders "
                    "undeclared: t - 1, t = 2; each party reveals nothing for fewer than 3 parties)")
    assert assumptions(secagg_mode="malicious") == [held] and assumptions(secagg=False) == []
    cfg = load_run_config({"num_parties": 4, "strategy": "pbm", "params": {"b": 8}, "privacy": {"colluders": 0}})
    assert STRATEGIES.get("pbm")(cfg).epsilon_assumptions()[1].startswith(  # declared fewer: the guarantee shrinks
        "SecAgg opens no single input to the server with up to 0 colluding parties (privacy.colluders, t = 2; "
        "each party reveals nothing for fewer than 2 parties)")
