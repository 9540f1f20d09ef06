"""What a run reports about its noise randomness (``privacy.noise_rng``) next to its ε.

With ``crypto`` the noise comes from keystreams keyed by OS entropy inside each noising node,
so the reported ε is a guarantee against every other node. With ``seeded`` anyone holding the
run seed (the server included) can regenerate the noise, so ε is then NOT a guarantee.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SEEDED_WARNING = ("vfl: warning: privacy.noise_rng=seeded: the noise is reproducible from the run seed, "
                  "so the reported epsilon is not a privacy guarantee")


def noise_fields(noise_rng: str, *, accounted: bool) -> dict[str, Any]:
    """``noise_rng`` always; ``epsilon_is_guarantee`` too when an ε is reported."""
    out: dict[str, Any] = {"noise_rng": noise_rng}
    if accounted:
        out["epsilon_is_guarantee"] = noise_rng == "crypto"
    return out


def seeded_noise_warning(summary: Mapping[str, Any]) -> str | None:
    """The one warning line for a run that reports an ε computed over seeded noise (else None)."""
    if summary.get("noise_rng") == "seeded" and summary.get("epsilon") is not None:
        return SEEDED_WARNING
    return None
