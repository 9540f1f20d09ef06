"""One figure style for runs, reports and sweeps (issue 48): every figure kind is rendered from plain data and
its labels read back. Each axis has a y label with its unit from ``style.METRICS``, each title names the run
(defenses and label ε included), no axis uses matplotlib's offset notation, a legend says what each curve is
(the training curve of a label-randomizing defense says it is on the randomized labels), a constant metric is
a flat line at its value, and a chance bar of 0 stays visible (its number and a dashed line at 0)."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib.pyplot as plt
import pytest

from simulations.report import figures, plots, style
from simulations.report.intervals import wilson
from simulations.report.results import AttackResult

DEFENDED = style.RunIdentity("demo (pbm) M=4 seed=0 20 epochs b=16 β=0.25 + label_rr ε=1",
                             "on the labels label_rr randomized, not the true ones")


class _Cfg:
    """What ``run_identity`` reads of a resolved config."""

    def __init__(self, **over):
        self.name, self.strategy, self.num_parties, self.seed = "demo", "pbm", 4, 0
        self.train = SimpleNamespace(epochs=20)
        self.raw = {"params": {"b": 16, "beta": 0.25, "secagg": True, "threshold": 0},
                    "defenses": [{"kind": "label_rr", "epsilon": 1.0}], "privacy": {"noise_rng": "crypto"}, **over}

    def to_dict(self):
        return self.raw


def _rows(n=3, **extra):
    return [{"epoch": e, "train_loss": 2.3 - 0.01 * e, "train_acc": 0.12 + 0.01 * e, "test_acc": 0.2 + 0.02 * e,
             "cum_bytes_up": 90672.0 * (e + 1), "cum_bytes_down": 91012.0 * (e + 1), "epsilon": 1135.3397734467708,
             "delta": 1e-5, **extra} for e in range(n)]


def _capture(monkeypatch, module):
    """Figures as ``style.save`` gets them (drawn, then closed), keyed by file name."""
    seen = {}

    def keep(fig, path, **kw):
        fig.canvas.draw()
        seen[str(path).rsplit("/", 1)[-1]] = {
            "suptitle": fig._suptitle.get_text() if fig._suptitle else "",
            "axes": [{"title": ax.get_title(), "ylabel": ax.get_ylabel(), "offset": ax.yaxis.get_offset_text().get_text(),
                      "legend": [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else [],
                      "texts": [t.get_text() for t in ax.texts], "ylim": ax.get_ylim(),
                      "hlines": [tuple(line.get_ydata()) for line in ax.lines if line.get_linestyle() == "--"]}
                     for ax in fig.axes if ax.get_visible()]}
        plt.close(fig)
        return path

    monkeypatch.setattr(module, "save", keep)
    return seen


def test_the_identity_names_defenses_label_epsilon_and_seeded_noise():
    ident = style.run_identity(_Cfg())
    assert ident.title == "demo (pbm) M=4 seed=0 20 epochs b=16 β=0.25 + label_rr ε=1"  # threshold 0: automatic
    assert "randomized" in ident.train_label()
    gp = style.run_identity(_Cfg(defenses=[{"kind": "label_gp", "noise_multiplier": 1.5}]), {"epsilon_label": 2.345})
    assert gp.title.endswith("+ label_gp σ=1.5 label ε=2.35") and gp.train_note == ""  # label_gp's ε: the accountant's
    seeded = style.run_identity(_Cfg(defenses=[], privacy={"noise_rng": "seeded"}), omit=["params.b", "seed"])
    assert seeded.title == "demo (pbm) M=4 20 epochs β=0.25 (seeded noise: not private)"


def test_the_metric_table_names_every_key_with_its_unit_secureboost_included():
    for key, axis in (("test_acc", "test accuracy (fraction)"), ("final_test_acc", "final test accuracy (fraction)"),
                      ("total_bytes_up", "bytes up, whole run (MB)"), ("wall_s", "wall time of the run (s)"),
                      ("test_rmse", "test RMSE (target units)"), ("n_trees", "trees in the ensemble (trees)"),
                      ("s_per_tree", "time per tree (s)"), ("test_auc", "test ROC AUC")):
        assert style.metric(key).axis() == axis
    assert style.metric("total_bytes_down").scale == 1e-6
    assert style.metric("some_new_key").name == "some new key"  # unknown: its own name, readable
    assert style.loss_kind([{"train_loss": 1.0, "test_rmse": 2.0}]) == "squared error"
    assert style.loss_kind([{"train_loss": 1.0, "test_acc": 0.5, "test_auc": 0.7}]) == "cross-entropy"


def test_a_runs_curves_are_labelled_titled_and_free_of_offsets(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, plots)
    plots.plot_run(_rows(), tmp_path, identity=DEFENDED)
    assert set(seen) == {"accuracy.png", "loss.png", "bytes.png", "epsilon.png"}
    for name, fig in seen.items():
        (ax,) = fig["axes"]
        assert ax["title"].replace("\n", " ") == DEFENDED.title, name
        assert ax["ylabel"] and ax["offset"] == "", (name, ax["offset"])  # old: "+1.135e3" over a flat ε
    acc = seen["accuracy.png"]["axes"][0]
    assert acc["legend"] == ["train (on the labels label_rr randomized, not the true ones)",
                             "test (held-out rows, after the epoch)"]
    assert seen["loss.png"]["axes"][0]["ylabel"] == "loss (cross-entropy)"
    assert seen["bytes.png"]["axes"][0]["ylabel"].startswith("cumulative MB")
    lo, hi = seen["epsilon.png"]["axes"][0]["ylim"]
    assert lo < 1135.34 < hi and hi - lo == pytest.approx(0.1 * 1135.34, rel=1e-3)  # a constant ε: flat, ±5 %


def test_a_tree_ensembles_rows_get_their_own_figures(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, plots)
    rows = [{"epoch": e, "train_loss": 0.6 - 0.1 * e, "test_auc": 0.7 + 0.05 * e, "test_acc": 0.6 + 0.05 * e,
             "n_trees": e + 1, "s_per_tree": 0.25, "cum_bytes_up": 1e5 * (e + 1), "cum_bytes_down": 2e4 * (e + 1)}
            for e in range(3)]
    plots.plot_run(rows, tmp_path, identity=style.RunIdentity("bank (secureboost) M=2 seed=0 3 epochs"))
    assert {"accuracy.png", "auc.png", "trees.png", "tree_time.png", "loss.png", "bytes.png"} <= set(seen)
    assert seen["accuracy.png"]["axes"][0]["ylabel"] == "test accuracy (fraction)"  # one curve: the y label names it
    assert seen["auc.png"]["axes"][0]["ylabel"] == "test ROC AUC"
    assert seen["trees.png"]["axes"][0]["ylabel"] == "trees in the ensemble (trees)"
    assert seen["tree_time.png"]["axes"][0]["ylabel"] == "time per tree (s)"
    regression = [{"epoch": e, "train_loss": 1.0 / (e + 1), "test_rmse": 2.0 - 0.1 * e} for e in range(2)]
    seen.clear()
    plots.plot_run(regression, tmp_path, identity=style.RunIdentity("house (secureboost)"))
    assert seen["rmse.png"]["axes"][0]["ylabel"] == "test RMSE (target units)"
    assert seen["loss.png"]["axes"][0]["ylabel"] == "loss (squared error)"


def test_a_sweep_names_its_config_units_and_variance_without_offsets(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, plots)
    rows = [{"params.b": b, "n": 3, "final_test_acc_mean": a, "final_test_acc_std": 0.01,
             "total_bytes_up_mean": 1812560.0 * b / 16, "total_bytes_up_std": 0.0,
             "epsilon_mean": 1135.3397734467708, "epsilon_std": 0.0} for b, a in ((8, 0.90), (16, 0.93), (64, 0.95))]
    plots.sweep_figure(rows, ["params.b"], ["final_test_acc", "total_bytes_up", "epsilon"], tmp_path / "sweep.png",
                       identity="demo (pbm) M=4 20 epochs β=0.25", variance="mean ± sample std over seeds 0,1,2")
    fig = seen["sweep.png"]
    assert fig["suptitle"].splitlines() == ["demo (pbm) M=4 20 epochs β=0.25", "mean ± sample std over seeds 0,1,2"]
    panels = {ax["title"]: ax for ax in fig["axes"]}
    assert set(panels) == {"final test accuracy", "bytes up, whole run", "ε (accountant, upper bound)"}  # old: raw keys
    assert panels["bytes up, whole run"]["ylabel"] == "MB" and panels["final test accuracy"]["ylabel"] == "fraction"
    assert all(ax["offset"] == "" for ax in fig["axes"])  # old: "1e6" over the byte panel
    lo, hi = panels["ε (accountant, upper bound)"]["ylim"]
    assert hi - lo == pytest.approx(0.1 * 1135.34, rel=1e-3)  # the constant ε is a flat row, not noise


def test_the_report_figures_name_the_run_and_show_a_chance_of_zero(tmp_path, monkeypatch):
    seen = _capture(monkeypatch, figures)
    results = [AttackResult("noisy_samples", "acc_drop", 0.04, 0.0, baseline_label="no attack",
                            ci=style_ci(-0.004, 0.082)),
               AttackResult("dlg_label", "label accuracy", 0.125, 0.1017, ci=wilson(1, 8), baseline_label="majority class"),
               AttackResult("membership_loss", "ROC AUC", 0.49, 0.5, ci=style_ci(0.45, 0.53))]
    figures.attacks(results, tmp_path, DEFENDED)
    figures.audit(0.8, 1135.0, 3.8, tmp_path, DEFENDED)

    class Acc:  # what figures.privacy reads of an accountant: its orders and composed RDP
        orders = [1.5, 2.0, 4.0, 8.0, 16.0, 32.0]

        def rdp(self):
            return [0.5 * a for a in self.orders]

    figures.privacy(Acc(), 1e-5, "per-release feature privacy (PBM-VFL Thm 6.1)", tmp_path, DEFENDED)
    att = seen["attacks.png"]
    assert DEFENDED.title in att["suptitle"]  # old: no title at all
    noisy = next(ax for ax in att["axes"] if ax["title"].startswith("noisy samples"))
    assert noisy["ylabel"] == "test accuracy drop\n(fraction)"  # old: no y label
    assert "0" in noisy["texts"] and (0.0, 0.0) in noisy["hlines"]  # the chance of 0: its number and a line at 0
    assert all(ax["ylabel"] and ax["offset"] == "" for ax in att["axes"])
    for name in ("audit.png", "rdp.png", "epsilon_delta.png"):
        assert DEFENDED.title in seen[name]["axes"][0]["title"].replace("\n", " "), name  # old rdp.png: no run


def style_ci(lo, hi):
    from simulations.report.intervals import Interval

    return Interval(lo, hi, "test")


def test_the_reconstruction_figure_names_the_run_too(tmp_path, monkeypatch):
    import numpy as np

    seen = _capture(monkeypatch, figures)
    cfg = _Cfg()
    cfg.data = SimpleNamespace(partition="contiguous")
    shards = [SimpleNamespace(x_train=np.random.default_rng(i).random((10, 16)), input_shape=(16,)) for i in range(4)]
    run = SimpleNamespace(parts=(shards, None), cfg=cfg, summary={}, path=tmp_path)
    recon = [s.x_train[:8] for s in shards]
    figures.reconstruction_figure(run, np.arange(8), recon)
    assert "demo (pbm) M=4 seed=0 20 epochs" in seen["reconstruction.png"]["suptitle"].replace("\n", " ")

