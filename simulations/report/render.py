"""``vfl report RUN_DIR`` and ``vfl attack NAME RUN_DIR``: one page of what a run guarantees and leaks.

Writes ``report.md`` and ``report.json`` into the run directory and the PNGs under ``report/``:
accuracy, communication, ε(δ) with its scope and the RDP curve, every attack that ran beside its
chance baseline, the audit bound beside the accountant's ε, and reconstructions on image data.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulations.report import (  # noqa: F401  (register attacks)
    accuracy,
    audit_run,
    completion,
    figures,
    inference_time,
    llm,
    model_attacks,
    trees,
    vertical_attacks,
)
from simulations.report.results import RUN_ATTACKS, AttackResult
from simulations.report.run import RunArtifacts, Skipped, load_run
from simulations.report.style import run_identity
from vfl.privacy.accounting.events import GaussianEvent, PBMEvent

ORDER = ("label_inference", "feature_reconstruction", "gradient_inversion", "membership", "extraction", "backdoor",
         "passive_model_completion", "active_model_completion", "grn_feature_inference", "noisy_samples",
         "missing_features", "audit", "llm_leak", "instance_space", "feature_order")


def default_scope(run: RunArtifacts) -> str:
    """What the accountant's ε covers, read off its ledger (when the summary has no ``epsilon_scope``)."""
    acc = run.accountant
    if acc is None or not acc.events:
        return "no accountant: this run adds no calibrated noise, so it has no epsilon"
    parts = []
    for ev in acc.events:
        if isinstance(ev, PBMEvent):
            against = (f"the server seeing only the secure SUM of {ev.num_parties} parties' PBM counts"
                       if ev.num_parties > 1 else "the server seeing this party's PBM counts")
            parts.append(f"feature privacy: one party's features of one training sample (its {ev.dim}-dim embedding "
                         f"anywhere in [-C, C]), against {against}; {ev.count} releases, no subsampling "
                         "amplification")
        elif isinstance(ev, GaussianEvent):
            parts.append(f"feature privacy: one party's embedding of one training sample (Gaussian, L2 sensitivity "
                         f"{ev.sensitivity:.3g}), against the server; {ev.count} releases")
    return "; ".join(parts) + ". Labels, the gradients sent back, and the trained model are NOT covered."


@dataclass(frozen=True)
class AttackStep:
    """One attack of a report, for its progress display: ``seconds`` is None when it starts."""

    index: int  # 1-based
    total: int
    name: str
    seconds: float | None = None
    results: int = 0
    skipped: str | None = None

    def line(self) -> str:
        """``attack 3/13 membership 12.4s`` (or ``... skipped``): what a log shows per attack."""
        head = f"attack {self.index}/{self.total} {self.name}"
        return f"{head} skipped" if self.skipped is not None else f"{head} {self.seconds or 0.0:.1f}s"


def run_attacks(run: RunArtifacts, names: tuple[str, ...] | None = None, *,
                on_attack: Callable[[AttackStep], None] | None = None) -> tuple[list[AttackResult], dict[str, str]]:
    """Every registered attack (or ``names``), with the reason of those that do not apply;
    ``on_attack`` hears each attack start and end (``vfl report``'s progress)."""
    results: list[AttackResult] = []
    skipped: dict[str, str] = {}
    order = names or tuple(n for n in ORDER if n in RUN_ATTACKS) + tuple(n for n in RUN_ATTACKS.names() if n not in ORDER)
    for i, name in enumerate(order, 1):
        if on_attack is not None:
            on_attack(AttackStep(i, len(order), name))
        t0, before = time.perf_counter(), len(results)
        try:
            results.extend(RUN_ATTACKS.get(name, "attack")(run))
        except Skipped as exc:
            skipped[name] = str(exc)
        if on_attack is not None:
            on_attack(AttackStep(i, len(order), name, time.perf_counter() - t0, len(results) - before, skipped.get(name)))
    return results, skipped


def attack_json(name: str, run_dir: str | Path) -> dict[str, Any]:
    """``vfl attack NAME RUN_DIR``: one attack's rows (or why it does not apply)."""
    run = load_run(run_dir)
    results, skipped = run_attacks(run, (name,))
    return {"run": str(run.path), "attack": name, "results": [r.to_json() for r in results],
            **({"skipped": skipped[name]} if name in skipped else {})}


