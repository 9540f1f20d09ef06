"""P3EFT (Zmushko et al., "Label Privacy in Split Learning for Large Models with Parameter-Efficient
Training", ICLR 2025): label-private split fine-tuning with LoRA over an API.

The client trains n adapter sets mixed by frozen random weights W (Σ_i W_i = 1), penalizes each
set's activations with an adversarial logistic-regression probe (α·reg), and computes every
adapter gradient with private_backprop: g_h is split into m random pieces with secret
coefficients, each piece goes to a different server (m = 2 with two non-colluding servers;
m = 0 means one piece per example, m = B, for a single server). Gradients are recovered
exactly, so training follows the same loss as without the obfuscation. Every server also gets the
adapters θ every step, and two states give g_h back by least squares (the θ-difference attack of
§3.3, measured as ``leak_theta``): ``theta_noise`` perturbs the adapters sent (closes it);
``rotate_servers`` keeps servers off consecutive steps (the paper's other remedy; not enough alone).
"""

from __future__ import annotations

from dataclasses import dataclass

from parties.llm.p3eft.client import Recipe
from parties.llm.p3eft.private_backprop import PER_EXAMPLE
from strategies.base.split_llm import SplitLlm, SplitLoraParams
from vfl.config.fields import param
from vfl.core.errors import ConfigError
from vfl.core.logs import get_logger
from vfl.data.dataset import DataSource
from vfl.engine.schema import RunConfig
from vfl.engine.strategy import register


@dataclass(frozen=True)
class P3eftParams(SplitLoraParams):
    servers: int = param(2, ge=1, le=8, help="model servers; pieces of one g_h go to different servers")
    n_adapters: int = param(2, ge=1, le=16, help="n adapter sets mixed by the frozen weights W")
    m: int = param(2, ge=0, le=64, help="pieces per private backprop: >= 2 random pieces over the servers, "
                   "0 = one piece per example (m = B, for a single server); 1 is plain backprop (refused)")
    alpha: float = param(3.16, ge=0, help="weight α of the adversarial regularizer (paper grid 10^(k/2); "
                         "10^(1/2) as for DeBERTa on SST-2, also the best trade-off for MiniLM on rt-polarity)")
    xi_scale: float = param(0.0, ge=-8, le=8, help="s: mixing noise ξ ~ N(0, 1)·10^(s/2)")
    grad_noise: float = param(30.0, gt=0, le=1e4, help="std of the random pieces / rms(g_h) (m >= 2)")
    probe_l2: float = param(0.1, ge=0, help="L2 of the per-batch logistic-regression probe (on standardized h)")
    probe_steps: int = param(20, ge=1, le=1000, help="L-BFGS iterations of the probe fit")
    rotate_servers: bool = param(False, help="alternate two server groups (even/odd server ids) step by step, so "
                                 "no server receives the adapters of two consecutive steps (P3EFT §3.3's defence "
                                 "against the θ-difference attack); needs servers >= 4 with m >= 2, >= 2 with m = 0")
    theta_noise: float = param(0.0, ge=0, le=10, help="std σ of fresh Gaussian noise added to every adapter tensor "
                               "sent in training (P3EFT §3.3's noise on parameters: the server's θ-difference "
                               "reads −lr·g_θ + z' − z); the forward and gradient are at θ + z; 0 = off")


@register
class P3eft(SplitLlm):
    """P3EFT: mixture of adapters + adversarial regularizer + private_backprop over S servers."""

    name = "p3eft"
    summary = "P3EFT label-private split LoRA: n mixed adapter sets, adversarial probe, private_backprop (m pieces)"
    Params = P3eftParams

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        super().validate_config(cfg)
        p, batch = cfg.params, cfg.train.batch_size
        if p.m == 1:
            raise ConfigError("params.m", "got 1; one piece is g_h itself (plain backprop, use split-lora); "
                              "allowed: 0 (one piece per example) or >= 2")
        need = 1 if p.m == PER_EXAMPLE else 2  # servers per step: m >= 2 pieces go to >= 2 different servers
        if p.rotate_servers and p.servers < 2 * need:
            raise ConfigError("params.rotate_servers", f"needs two groups of {need} server(s) (servers >= {2 * need} "
                              f"with m = {p.m}); got servers = {p.servers}")
        if p.servers == 1 and p.m != PER_EXAMPLE and p.m < batch:
            raise ConfigError("params.m", f"got {p.m} with one server: it would receive all pieces and could "
                              f"recover g_h for batches of {batch}; use m=0 (one piece per example) or servers >= 2")

    def prepare(self, data: DataSource) -> None:
        """Also: m = B (one piece per example) only where its proof holds. Each piece is one example's
        unit g_h direction with a secret sign; for binary labels without the regularizer every
        direction is ±(w₁ − w₀) and hides the label, but for K > 2 classes the directions form K
        sign-free clusters, one per label (``llm_leak.sign_invariant_label_attack``: 1.00 on 3-4
        classes, tests/unit/llm/test_p3eft_m_equals_b.py), so that case is refused; binary labels with
        the adversarial regularizer on (outside the proof, no attack shown here) are warned about."""
        super().prepare(data)
        p, classes = self.params, self._sizes[2]
        if p.m != PER_EXAMPLE:
            return
        if classes > 2:
            raise ConfigError("params.m", f"got 0 (m = B) with {classes} classes: each piece shows one example's "
                              "gradient direction up to sign, which clusters by label for more than 2 classes; "
                              "allowed with m = 0: binary labels only (else use servers >= 2 and m >= 2)")
        if p.alpha > 0:
            get_logger(__name__).warning("p3eft: m = 0 (m = B) is proven label-private for binary labels without "
                                         "the regularizer; params.alpha = %s adds it (set alpha: 0 for the "
                                         "proof's setting)", p.alpha)

    def recipe(self) -> Recipe:
        p = self.params
        return Recipe(adapters=p.n_adapters, m=p.m, grad_noise=p.grad_noise, xi_scale=p.xi_scale,
                      reg="adversarial", reg_weight=p.alpha, probe_l2=p.probe_l2, probe_steps=p.probe_steps,
                      rotate=p.rotate_servers, theta_noise=p.theta_noise)
