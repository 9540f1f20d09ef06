"""Defense plugins: named, validated transforms a node applies to protect what it sends (``defenses:``).

A defense is a class registered by name in ``DEFENSES`` (duplicates refused), like a strategy. It
declares its options (``Params``, a frozen ``vfl.config.fields`` dataclass), the ``site`` it acts on and,
when it has one, the ε it guarantees. The run config lists defenses as
``defenses: [{kind: label_rr, epsilon: 1.0}, ...]``; ``check_defenses`` validates every entry
(``defenses[0].epsilon: got ...; allowed: ...``) and refuses a defense the strategy has no place
for. A third-party package registers its own from its ``vfl.plugins`` entry point::

    from vfl.privacy.defenses import Defense, register

    @register("my_defense")
    class MyDefense(Defense):
        '''One line for `vfl defenses`.'''
        site = "gradient"
        def mod(self): ...

Sites: ``labels`` (the label holder trains on transformed labels), ``gradient`` (a mod on the
gradient message the label holder sends down) and ``forward`` (a loss term each passive party adds
to its bottom's objective, shaping the embedding it sends up) and ``head`` (a layer the label holder puts
between the fused input and its head, e.g. MID's bottleneck). A strategy lists the sites it offers
in ``defense_sites`` (vertical strategies: all four; the LLM strategies: none).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vfl.config.fields import build, help_table, to_dict
from vfl.core.errors import ConfigError
from vfl.core.plugins import load_plugins
from vfl.core.registry import Registry

if TYPE_CHECKING:
    from vfl.core.rng import NoiseSource
    from vfl.runtime.mods import Mod

SITES = ("labels", "gradient", "forward", "head")
KEY = "defenses"
UNDRAWN = -100  # a training label a staged defense has not drawn yet: the head's loss ignores it (ignore_index)


@dataclass(frozen=True)
class NoParams:
    """Defenses without options."""


class Defense:
    """Base class of every defense: options, where it acts, and the label ε it guarantees (if any)."""

    Params: ClassVar[type] = NoParams
    site: ClassVar[str] = "gradient"
    protects: ClassVar[str] = "labels"  # what a curious node learns less of: labels | features
    headline: ClassVar[tuple[str, ...]] = ()
    """Summary/metrics keys of this defense's privacy result (``("epsilon_label",)`` for label DP): shown
    by ``vfl run``'s final line and epoch lines when the defense is on."""

    def __init__(self, params: Any) -> None:
        self.params = params

    @classmethod
    def refusal(cls, cfg: Any, params: Any) -> str | None:
        """Why this defense cannot run with ``cfg`` (None: it can); checked at config time."""
        return None

    def relabel(self, y: np.ndarray, *, num_classes: int, noise: NoiseSource) -> np.ndarray:
        """Site ``labels``: the labels the label holder trains on, drawn once per run."""
        return y

    def stage_epoch(self) -> int | None:
        """Site ``labels``, staged (RRWithPrior): the epoch from which the labels ``relabel`` left
        ``UNDRAWN`` are used, drawn by ``draw_staged`` in the epoch before it (None: not staged)."""
        return None

    def draw_staged(self, y: np.ndarray, *, prior: np.ndarray, noise: NoiseSource) -> np.ndarray:
        """Site ``labels``, staged: labels for true ``y`` drawn given the head's predictions ``prior`` (N, K)."""
        raise NotImplementedError

    def private_backward(self, head: Any, fused: Any, y: Any, *, noise: NoiseSource) -> np.ndarray | None:
        """Site ``gradient``: replace the server's backward (set the head's ``.grad``, return the rows to
        send down) with a private one; None: the ordinary backward (only label_gp has one)."""
        return None

    def mod(self) -> Mod | None:
        """Site ``gradient``: the mod applied to each gradient message the label holder sends."""
        return None

    def penalty(self, x: Any, emb: Any) -> Any:
        """Site ``forward``: a scalar torch loss of a party's batch inputs ``x`` and embedding ``emb``."""
        raise NotImplementedError

    def soft_targets(self, y: Any, *, num_classes: int) -> Any:
        """Site ``labels``: soft targets (N, K) the head trains on in place of ``y`` (None: ``y`` itself; cae)."""
        return None

    def decode(self, probs: Any) -> Any:
        """Site ``labels``: the class probabilities a prediction ``probs`` stands for (cae: its decoder)."""
        return probs

    def wrap_head(self, head: Any, *, in_dim: int, parts: int) -> Any:
        """Site ``head``: the server's head behind this defense's layer (``parts`` party blocks of ``in_dim``)."""
        return head

    def label_refusal(self, *, num_classes: int) -> str | None:
        """Why this defense cannot run on labels of ``num_classes`` classes (checked when the data is known)."""
        return None

    def label_epsilon(self) -> float | None:
        """Pure label-DP ε of this defense for the whole run (None: no formal guarantee)."""
        return None

    def label_dp(self, *, epochs: int, delta: float) -> tuple[float, float] | None:
        """(ε, δ) label DP of this defense over ``epochs`` epochs at ``delta``; default: the pure ε, δ = 0."""
        eps = self.label_epsilon()
        return None if eps is None else (float(eps), 0.0)


DEFENSES: Registry[type[Defense]] = Registry("defense")


def register(name: str, help: str = "") -> Any:
    """Class decorator: register a ``Defense`` subclass under ``name`` (refuses duplicates)."""

    def deco(cls: type[Defense]) -> type[Defense]:
        if not (isinstance(cls, type) and issubclass(cls, Defense)):
            raise TypeError(f"defense {name!r} must be a Defense subclass, got {cls!r}")
        if cls.site not in SITES:
            raise ValueError(f"defense {name!r}: site must be one of {SITES}, got {cls.site!r}")
        doc = help or (cls.__doc__ or "").strip().split("\n")[0]
        return DEFENSES.add(name, cls, doc)

    return deco


