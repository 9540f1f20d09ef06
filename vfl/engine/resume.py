"""Which config keys a resume may change: only those that do not change what the checkpointed
epochs computed (how long to go on, how often to evaluate, where and how to run).

Anything else - the model, the data split, the mechanism (``params.*``), the seed, the privacy
settings - would make the checkpoint describe a different run (a state_dict that no longer fits,
or an accountant that claims the new ``b`` for the whole run), so it is refused before anything
is written.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vfl.core.errors import ConfigError

SAFE_KEYS = (
    "train.epochs",          # upward only
    "train.eval_every",
    "train.eval_batch_size",
    "train.log_every_steps",  # how the steps' losses are averaged for the plot, not what trained
    "train.checkpoint_every_steps",  # how often the state is saved, not what it computes
    "train.threads_per_actor",
    "train.on_failure",
    "train.max_restarts",
    "data.data_dir",         # the same data, moved
    "tracking",              # where the rows are mirrored, not what they hold
)
SAFE_PREFIXES = ("transport.",)  # where the hosts run, not what they compute


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = f"{prefix}.{k}" if prefix else str(k)
        if isinstance(v, Mapping) and v:
            out.update(_flatten(v, key))
        else:
            out[key] = v
    return out


def is_safe(key: str) -> bool:
    return key in SAFE_KEYS or key.startswith(SAFE_PREFIXES)


def pin_calibration(stored: Mapping[str, Any]) -> dict[str, Any] | None:
    """A run calibrated with ``privacy.target_epsilon`` keeps its mechanism when extended: the stored
    config with the target dropped (its ``params`` already hold the calibrated β/σ), so a resume
    with more ``train.epochs`` runs the same mechanism instead of recalibrating it (which would
    change what the checkpointed epochs computed). None for a run that was not calibrated."""
    privacy = stored.get("privacy")
    if not isinstance(privacy, Mapping) or privacy.get("target_epsilon") is None:
        return None
    return {**stored, "privacy": {**privacy, "target_epsilon": None}}


def check_resume_changes(old: Mapping[str, Any], new: Mapping[str, Any], *, rounds_key: str | None = None
                         ) -> list[str]:
    """The dotted keys that differ between the stored and the requested config; ``ConfigError``
    naming the first key a resume may not change. ``rounds_key``: a strategy's own count of rounds
    (``params.n_estimators``), which like ``train.epochs`` may only go up."""
    a, b = _flatten(old), _flatten(new)
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    allowed = ", ".join(SAFE_KEYS[:1]) + " (upward), " + ", ".join(SAFE_KEYS[1:]) + ", transport.*"
    if rounds_key:
        allowed = f"{rounds_key} (upward), " + allowed
    for key in changed:
        if key == rounds_key:
            if int(b[key]) < int(a[key]):
                raise ConfigError(key, f"got {b[key]}; a resume may only extend the run (it has {key}={a[key]})")
            continue
        if not is_safe(key):
            raise ConfigError(key, f"cannot change on resume (run has {a.get(key)!r}, got {b.get(key)!r}): it "
                              f"changes what the checkpointed epochs computed; start a new run instead. "
                              f"Keys a resume may change: {allowed}")
    if "train.epochs" in changed and int(b["train.epochs"]) < int(a["train.epochs"]):
        raise ConfigError("train.epochs", f"got {b['train.epochs']}; a resume may only extend the run "
                          f"(it has train.epochs={a['train.epochs']})")
    return changed
