"""The SAP benchmark's tables and figures (``simulations/benchmarks/sap_curve.py`` runs the points): the
rows as a text table, the CTI study's mean ± std per setting (``cti_summary``) and its table and figure,
the privacy-utility curves of the eta/split/aia series and the attack × defense figure (PNG + PDF)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 10 else f"{v:.0f}"
    return str(v)


def table(rows: Sequence[dict[str, Any]]) -> str:
    cols = ("series", "split", "eta", "cti", "defense", "test_acc", "ep_eia", "ep_inverter", "ep_aia", "ep_aia_ci_low", "ep_aia_ci_high",
            "aia_probe_name", "aia_majority", "aia_length_acc", "aia_linear_acc", "aia_transformer_acc",
            "total_bytes_up", "run_s")
    lines = [" ".join(f"{c:>14}" for c in cols)]
    lines += [" ".join(f"{_fmt(r.get(c)):>14}" for c in cols) for r in rows]
    return "\n".join(lines)


def _setting(r: dict[str, Any]) -> str:
    if r["eta"] is None:
        return "no privatization"
    return f"eta {r['eta']:g}" + (f", CTI {r['cti_fraction']:g}" if r["cti"] else ", no CTI")


def cti_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mean ± std over seeds of the cti series per setting; relative utility = acc / same-seed no-privatization acc."""
    sel = [r for r in rows if r["series"] == "cti" and r.get("test_acc") is not None]
    clean = {r["seed"]: r["test_acc"] for r in sel if r["eta"] is None}
    out = []
    for setting in dict.fromkeys(_setting(r) for r in sel):
        mine = [r for r in sel if _setting(r) == setting]
        row: dict[str, Any] = {"setting": setting, "eta": mine[0]["eta"], "cti": mine[0]["cti"],
                               "cti_fraction": mine[0]["cti_fraction"], "seeds": [r["seed"] for r in mine]}
        rel = [r["test_acc"] / clean[r["seed"]] for r in mine if clean.get(r["seed"])]
        for key, vals in (("test_acc", [r["test_acc"] for r in mine]), ("relative_utility", rel),
                          ("ep_eia", [r["ep_eia"] for r in mine if r.get("ep_eia") is not None]),
                          ("cti_tokens", [r["cti_tokens"] for r in mine if r.get("cti_tokens") is not None])):
            arr = np.asarray(vals, dtype=float)
            row[f"{key}_mean"] = float(arr.mean()) if arr.size else None
            row[f"{key}_std"] = float(arr.std(ddof=1)) if arr.size > 1 else (0.0 if arr.size else None)
        out.append(row)
    return out


def cti_table(summary: Sequence[dict[str, Any]]) -> str:
    lines = [f"{'setting':>24} {'n':>3} {'test acc':>15} {'rel. utility':>15} {'EP (EIA)':>15} {'CTI tokens':>11}"]
    def pm(r: dict[str, Any], k: str) -> str:
        m, sd = r[f"{k}_mean"], r[f"{k}_std"]
        return "-" if m is None else f"{m:.3f} ± {sd:.3f}"

    for r in summary:
        tok = r["cti_tokens_mean"]
        lines.append(f"{r['setting']:>24} {len(r['seeds']):>3} {pm(r, 'test_acc'):>15} {pm(r, 'relative_utility'):>15} "
                     f"{pm(r, 'ep_eia'):>15} {'-' if tok is None else f'{tok:.0f}':>11}")
    return "\n".join(lines)


