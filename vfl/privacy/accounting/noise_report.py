"""What a run reports about its noise randomness (``privacy.noise_rng``) next to its ε.

With ``crypto`` the noise comes from keystreams keyed by OS entropy inside each noising node,
so the reported ε is a guarantee against every other node. With ``seeded`` anyone holding the
run seed (the server included) can regenerate the noise, so ε is then NOT a guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

SEEDED_WARNING = ("vfl: warning: privacy.noise_rng=seeded: the noise is reproducible from the run seed, "
                  "so the reported epsilon is not a privacy guarantee")


DPSGD_CAVEAT = ("privacy.bottom_dp: the DP-SGD noise is a float Gaussian (Box-Muller in float64, cast to "
                "float32), not exact in floating point (Mironov, CCS 2012)")


def epsilon_assumption(colluders: int) -> str:
    """Who the printed ε is against: the server alone, or the server with up to c colluding parties."""
    return "server alone (no party colludes)" if colluders == 0 else f"server + up to {colluders} colluding parties"


def noise_fields(noise_rng: str, *, accounted: bool, caveats: Sequence[str] = (),
                 colluders: int = 0, assumptions: Sequence[str] = ()) -> dict[str, Any]:
    """``noise_rng`` always; with an ε also ``epsilon_is_guarantee`` (crypto noise and no caveat),
    ``epsilon_assumption`` and, when some noise is not exact in floating point, ``epsilon_not_exact``."""
    out: dict[str, Any] = {"noise_rng": noise_rng}
    if accounted:
        out["epsilon_is_guarantee"] = noise_rng == "crypto" and not caveats
        out["epsilon_assumption"] = "; ".join([epsilon_assumption(colluders), *assumptions])
        if caveats:
            out["epsilon_not_exact"] = list(caveats)
    return out


def seeded_noise_warning(summary: Mapping[str, Any]) -> str | None:
    """The one warning line for a run that reports an ε computed over seeded noise (else None)."""
    if summary.get("noise_rng") == "seeded" and summary.get("epsilon") is not None:
        return SEEDED_WARNING
    return None
