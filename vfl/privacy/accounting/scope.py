"""What a reported ε protects (``epsilon_scope``), derived from the kinds of events composed.

Neighbours (feature privacy, PBM-VFL paper §4): ONE party's features of ONE sample x_i change.
- Release events only (PBM, Gaussian LDP): ε bounds what the noisy releases of x_i's embedding
  reveal, composed over its epochs × P coordinates (the paper's Theorem 6.1 accounting). It is
  NOT end-to-end: the bottom model trains on raw x_i without noise, so later releases of OTHER
  samples, and the final model, depend on x_i through parameters nobody accounted for.
- Release events + DP-SGD events of the bottom model (``privacy.bottom_dp``): the parameters are
  DP too, later releases of other samples are post-processing of them, and the composition of
  both curves is one end-to-end ε for every message the other nodes see and the final models.
- Trees (``LabelGaussianEvent``; neighbours change one training row's label): every boosting round's
  gradients get discrete Gaussian noise at the label holder before encryption, so what the passive parties
  see (instance spaces, split decisions, ciphertexts) is post-processing: label privacy towards them.
- Split LLMs (``LoraDPSGDEvent``; neighbours replace one training example): DP-SGD of the client's
  adapters + head covers every adapter a model server receives and the final model; the servers
  also receive the inputs (in clear) and cotangent pieces, which no ε here covers.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from vfl.privacy.accounting.events import (
    DPSGDEvent,
    GaussianEvent,
    LabelGaussianEvent,
    LoraDPSGDEvent,
    PBMEvent,
    PrivacyEvent,
)

SCOPE_PBM = "per-release feature privacy (PBM-VFL Thm 6.1)"
SCOPE_GAUSSIAN = "per-release feature privacy (Gaussian LDP of each party's embedding, PBM-VFL LDP baseline)"
SCOPE_END_TO_END = "end-to-end"
SCOPE_DPSGD_ONLY = "bottom-model DP-SGD only (embedding releases not accounted)"
SCOPE_LLM_DPSGD = ("split-LLM client DP-SGD (adapters + head, example-level): the adapters every model server "
                   "receives and the final model; the inputs and cotangent pieces the servers receive are not accounted")
SCOPE_TREES_LABEL = ("label privacy against the passive parties: instance spaces, split decisions and ciphertexts "
                     "(one training row's label; every boosting round's gradients under exact discrete Gaussian noise)")
_RELEASE_LABELS = {PBMEvent: "PBM-VFL Thm 6.1", GaussianEvent: "Gaussian LDP of each party's embedding"}


def epsilon_scope(events: Iterable[PrivacyEvent]) -> str:
    """The scope string of an ε composed from ``events`` (empty string for no events).

    "end-to-end" needs both the bottom model's DP-SGD and the releases of the embeddings; the
    config refuses ``privacy.bottom_dp`` for strategies whose releases are not DP (npq...).
    """
    kinds = {type(e) for e in events}
    if LabelGaussianEvent in kinds:  # trees: the only accounted release is the labels' (label privacy)
        return SCOPE_TREES_LABEL
    if LoraDPSGDEvent in kinds:  # split LLMs: the only accounted mechanism is the client's DP-SGD
        return SCOPE_LLM_DPSGD
    releases = [k for k in (PBMEvent, GaussianEvent) if k in kinds]
    if DPSGDEvent in kinds:
        return SCOPE_END_TO_END if releases else SCOPE_DPSGD_ONLY
    if releases == [PBMEvent]:
        return SCOPE_PBM
    if releases == [GaussianEvent]:
        return SCOPE_GAUSSIAN
    if releases:
        return "per-release feature privacy (" + " + ".join(_RELEASE_LABELS[k] for k in releases) + ")"
    return ""


def bottom_dp_events(bottom_dp: Any) -> list[DPSGDEvent]:
    """The DP-SGD event of one epoch for ``privacy.bottom_dp`` (none when it is off).

    Each training sample sits in exactly one step per epoch (fixed, public batch schedule), and
    neighbours change one party's features, so ONE Gaussian step per epoch touches x_i; every
    other party's update uses x_i only through the server's gradient, itself a post-processing of
    DP releases. The server's gradient for x_i is an adaptive input: adaptive composition covers it.
    """
    if bottom_dp is None:
        return []
    return [DPSGDEvent(noise_multiplier=float(bottom_dp.noise_multiplier),
                       max_grad_norm=float(bottom_dp.max_grad_norm), count=1)]


def honest_binomials(*, summed: int, colluders: int, threshold: int | None) -> int:
    """How many parties' noise protects a PBM sum against the server and ``colluders`` parties.

    The colluders hand the server their inputs and their binomial draws, so it subtracts them from
    the unmasked sum: only the other ``summed − colluders`` parties' binomials remain (at least 1,
    the party whose features changed, which is honest by assumption). ``threshold`` is the SecAgg
    Shamir threshold t (None: no SecAgg, each party's counts are seen alone): t colluders hold t
    shares of every honest party's pairwise and self-mask keys and unmask its counts alone.
    """
    if threshold is None or colluders >= threshold:
        return 1
    return max(1, summed - colluders)


def bottom_dp_run_events(bottom_dp: Any, *, epochs: int) -> list[DPSGDEvent]:
    """The DP-SGD events of a whole run of ``epochs`` epochs (what calibration composes with)."""
    return [dataclasses.replace(e, count=epochs) for e in bottom_dp_events(bottom_dp)]
