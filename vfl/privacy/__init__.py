"""Privacy mechanisms and accounting: PBM / LDP mechanisms, exact PBM RDP, the paper's formulas,
privacy events and the RDP accountant (pure, typed; no Ray / flwr)."""

from vfl.privacy.accounting.accountant import (
    DEFAULT_ORDERS,
    Accountant,
    epsilon_from_rdp,
    event_rdp,
    gaussian_rdp,
)
from vfl.privacy.accounting.events import (
    DPSGDEvent,
    GaussianEvent,
    PBMEvent,
    PrivacyEvent,
    event_from_dict,
    event_to_dict,
)
from vfl.privacy.accounting.pbm_rdp import (
    log_convolve_concave,
    pbm_pure_dp,
    pbm_rdp,
    pbm_rdp_bruteforce,
    pbm_rdp_cap,
    pbm_rdp_profile,
    renyi_divergence,
)
from vfl.privacy.accounting.report import account_report
from vfl.privacy.accounting.scope import (
    SCOPE_END_TO_END,
    SCOPE_GAUSSIAN,
    SCOPE_PBM,
    bottom_dp_events,
    epsilon_scope,
    honest_binomials,
)
from vfl.privacy.accounting.theorems import (
    gaussian_style_estimate,
    sample_privacy_factor,
    theorem_6_1_final,
    theorem_6_1_per_iteration,
    theorem_6_2_sample,
)
from vfl.privacy.mechanisms.gaussian import (
    discrete_gaussian_perturb,
    gaussian_perturb,
    ldp_grid,
    ldp_sigma,
)
from vfl.privacy.mechanisms.pbm import (
    pbm_conditional_variance,
    pbm_decode,
    pbm_encode,
    pbm_variance,
    validate_pbm,
)

__all__ = [
    "DEFAULT_ORDERS", "SCOPE_END_TO_END", "SCOPE_GAUSSIAN", "SCOPE_PBM", "Accountant", "DPSGDEvent",
    "GaussianEvent", "PBMEvent", "PrivacyEvent", "account_report", "bottom_dp_events", "discrete_gaussian_perturb",
    "epsilon_from_rdp", "honest_binomials", "ldp_grid",
    "epsilon_scope", "event_from_dict", "event_rdp", "event_to_dict", "gaussian_perturb", "gaussian_rdp",
    "gaussian_style_estimate", "ldp_sigma", "log_convolve_concave", "pbm_conditional_variance", "pbm_decode",
    "pbm_encode", "pbm_pure_dp", "pbm_rdp", "pbm_rdp_bruteforce", "pbm_rdp_cap", "pbm_rdp_profile",
    "pbm_variance", "renyi_divergence", "sample_privacy_factor", "theorem_6_1_final",
    "theorem_6_1_per_iteration", "theorem_6_2_sample", "validate_pbm",
]
