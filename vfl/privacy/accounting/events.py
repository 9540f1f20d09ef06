"""Privacy events: what one strategy released, as frozen records the ``Accountant`` composes.

Neighbouring relation (feature privacy, paper §6.1): one party's features of ONE sample change.
VFL gets no subsampling amplification (every party and the server know which sample ids are in
a batch), so ``count`` is simply how many times each sample's embedding was released.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

from vfl.core.errors import ConfigError
from vfl.privacy.mechanisms.pbm import validate_pbm


def _positive_int(key: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ConfigError(key, f"got {value!r}; must be an int >= 1")


def _finite(key: str, value: Any, *, strict: bool) -> None:
    ok = not isinstance(value, bool) and isinstance(value, Real) and math.isfinite(value)
    if not ok or value < 0 or (strict and value == 0):
        raise ConfigError(key, f"got {value!r}; must be a finite number {'>' if strict else '>='} 0")


@dataclass(frozen=True, kw_only=True)
class PBMEvent:
    """``count`` releases of a sample's ``dim`` PBM coordinates, summed over ``num_parties`` by SecAgg.

    ``num_parties`` is the number of binomials in the sum the server sees (1 without SecAgg).
    """

    kind: ClassVar[str] = "pbm"
    b: int
    beta: float
    num_parties: int
    dim: int = 1
    count: int = 1

    def __post_init__(self) -> None:
        validate_pbm(b=self.b, beta=self.beta, c=1.0)
        _positive_int("num_parties", self.num_parties)
        _positive_int("dim", self.dim)
        _positive_int("count", self.count)


@dataclass(frozen=True, kw_only=True)
class GaussianEvent:
    """``count`` releases of a vector + N(0, σ²I) whose L2 sensitivity is ``sensitivity``.

    ``sensitivity`` already covers the whole released vector (2c·sqrt(P) for a P-dim embedding
    in [-c, c]); ``dim`` is informational only. σ = 0 means no noise (infinite RDP).
    """

    kind: ClassVar[str] = "gaussian"
    sigma: float
    sensitivity: float
    dim: int | None = None
    count: int = 1

    def __post_init__(self) -> None:
        _finite("sigma", self.sigma, strict=False)
        _finite("sensitivity", self.sensitivity, strict=True)
        if self.dim is not None:
            _positive_int("dim", self.dim)
        _positive_int("count", self.count)

    @property
    def noise_multiplier(self) -> float:
        """σ / Δ, the quantity the Gaussian RDP α/(2·nm²) depends on."""
        return self.sigma / self.sensitivity


@dataclass(frozen=True, kw_only=True)
class DPSGDEvent:
    """``count`` DP-SGD steps of a party's bottom model, each holding a given sample exactly once.

    One step sums the per-sample gradients clipped to ``max_grad_norm`` and adds
    N(0, (noise_multiplier·max_grad_norm)²I). Neighbours replace one sample's features at one
    party, so the clipped sum moves by at most 2·max_grad_norm (replace-one, not add/remove):
    a Gaussian mechanism with σ = noise_multiplier·C and Δ = 2C, i.e. noise multiplier nm/2.
    No subsampling amplification: the batch schedule is known to every node.
    """

    kind: ClassVar[str] = "dpsgd"
    noise_multiplier: float
    max_grad_norm: float
    count: int = 1

    def __post_init__(self) -> None:
        _finite("noise_multiplier", self.noise_multiplier, strict=True)
        _finite("max_grad_norm", self.max_grad_norm, strict=True)
        _positive_int("count", self.count)

    @property
    def sigma(self) -> float:
        """Std of the noise added to the summed clipped gradients (Opacus' noise_multiplier·C)."""
        return self.noise_multiplier * self.max_grad_norm

    @property
    def sensitivity(self) -> float:
        """L2 sensitivity of the clipped-gradient sum under replace-one: 2·max_grad_norm."""
        return 2.0 * self.max_grad_norm


@dataclass(frozen=True, kw_only=True)
class LoraDPSGDEvent(DPSGDEvent):
    """``count`` DP-SGD steps of a split-LLM client's adapters + head (``privacy.bottom_dp`` on
    split-lora/p3eft/head-only), each holding a given example exactly once. Neighbours replace one
    training example (text and label); same Gaussian as ``DPSGDEvent``, its own ``epsilon_scope``."""

    kind: ClassVar[str] = "dpsgd-lora"


@dataclass(frozen=True, kw_only=True)
class LabelGaussianEvent(GaussianEvent):
    """``count`` releases of every training row's label-dependent vector (a boosting round's gradients,
    ``secureboost``'s ``params.label_dp``) + exact discrete Gaussian noise. Neighbours change ONE row's
    label; ``sensitivity`` is the L2 change of that row's vector; the same Gaussian RDP as
    ``GaussianEvent``, its own ``epsilon_scope`` (label privacy)."""

    kind: ClassVar[str] = "gaussian-label"


PrivacyEvent = PBMEvent | GaussianEvent | DPSGDEvent
EVENT_TYPES: dict[str, type[PBMEvent] | type[GaussianEvent] | type[DPSGDEvent]] = {
    "pbm": PBMEvent, "gaussian": GaussianEvent, "dpsgd": DPSGDEvent, "dpsgd-lora": LoraDPSGDEvent,
    "gaussian-label": LabelGaussianEvent}


def event_to_dict(event: PrivacyEvent) -> dict[str, Any]:
    """JSON-able form of an event, tagged with its ``kind``."""
    return {"kind": event.kind, **asdict(event)}


def event_from_dict(data: dict[str, Any]) -> PrivacyEvent:
    """Inverse of ``event_to_dict``; unknown kinds or fields raise ``ConfigError``."""
    fields = dict(data)
    kind = fields.pop("kind", None)
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ConfigError("accountant.events.kind", f"got {kind!r}; expected one of {sorted(EVENT_TYPES)}")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ConfigError(f"accountant.events.{kind}", str(exc)) from exc