def _fmt(x: Any) -> str:
    if x is None:
        return "—"
    if isinstance(x, float):
        return "inf" if math.isinf(x) else f"{x:.4g}"
    return str(x)


def build_report(run_dir: str | Path, *, names: tuple[str, ...] | None = None,
                 on_attack: Callable[[AttackStep], None] | None = None) -> dict[str, Any]:
    """Run the attacks, draw the figures, write report.json and report.md; return the JSON dict."""
    from vfl.core.errors import ConfigError
    from vfl.engine.lock import RunLock

    if not (Path(run_dir) / "config.resolved.yaml").is_file():
        raise ConfigError("RUN_DIR", f"{run_dir} is not a run directory (no config.resolved.yaml)")
    with RunLock(Path(run_dir), key="RUN_DIR"):  # not beside a run still writing, nor a second report
        return _build_report(run_dir, names=names, on_attack=on_attack)


def _build_report(run_dir: str | Path, *, names: tuple[str, ...] | None,
                  on_attack: Callable[[AttackStep], None] | None) -> dict[str, Any]:
    from vfl.core.private_fs import write_atomic

    t0 = time.perf_counter()
    run = load_run(run_dir)
    out = run.path / figures.FIG_DIR
    s, cfg = run.summary, run.cfg
    results, skipped = run_attacks(run, names, on_attack=on_attack)
    ident = run_identity(cfg, s)  # name, strategy, M, seed, epochs, b/β..., defenses: as the run's plots
    figs = figures.curves(run.metrics, out, ident)
    detail = default_scope(run)
    scope = s.get("epsilon_scope") or detail  # the run's own label when it has one (e.g. bottom DP-SGD)
    if run.accountant is not None and run.accountant.events:
        figs += figures.privacy(run.accountant, cfg.privacy.delta, scope, out, ident)  # the scope's short name (report.md: all)
    att = figures.attacks(results, out, ident)
    figs += [att] if att else []
    audit = next((r for r in results if r.name == "audit"), None)
    if audit is not None:
        figs.append(figures.audit(audit.value, s.get("epsilon"), audit.details["ceiling"], out, ident))
    figs += [r.figure for r in results if r.figure]
    guarantee = s.get("epsilon_is_guarantee", cfg.privacy.noise_rng == "crypto" if s.get("epsilon") is not None
                      else None)
    report: dict[str, Any] = {
        # "run": the directory report.json sits in (by name): every path in the report is relative to it
        "run": run.path.name, "name": cfg.name, "strategy": cfg.strategy, "dataset": cfg.dataset,
        "num_parties": cfg.num_parties, "title": ident.title, "params": _params(cfg),
        "final_test_acc": s.get("final_test_acc"), "final_train_acc": s.get("final_train_acc"),
        "test_acc_epochs": accuracy.epochs_of(run.metrics), "test_accuracy": accuracy.readings(run),
        "train_acc_note": ident.train_note, "epochs": s.get("epochs"),
        "releases": sum(int(getattr(ev, "count", 0)) for ev in (run.accountant.events if run.accountant else [])),
        "total_bytes": (s.get("total_bytes_up") or 0) + (s.get("total_bytes_down") or 0),
        "epsilon": s.get("epsilon"), "delta": cfg.privacy.delta if s.get("epsilon") is not None else None,
        "epsilon_scope": scope, "epsilon_scope_detail": detail, "epsilon_is_guarantee": guarantee, "noise_rng": cfg.privacy.noise_rng,
        "audit_epsilon_lower": audit.value if audit is not None else None,
        **{k: s[k] for k in ("defenses", "epsilon_label", "delta_label", "epsilon_label_scope", "epsilon_by_scope",
                             "gain_importance") if k in s},
        "attacks": [_relative_figure(r.to_json(), run.path) for r in results], "skipped": skipped,
        "figures": [str(Path(f).relative_to(run.path)) for f in figs], "report_s": time.perf_counter() - t0,
    }
    # each output whole or not at all (an interrupted report leaves the previous one)
    write_atomic(run.path / "report.json", json.dumps(report, indent=2, default=str).encode())
    write_atomic(run.path / "report.md", _markdown(report, results).encode())
    return report


