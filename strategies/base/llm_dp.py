"""``privacy.bottom_dp`` for the split-LLM strategies: DP-SGD of the client's adapters + head.

``DpLoraDriver`` gives a split-LLM driver what the engine asks of a DP strategy: the client node
class (``parties/llm/p3eft/dp_sgd.py:DpLlmClient``), one ``LoraDPSGDEvent`` per epoch for the
accountant (each training example sits in exactly one step of an epoch's fixed, public batch
schedule, so no subsampling amplification), and ``privacy.target_epsilon`` calibration of
``privacy.bottom_dp.noise_multiplier`` on that accountant.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from strategies.base.llm import LlmDriver
from vfl.core.errors import ConfigError
from vfl.engine.schema import RunConfig
from vfl.privacy.accounting.events import LoraDPSGDEvent

DCOR_REFUSAL = ("its distance-correlation term is a statistic of the whole batch, so one example moves every "
                "other example's gradient and per-example clipping bounds nothing; use split-lora")
PSLF_REFUSAL = ("its randomized-response labels carry their own label-DP epsilon (params.epsilon), which this "
                "accountant does not compose with DP-SGD's; use split-lora")


def lora_dp_events(cfg: RunConfig, *, epochs: int = 1) -> list[LoraDPSGDEvent]:
    """The client's DP-SGD events of ``epochs`` epochs (none without ``privacy.bottom_dp``)."""
    dp = cfg.privacy.bottom_dp
    if dp is None:
        return []
    return [LoraDPSGDEvent(noise_multiplier=float(dp.noise_multiplier), max_grad_norm=float(dp.max_grad_norm),
                           count=epochs)]


def check_lora_dp(cfg: RunConfig) -> None:
    """Refuse options whose loss couples the batch's examples (per-example clipping would bound nothing)."""
    if cfg.privacy.bottom_dp is not None and float(getattr(cfg.params, "alpha", 0.0)) > 0:
        raise ConfigError("params.alpha", f"got {cfg.params.alpha}; with privacy.bottom_dp allowed: 0 (the "
                          "adversarial probe is fitted on the whole batch, so one example moves every other "
                          "example's gradient and per-example clipping bounds nothing)")


def calibrate_lora_dp(cfg: RunConfig) -> RunConfig:
    """``cfg`` with the smallest ``privacy.bottom_dp.noise_multiplier`` whose ε after ``train.epochs`` is
    at most ``privacy.target_epsilon`` (the run's own accountant; C stays as given)."""
    from vfl.privacy.accounting.calibrate import calibrate_ldp_sigma

    dp = cfg.privacy.bottom_dp
    if dp is None:
        raise ConfigError("privacy.target_epsilon", f"strategy {cfg.strategy!r} adds noise only with "
                          "privacy.bottom_dp (its noise_multiplier is then calibrated); set privacy.bottom_dp")
    c = float(dp.max_grad_norm)  # a DP-SGD step is a Gaussian of std nm·C over sensitivity 2C
    sigma, _ = calibrate_ldp_sigma(target_epsilon=float(cfg.privacy.target_epsilon or 0), delta=cfg.privacy.delta,
                                   sensitivity=2.0 * c, epochs=cfg.train.epochs)
    calibrated = dataclasses.replace(dp, noise_multiplier=sigma / c)
    return dataclasses.replace(cfg, privacy=dataclasses.replace(cfg.privacy, bottom_dp=calibrated))


class DpLoraDriver(LlmDriver):
    """Split-LLM driver side of ``privacy.bottom_dp`` (the base of ``SplitLlm``)."""

    bottom_dp_refusal: ClassVar[str | None] = None  # supported: the ε is the client's DP-SGD (SCOPE_LLM_DPSGD)
    calibrates_bottom_dp: ClassVar[bool] = True  # privacy.target_epsilon sets privacy.bottom_dp.noise_multiplier

    @classmethod
    def validate_config(cls, cfg: RunConfig) -> None:
        super().validate_config(cfg)
        check_lora_dp(cfg)

    @classmethod
    def calibrate_to_target(cls, cfg: RunConfig) -> RunConfig:
        return calibrate_lora_dp(cfg)

    def privacy_events(self, *, epoch: int) -> list[Any]:
        return list(lora_dp_events(self.cfg))

    def client_class(self) -> tuple[type, dict[str, Any]]:
        """The client node class and its extra keyword arguments (DP-SGD with ``privacy.bottom_dp``)."""
        from parties.llm.p3eft.client import LlmClient

        dp = self.cfg.privacy.bottom_dp
        if dp is None:
            return LlmClient, {}
        from parties.llm.p3eft.dp_sgd import DpLlmClient, DpSgd

        return DpLlmClient, {"dp": DpSgd(noise_multiplier=float(dp.noise_multiplier),
                                         max_grad_norm=float(dp.max_grad_norm))}
