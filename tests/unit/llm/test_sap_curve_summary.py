"""The SAP benchmark's CTI study: one run per (setting, seed) and mean ± std per setting."""

from __future__ import annotations

import pytest

from simulations.benchmarks import sap_curve, sap_curve_figures


def _row(seed: int, eta: float | None, acc: float, ep: float, frac: float | None = None) -> dict:
    return {"series": "cti", "seed": seed, "eta": eta, "cti": frac is not None, "cti_fraction": frac,
            "test_acc": acc, "ep_eia": ep, "cti_tokens": 0 if frac is None else 10}


def test_cti_points_cover_every_setting_and_seed() -> None:
    args = sap_curve.parse(["--series", "cti", "--seeds", "0", "1", "--cti-fractions", "0.01", "0.2", "--cti-eta", "75"])
    pts = sap_curve.points(args)
    assert len(pts) == 2 * (2 + 2)
    names = [sap_curve.point_name(s, p) for s, _, p in pts]
    assert len(set(names)) == len(names)
    assert {p.get("cti_fraction") for _, _, p in pts} == {None, 0.01, 0.2}
    assert all(p["eta"] in (None, 75.0) for _, _, p in pts)


def test_default_series_leave_the_seeded_study_out() -> None:
    assert all(s != "cti" for s, _, _ in sap_curve.points(sap_curve.parse([])))


def test_cti_summary_mean_std_and_relative_utility() -> None:
    rows = [_row(0, None, 0.8, 0.0), _row(1, None, 0.6, 0.0),
            _row(0, 100.0, 0.4, 0.2), _row(1, 100.0, 0.3, 0.4),
            _row(0, 100.0, 0.8, 0.1, frac=0.05), _row(1, 100.0, 0.6, 0.3, frac=0.05)]
    by = {r["setting"]: r for r in sap_curve_figures.cti_summary(rows)}
    assert set(by) == {"no privatization", "eta 100, no CTI", "eta 100, CTI 0.05"}
    assert by["eta 100, no CTI"]["test_acc_mean"] == pytest.approx(0.35)
    assert by["eta 100, no CTI"]["relative_utility_mean"] == pytest.approx(0.5)
    assert by["eta 100, no CTI"]["ep_eia_std"] == pytest.approx(0.1414, abs=1e-3)
    assert by["eta 100, CTI 0.05"]["relative_utility_std"] == pytest.approx(0.0)
    assert "± " in sap_curve_figures.cti_table(list(by.values()))


def test_a_finished_point_is_reused_only_with_the_same_config(tmp_path) -> None:
    args = sap_curve.parse(["--series", "cti", "--seeds", "0"])
    name, _, raw = sap_curve.point_config(args, "cti", "rt-polarity", {"split": 0, "eta": None, "seed": 0})
    run_dir, stamp = tmp_path / name, tmp_path / f"{name}.point.json"
    assert sap_curve.finished_summary(run_dir, stamp, raw) is None  # nothing ran yet
    run_dir.mkdir()
    stamp.write_text(__import__("json").dumps(raw, sort_keys=True))
    assert sap_curve.finished_summary(run_dir, stamp, raw) is None  # interrupted: no summary.json
    (run_dir / "summary.json").write_text('{"test_acc": 0.7}')
    assert sap_curve.finished_summary(run_dir, stamp, raw) == {"test_acc": 0.7}
    other = {**raw, "train": {**raw["train"], "epochs": 9}}
    assert sap_curve.finished_summary(run_dir, stamp, other) is None  # another config: rerun


def test_defense_series_is_the_sap_attack_defense_matrix(tmp_path) -> None:
    args = sap_curve.parse(["--series", "defense", "--defense-etas", "100", "--eia-targets", "0.1",
                            "--santext-epsilons", "15", "10"])
    pts = sap_curve.points(args)
    labels = [sap_curve.defense_label(p) for _, _, p in pts]
    assert labels == ["none", "dχ η=100", "dχ η auto (EIA target 0.1)", "SanText ε=15", "SanText ε=10"]
    names = [sap_curve.point_name(s, p) for s, _, p in pts]
    assert len(set(names)) == len(names) and "defense-s0-etaauto0.1" in names
    _, _, raw = sap_curve.point_config(args, *pts[2][:2], pts[2][2])
    assert raw["params"]["eta"] == "auto" and raw["params"]["eia_target"] == 0.1  # the run config gets both
    rows = [{"series": "defense", "dataset": "d", "defense": lab, "test_acc": 0.8 - 0.1 * i, "ep_eia": 0.1 * i,
             "ep_inverter": 0.1 * i} for i, lab in enumerate(labels)]
    assert sap_curve_figures.plot_defense(rows, tmp_path).exists()
    assert "ep_inverter" in sap_curve_figures.table([{**r, "eta": None, "split": 0, "cti": False} for r in rows])