def _relative_figure(attack: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """An attack's ``figure`` relative to the run directory (the report moves with it)."""
    fig, root = attack.get("figure"), run_dir.resolve()
    if fig and Path(fig).resolve().is_relative_to(root):
        attack["figure"] = Path(fig).resolve().relative_to(root).as_posix()
    return attack


def _params(cfg: Any) -> dict[str, Any]:
    from vfl.config.fields import to_dict

    return to_dict(cfg.params) if cfg.params else {}


def _importance(owners: dict[str, Any]) -> list[str]:
    """The trees' gain importance by owner (what the label holder knows: the owner's feature indices and the
    splits' gains, never a threshold)."""
    total = sum(o["gain"] for o in owners.values()) or 1.0
    lines = ["## Gain importance by owner (trees)", "",
             "| owner | splits | total gain | share | features by gain (owner's column index: gain) |", "|---|---|---|---|---|"]
    for name, o in sorted(owners.items(), key=lambda kv: -kv[1]["gain"]):
        top = sorted(o["by_feature"].items(), key=lambda kv: -kv[1])[:5]
        lines.append(f"| {name} | {o['splits']} | {_fmt(o['gain'])} | {o['gain'] / total:.1%} | "
                     + ", ".join(f"{f}: {_fmt(g)}" for f, g in top) + " |")
    return lines


def _verdict(a: AttackResult) -> str:
    if a.succeeded is None:
        return "— (no verdict)"
    word = "yes" if a.succeeded else "no"
    return f"{word} (95 % CI)" if a.ci is not None else f"{word} (rough rule, no interval)"


def _value_ci(a: AttackResult) -> str:
    return _fmt(a.value) + (f" [{_fmt(a.ci.low)}, {_fmt(a.ci.high)}]" if a.ci is not None else "")


def _accuracy_lines(r: dict[str, Any]) -> list[str]:
    """The section that says which test accuracy is which, from the report's own measurement."""
    ep, ev = r.get("test_acc_epochs") or {}, r.get("test_accuracy") or {}
    if not ep:
        return []
    rows = ev.get("test_rows")
    on = f"all {rows} test rows" if rows else "the test rows"
    lines = ["## Test accuracy: which number is which", "",
             f"- **{_fmt(ep['final'])}** (`final_test_acc`): the run's own evaluation after epoch {ep['final_epoch']} "
             f"of {ep['epochs']} (the last), {on}, through the mechanism's release with the run's fresh noise. The best "
             f"epoch was {ep['best_epoch']} ({_fmt(ep['best'])}); the report attacks the last checkpoint."]
    if ev:
        lines += [f"- **{_fmt(ev['mean'])} ± {_fmt(ev['std'])}** (range {_fmt(ev['min'])}–{_fmt(ev['max'])}): the "
                  f"report's evaluation of that checkpoint on the same rows, {ev['draws']} seeded draws of the "
                  f"mechanism's noise (mean ± sample std). Draw 0, **{_fmt(ev['draw0'])}**, is the `clean_acc` of "
                  "`noisy_samples` and `missing_features` (their attacked evaluations use the same draw).",
                  f"- **{_fmt(ev['without_mechanism'])}**: the same checkpoint on the plain fusion of the parties' "
                  "embeddings, without the mechanism (what no node of a noised run sees).",
                  f"- For scale: the binomial standard error of an accuracy on {rows} rows is "
                  f"{_fmt(ev['binomial_se'])}.", ""]
        if ev["std"] > 0:
            lines.append(f"Why they differ: `{r['strategy']}` randomizes every release, evaluation forwards included, "
                         "so one trained model has a spread of test accuracies; `final_test_acc` is one draw of it "
                         "(fresh noise), the report's are others (seeded, so the report is the same each time it "
                         "is built).")
        else:
            lines.append(f"`{r['strategy']}` adds no noise at evaluation: every evaluation of the checkpoint gives "
                         "the same accuracy; a difference to `final_test_acc` would be a different model.")
    if r.get("train_acc_note"):
        lines.append(f"The training accuracy ({_fmt(r.get('final_train_acc'))}) is measured {r['train_acc_note']}.")
    return [*lines, ""]


def _markdown(r: dict[str, Any], results: list[AttackResult]) -> str:
    ep = r.get("test_acc_epochs") or {}
    rows = (r.get("test_accuracy") or {}).get("test_rows")
    epochs = r.get("epochs") or ep.get("epochs")
    at_epoch = f"after epoch {ep['final_epoch']} of {ep['epochs']}, " if ep else ""
    mb = f"{r['total_bytes'] / 1e6:.3f} MB ({r['total_bytes']:,} bytes)" if r.get("total_bytes") else _fmt(r["total_bytes"])
    lines = [f"# Privacy report: {r['name']} ({r['strategy']} on {r['dataset']}, M={r['num_parties']})", "",
             f"Run: `{r['run']}` — {r.get('title', '')}; params {r['params']}", "",
             "| quantity | value | measured on |", "|---|---|---|",
             f"| final test accuracy | {_fmt(r['final_test_acc'])} | the run's evaluation {at_epoch}"
             f"{f'all {rows} test rows' if rows else 'the test rows'}, the run's fresh noise (below: the other "
             "accuracies) |",
             *([f"| best test accuracy | {_fmt(ep['best'])} | epoch {ep['best_epoch']} of {ep['epochs']}, same rows |"]
               if ep else []),
             f"| measured wire bytes (train) | {mb} | every training message of the {epochs} epochs, up + down, as "
             "serialized (envelope and MACs included; evaluation and set-up not) |",
             f"| accountant ε (upper bound) at δ={_fmt(r['delta'])} | {_fmt(r['epsilon'])} | the accountant's ledger: "
             f"{r.get('releases') or '—'} releases composed (scope below) |",
             f"| ε is a guarantee | {_fmt(r['epsilon_is_guarantee'])} (noise_rng: {r['noise_rng']}) | the run's noise "
             "source and whether its noise is exact in floating point |",
             f"| audit ε (empirical lower bound, 95 %) | {_fmt(r['audit_epsilon_lower'])} | the `audit` row below |",
             *([f"| defenses | {', '.join(r['defenses'])} | the run's `defenses:` |"] if r.get("defenses") else []),
             *([f"| label ε (label DP, δ = {_fmt(r.get('delta_label', 0.0))}) | {_fmt(r['epsilon_label'])} | every "
                "training label, the whole run |"] if r.get("epsilon_label") is not None else []), "",
             f"**What ε covers:** {r['epsilon_scope']}"
             + ("" if r["epsilon_scope"] == r["epsilon_scope_detail"] else f" — {r['epsilon_scope_detail']}"), "",
             *_accuracy_lines(r),
             "## Attacks (what a curious node recovered)", "",
             "| attack | threat model | metric | measured on | value [95 % CI] | baseline | beats chance? |",
             "|---|---|---|---|---|---|---|"]
    for a in results:
        lines.append(f"| {a.name} | {a.threat} | {a.metric} | {a.measured_on or '—'} | {_value_ci(a)} | "
                     f"{_fmt(a.baseline)} ({a.baseline_label}) | {_verdict(a)} |")
    if r["skipped"]:
        lines += ["", "Not run: " + "; ".join(f"**{k}** — {v}" for k, v in r["skipped"].items())]
    if r.get("gain_importance"):
        lines += ["", *_importance(r["gain_importance"])]
    audit = next((a for a in results if a.name == "audit"), None)
    if audit is not None and audit.details.get("why"):
        lines += ["", f"**Audit vs accountant:** {audit.details['why']}"]
    lines += ["", "'beats chance' = the attack's 95 % interval lies entirely beyond its baseline on the side of "
              "leakage (the interval per kind of number: Wilson binomial for counts over trials, a paired bootstrap "
              "of the difference for means over the same samples as the baseline, a bootstrap of the AUC against "
              "0.5 for membership; the audit's value is itself a 95 % lower bound). Rows without an interval "
              "(a strategy's own number with no sample count) use the rough rule: 10 % better (relative) and, "
              "for rates, 0.05 (absolute). What each number means: docs/attacks.md.", ""]
    lines += [f"![{Path(f).stem}]({f})" for f in r["figures"]]
    return "\n".join(lines) + "\n"