def plot_cti(summary: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """sap_cti.png: utility and EP (mean ± std over seeds) per setting of the cti series."""
    if not summary:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    labels = [r["setting"] for r in summary]
    for ax, key, ylab in zip(axes, ("test_acc", "ep_eia"), ("utility accuracy", YLABEL["ep_eia"]), strict=True):
        means = [r[f"{key}_mean"] if r[f"{key}_mean"] is not None else np.nan for r in summary]
        stds = [r[f"{key}_std"] or 0.0 for r in summary]
        ax.bar(range(len(labels)), means, yerr=stds, capsize=3, color="tab:blue", alpha=0.7)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
        ax.set_ylabel(ylab)
        ax.grid(alpha=0.3, axis="y")
    fig.suptitle("SAP: CTI at fixed η (mean ± std over seeds)")
    fig.tight_layout()
    path = out / "sap_cti.png"
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    return save_png_pdf(fig, path)


def _x(r: dict[str, Any], x_key: str, finite: Sequence[float]) -> float:
    """Plot position: η (no privatization drawn right of the largest η) or the split depth."""
    if x_key == "split":
        return float(r["split"])
    return r["eta"] if r["eta"] is not None else (max(finite) * 1.3 if finite else 1.0)


def _label(group: str, g: Any) -> str:
    if group == "cti":
        return f"CTI {'on' if g else 'off'}"
    if group == "eta":
        return "no privatization" if g is None else f"η = {g:g}"
    return f"split {g}"


PLOTS = (("eta", "eta", "cti", "ep_eia"), ("split", "split", "eta", "ep_eia"), ("aia", "eta", "split", "ep_aia"))
YLABEL = {"ep_eia": "EP vs EIA (1 − token recovery)", "ep_aia": "EP vs AIA (1 − accuracy)", "test_acc": "utility accuracy"}


def plot_defense(rows: Sequence[dict[str, Any]], out: Path) -> Path | None:
    """sap_defense.png: EP against the nearest-neighbour EIA and the learned inverter vs utility, per defense."""
    sel = [r for r in rows if r["series"] == "defense" and r.get("test_acc") is not None]
    if not sel:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in zip(axes, ("ep_eia", "ep_inverter"), ("nearest-neighbour EIA", "learned inverter"),
                              strict=True):
        for kind, marker in (("none", "s"), ("dχ η=", "o"), ("dχ η auto", "^"), ("SanText", "D")):
            pts = [(r["test_acc"], r[key], r["defense"]) for r in sel if r.get(key) is not None
                   and (r["defense"] == "none" if kind == "none" else r["defense"].startswith(kind))]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=kind.rstrip("= "))
                for x, y, label in pts:
                    ax.annotate(label.split(" (")[0].replace("dχ ", ""), (x, y), fontsize=6, alpha=0.7)
        ax.set(xlabel="utility accuracy", ylabel=f"EP vs {title} (1 − token recovery)", title=title)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"SAP attack × defense, split 0 ({sel[0]['dataset']})")
    fig.tight_layout()
    from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

    return save_png_pdf(fig, out / "sap_defense.png")


def plot(rows: Sequence[dict[str, Any]], out: Path) -> list[Path]:
    """sap_eta.png (vs η, CTI off/on), sap_split.png (vs split depth, per η), sap_aia.png (AIA vs η)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for series, x_key, group, ep in PLOTS:
        sel = [r for r in rows if r["series"] == series]
        if series == "split":  # split 0 without privatization comes from the eta series
            sel += [r for r in rows if r["series"] == "eta" and r["eta"] is None]
        if not sel:
            continue
        finite = [r["eta"] for r in sel if r["eta"] is not None]
        fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
        for ax, key in zip(axes, (ep, "test_acc"), strict=True):
            groups = sorted({r[group] for r in sel}, key=lambda g: (g is None, g))
            for g in groups:
                mine = [r for r in sel if r[group] == g or (series == "eta" and r["eta"] is None)]
                pts = sorted((_x(r, x_key, finite), r[key]) for r in mine if r[key] is not None)
                if pts:
                    line = ax.plot(*zip(*pts, strict=True), marker="o", ms=4, label=_label(group, g))
                inv = sorted((_x(r, x_key, finite), r["ep_inverter"]) for r in mine
                             if key == "ep_eia" and r.get("ep_inverter") is not None)
                if inv:  # the learned inverter on the same runs, dashed in the same colour
                    ax.plot(*zip(*inv, strict=True), ls="--", marker="x", ms=4, color=line[0].get_color() if pts
                            else None, label=f"{_label(group, g)}, learned inverter")
            if key == "ep_aia":
                base = sorted({round(1 - r["aia_majority"], 4) for r in sel if r.get("aia_majority") is not None})
                for b in base[:1]:
                    ax.axhline(b, ls="--", c="grey", lw=1, label="1 − majority rate (blind guess)")
            ax.set(xlabel="bottom blocks (split)" if x_key == "split" else "η (rightmost: no privatization)",
                   ylabel=YLABEL[key])
            if x_key == "eta":
                ax.set_xscale("log")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
        fig.suptitle(f"SAP {series} series ({sel[0]['dataset']})")
        fig.tight_layout()
        from simulations.report.plots import save_png_pdf  # PNG + PDF beside it

        written.append(save_png_pdf(fig, out / f"sap_{series}.png"))
    return written