def _entry(i: int, entry: Any) -> tuple[str, type[Defense], Any]:
    """(kind, class, validated params) of the entry ``defenses[i]``."""
    key = f"{KEY}[{i}]"
    if not isinstance(entry, Mapping):
        raise ConfigError(key, f"got {entry!r}; expected a mapping {{kind: NAME, ...options}}")
    if "kind" not in entry:
        raise ConfigError(f"{key}.kind", f"is required; allowed: {', '.join(DEFENSES.names()) or '(none)'}")
    kind = entry["kind"]
    if not isinstance(kind, str):
        raise ConfigError(f"{key}.kind", f"got {kind!r}; expected a defense name (see `vfl defenses`)")
    if kind not in DEFENSES:  # a third-party defense: registered by its package's vfl.plugins entry point
        load_plugins()
    cls = DEFENSES.get(kind, key=f"{key}.kind")
    params: Any = build(cls.Params, {k: v for k, v in entry.items() if k != "kind"}, prefix=key)
    return kind, cls, params


def check_defenses(cfg: Any, strategy_cls: Any) -> tuple[dict[str, Any], ...]:
    """Validate ``cfg.defenses``; returns the entries with every option filled in (for the resolved config)."""
    entries = cfg.defenses
    sites = frozenset(getattr(strategy_cls, "defense_sites", ()))
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        kind, cls, params = _entry(i, entry)
        key = f"{KEY}[{i}]"
        if kind in seen:
            raise ConfigError(f"{key}.kind", f"{kind!r} is already {KEY}[{seen[kind]}]; list each defense once")
        seen[kind] = i
        if cls.site not in sites:
            offered = ", ".join(sorted(sites)) or "none"
            raise ConfigError(f"{key}.kind", f"{kind} acts on the label holder's {cls.site}, which strategy "
                              f"{cfg.strategy!r} does not expose (its defense sites: {offered}); "
                              "label/gradient defenses: npq, pbm, ldp, npq+secagg")
        if (why := cls.refusal(cfg, params)) is not None:
            raise ConfigError(f"{key}.kind", f"{kind} is not available here: {why}")
        out.append({"kind": kind, **to_dict(params)})
    return tuple(out)


def make_defenses(entries: Sequence[Mapping[str, Any]]) -> list[Defense]:
    """The defense objects of validated ``defenses`` entries, in order."""
    return [cls(params) for _, cls, params in (_entry(i, e) for i, e in enumerate(entries))]


def wrap_head(head: Any, defenses: Sequence[Defense], *, in_dim: int, parts: int) -> Any:
    """The server's head behind every ``head``-site defense's layer, in list order (built before its optimizer)."""
    for d in defenses:
        if d.site == "head":
            head = d.wrap_head(head, in_dim=in_dim, parts=parts)
    return head


def check_labels(entries: Sequence[Mapping[str, Any]], *, num_classes: int) -> None:
    """Refuse, in one line naming the entry, a defense that cannot handle ``num_classes`` classes."""
    for i, d in enumerate(make_defenses(entries)):
        if (why := d.label_refusal(num_classes=num_classes)) is not None:
            raise ConfigError(f"{KEY}[{i}].kind", why)


def label_epsilon(entries: Sequence[Mapping[str, Any]], *, epochs: int = 1, delta: float = 1e-5) -> float | None:
    """The run's label-DP ε: the sum of the defenses' ε (basic composition); None when none has one."""
    dp = label_dp(entries, epochs=epochs, delta=delta)
    return None if dp is None else dp[0]


def label_dp(entries: Sequence[Mapping[str, Any]], *, epochs: int, delta: float) -> tuple[float, float] | None:
    """(Σε, Σδ) of the defenses with a label-DP guarantee (basic composition); None when none has one."""
    dps = [g for d in make_defenses(entries) if (g := d.label_dp(epochs=epochs, delta=delta)) is not None]
    return (float(sum(e for e, _ in dps)), float(sum(d for _, d in dps))) if dps else None


SCOPE_LABEL = "label privacy (label DP of every training label against every node but the label holder)"


def label_privacy(entries: Sequence[Mapping[str, Any]], *, epochs: int = 1, delta: float = 1e-5) -> dict[str, Any]:
    """The summary's defense fields: ``defenses`` (kinds), and with a label-DP defense ``epsilon_label``,
    ``delta_label`` (0 for pure ε) and its scope, over ``epochs`` at ``delta``; {} without defenses."""
    if not entries:
        return {}
    out: dict[str, Any] = {"defenses": [str(e["kind"]) for e in entries]}
    dp = label_dp(entries, epochs=epochs, delta=delta)
    if dp is not None:
        out.update({"epsilon_label": dp[0], "delta_label": dp[1], "epsilon_label_scope": SCOPE_LABEL})
    return out


def help_rows(names: list[str] | None = None) -> list[tuple[str, str, str, str]]:
    """(key, default, allowed, help) rows of the options of the defenses ``names`` (default: every registered
    one) for ``vfl config-help``."""
    names = DEFENSES.names() if names is None else names
    rows = [(f"{KEY}[].kind", "()", "one of " + ", ".join(repr(n) for n in names),
             "a defense (see `vfl defenses`); its options follow")]
    for name in names:
        rows += help_table(DEFENSES.get(name).Params, f"{KEY}[kind={name}]")
    return rows
